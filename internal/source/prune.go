package source

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Prune removes cached artifacts (tarball and tree) that no Fetch has
// returned for maxAge, and partial downloads older than maxAge. An artifact
// being fetched right now is skipped. Fetch's callers read the tree after
// Fetch returns, so maxAge must be well above the longest run.
func (f *Fetcher) Prune(maxAge time.Duration) error {
	algos, err := os.ReadDir(f.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	cutoff := time.Now().Add(-maxAge)
	var errs []error
	for _, algo := range algos {
		if !algo.IsDir() {
			continue
		}
		base := filepath.Join(f.Dir, algo.Name())
		entries, err := os.ReadDir(base)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || !info.ModTime().Before(cutoff) {
				continue
			}
			name := e.Name()
			switch {
			case strings.HasPrefix(name, tmpPrefix):
				errs = append(errs, os.RemoveAll(filepath.Join(base, name)))
			case strings.HasSuffix(name, ".tar.gz"):
				hex := strings.TrimSuffix(name, ".tar.gz")
				unlock, ok := f.locks.tryLock(algo.Name() + ":" + hex)
				if !ok {
					continue
				}
				errs = append(errs, removeTree(base, hex), os.Remove(filepath.Join(base, name)))
				unlock()
			}
		}
	}
	return errors.Join(errs...)
}

// removeTree moves the tree out of its final name before deleting it, so a
// removal that fails half-way never leaves a partial tree that Fetch would
// take for a complete one.
func removeTree(base, hex string) error {
	tree := filepath.Join(base, hex)
	doomed := filepath.Join(base, tmpPrefix+"prune-"+hex)
	if err := os.Rename(tree, doomed); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.RemoveAll(doomed)
}
