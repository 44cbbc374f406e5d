package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ModulePath resolves a user's spec.path inside the extracted artifact dir.
// A leading "/" means the artifact's root, as in Flux's own spec.path. The
// path, after symlinks are followed, must stay inside dir and be a
// directory; otherwise the error wraps ErrInvalidPath and says why. It
// returns the cleaned slash-separated path relative to dir ("." for the
// root) and the absolute directory.
func ModulePath(dir, path string) (rel, abs string, err error) {
	rel = filepath.Clean(strings.TrimLeft(filepath.FromSlash(path), string(filepath.Separator)))
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", "", fmt.Errorf("%w: spec.path %q must stay inside the source artifact", ErrInvalidPath, path)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	abs = filepath.Join(root, rel)

	// Follow symlinks (a tree that did not come from Fetch may have them)
	// and compare real paths, so a link cannot lead outside.
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", "", fmt.Errorf("resolving the artifact directory: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("%w: spec.path %q does not exist in the source artifact", ErrInvalidPath, path)
	}
	if err != nil {
		return "", "", fmt.Errorf("%w: spec.path %q cannot be resolved in the source artifact: %w", ErrInvalidPath, path, err)
	}
	if r, err := filepath.Rel(realRoot, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", "", fmt.Errorf("%w: spec.path %q must stay inside the source artifact (a symlink on it points outside)", ErrInvalidPath, path)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", "", fmt.Errorf("%w: spec.path %q cannot be read in the source artifact: %w", ErrInvalidPath, path, err)
	}
	if !fi.IsDir() {
		return "", "", fmt.Errorf("%w: spec.path %q is not a directory in the source artifact", ErrInvalidPath, path)
	}
	return filepath.ToSlash(rel), abs, nil
}
