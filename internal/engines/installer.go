package engines

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-version"
	"golang.org/x/sync/singleflight"
)

// Defaults of an Installer's zero fields. An engine's release archive is
// tens of MB (the binary inside, about 100 MB); the cap is there for a
// mirror that answers with something else.
const (
	DefaultMaxDownload = 256 << 20
	DefaultTimeout     = 5 * time.Minute
	DefaultKeep        = 5
)

const (
	// recordFile, in a version's directory, records what was installed
	// there; its modification time is the version's last use.
	recordFile = "engine.json"
	// tmpPrefix starts the names of the directories a download fills
	// and a pruned version is moved to, in Dir.
	tmpPrefix = ".install-"
)

// Installer installs engines into Dir, verified, and answers from there or
// from Local without a request when it can.
//
// Dir holds <name>/<version>/ for each installed version: the binary and
// engine.json (its sha256, its source). A download fills a directory of its
// own in Dir and is renamed into place when it has verified: a version's
// directory is complete or absent, and when two processes install one
// version at once, the first rename wins (rename does not replace a
// non-empty directory) and the other process uses that one. A download
// that fails leaves nothing in Dir.
//
// An Installer is safe for concurrent use; concurrent Installs of one Spec
// share one download, which runs to the end (or Timeout) even when the
// caller that started it gives up.
type Installer struct {
	// Dir is the cache of installed versions, shared by the runners of a
	// machine.
	Dir string
	// MaxDownload caps the bytes one install downloads. Zero:
	// DefaultMaxDownload.
	MaxDownload int64
	// Timeout bounds one install, download and verification included.
	// Zero: DefaultTimeout.
	Timeout time.Duration
	// Local are engine binaries already present, e.g. the runner image's
	// own tofu and terraform: a binary named as the engine's (tofu,
	// terraform) whose version is the one wanted is used as it is.
	Local []string
	// Keep is how many versions Dir keeps: after a download, the least
	// recently used beyond Keep are removed. Zero: DefaultKeep.
	Keep int
	// Transport makes the HTTP requests (e.g. through a proxy, with a
	// private CA). Nil: http.DefaultTransport.
	Transport http.RoundTripper

	flight singleflight.Group

	mu sync.Mutex
	// verified are the cached binaries whose digest this process checked,
	// as they were then.
	verified map[string]stamp
	// localVersions are the versions of Local binaries, as they were when
	// this process ran them.
	localVersions map[string]localVersion
}

// stamp tells a file that changed.
type stamp struct {
	size  int64
	mtime time.Time
}

func stampOf(fi os.FileInfo) stamp { return stamp{fi.Size(), fi.ModTime()} }

type localVersion struct {
	stamp
	version *version.Version
}

// record is engine.json.
type record struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// SHA256 is the binary's digest, hex.
	SHA256 string `json:"sha256"`
	// Source is where it was downloaded from.
	Source string `json:"source"`
}

func (i *Installer) maxDownload() int64     { return orDefault(i.MaxDownload, DefaultMaxDownload) }
func (i *Installer) timeout() time.Duration { return orDefault(i.Timeout, DefaultTimeout) }
func (i *Installer) keep() int              { return orDefault(i.Keep, DefaultKeep) }

// orDefault is v where it is set (positive), else def: the zero value of
// an Installer's or a Resolver's limit means its default.
func orDefault[T ~int | ~int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

func (i *Installer) transport() http.RoundTripper {
	if i.Transport != nil {
		return i.Transport
	}
	return http.DefaultTransport
}

// Install returns the path of the binary of spec's engine and version: the
// one installed in Dir, else one of Local, else one downloaded from spec's
// source and verified. A download that fails verification is a
// *VerificationError; a version that cannot be had, an *UnavailableError.
func (i *Installer) Install(ctx context.Context, sp Spec) (string, error) {
	s, err := check(sp)
	if err != nil {
		return "", err
	}
	key := strings.Join([]string{s.Name, s.Version, s.ReleasesURL, s.SigningKey}, "\x00")
	ch := i.flight.DoChan(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), i.timeout())
		defer cancel()
		return i.install(ctx, s)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", fmt.Errorf("installing %s %s: %w", s.Name, s.Version, ctx.Err())
	}
}

func (i *Installer) install(ctx context.Context, s spec) (string, error) {
	if i.Dir == "" {
		return "", errors.New("the engine installer has no directory to install into")
	}
	dir, err := filepath.Abs(i.Dir)
	if err != nil {
		return "", err
	}
	if bin, ok := i.cached(dir, s); ok {
		return bin, nil
	}
	if bin, ok := i.local(ctx, s); ok {
		return bin, nil
	}
	bin, err := i.download(ctx, dir, s)
	if err != nil {
		return "", err
	}
	// A version that cannot be pruned now is pruned after a later
	// download; it is no reason to fail this one.
	_ = i.prune(dir, filepath.Dir(bin))
	return bin, nil
}

// cached returns s's binary in dir if it is there, intact: its digest is
// checked against engine.json once per process (hashing 100 MB takes some
// 0.3 s), then trusted while its size and modification time hold. A
// damaged version is moved out of the way, to be downloaded again.
func (i *Installer) cached(dir string, s spec) (string, bool) {
	vdir := filepath.Join(dir, s.Name, s.Version)
	bin := filepath.Join(vdir, binaryName(s.Name))
	b, err := os.ReadFile(filepath.Join(vdir, recordFile))
	if err != nil {
		return "", false
	}
	var rec record
	fi, err := os.Stat(bin)
	if json.Unmarshal(b, &rec) != nil || err != nil {
		_ = discard(dir, vdir)
		return "", false
	}
	i.mu.Lock()
	checked := i.verified[bin] == stampOf(fi)
	i.mu.Unlock()
	if !checked {
		if sum, err := FileSHA256(bin); err != nil || sum != rec.SHA256 {
			_ = discard(dir, vdir)
			return "", false
		}
		i.remember(bin, fi)
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(vdir, recordFile), now, now)
	return bin, true
}

func (i *Installer) remember(bin string, fi os.FileInfo) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.verified == nil {
		i.verified = map[string]stamp{}
	}
	i.verified[bin] = stampOf(fi)
}

// local returns the first of Local that is s's engine and version.
func (i *Installer) local(ctx context.Context, s spec) (string, bool) {
	for _, p := range i.Local {
		if filepath.Base(p) != binaryName(s.Name) {
			continue
		}
		v, err := i.localVersion(ctx, p)
		if err == nil && v.Equal(s.version) {
			abs, err := filepath.Abs(p)
			return abs, err == nil
		}
	}
	return "", false
}

// localVersion asks the binary at p for its version, once while the file
// stays the same.
//
// hc-install's fs.ExactVersion does this too, but searches $PATH before
// the directories it is given, so what it finds would depend on the
// environment of the process rather than on Local; and its version check
// (product.Terraform.GetVersion) parses all the output as JSON, which
// OpenTofu 1.12 precedes, on stdout, with a warning when
// TF_CLI_CONFIG_FILE names a missing file, then falls back to matching
// "Terraform v", which OpenTofu never prints.
func (i *Installer) localVersion(ctx context.Context, p string) (*version.Version, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	i.mu.Lock()
	lv, ok := i.localVersions[p]
	i.mu.Unlock()
	if ok && lv.stamp == stampOf(fi) {
		return lv.version, nil
	}
	cmd := exec.CommandContext(ctx, p, "version", "-json")
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1")
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	// Warnings may come first, on stdout: OpenTofu's for a
	// TF_CLI_CONFIG_FILE that does not exist, say.
	if !bytes.HasPrefix(out, []byte("{")) {
		if at := bytes.Index(out, []byte("\n{")); at >= 0 {
			out = out[at+1:]
		}
	}
	var v struct {
		Version *version.Version `json:"terraform_version"`
	}
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&v); err != nil || v.Version == nil {
		return nil, fmt.Errorf("%s version -json: %q", p, out)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.localVersions == nil {
		i.localVersions = map[string]localVersion{}
	}
	i.localVersions[p] = localVersion{stampOf(fi), v.Version}
	return v.Version, nil
}

// download fetches and verifies s into a directory of its own in dir, then
// renames it into place.
func (i *Installer) download(ctx context.Context, dir string, s spec) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, tmpPrefix+s.Name+"-"+s.Version+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	w := &watch{base: i.transport(), limit: i.maxDownload(), timeout: i.timeout()}
	var bin string
	if s.Name == Terraform {
		bin, err = i.downloadTerraform(ctx, s, tmp, w)
	} else {
		bin, err = i.downloadOpenTofu(ctx, s, tmp, w)
	}
	if err != nil {
		return "", err
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		return "", err
	}
	sum, err := FileSHA256(bin)
	if err != nil {
		return "", err
	}
	rec, err := json.Marshal(record{Name: s.Name, Version: s.Version, SHA256: sum, Source: s.source()})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, recordFile), rec, 0o644); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	vdir := filepath.Join(dir, s.Name, s.Version)
	if err := os.MkdirAll(filepath.Dir(vdir), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, vdir); err != nil {
		// Another process installed it first.
		if bin, ok := i.cached(dir, s); ok {
			return bin, nil
		}
		return "", fmt.Errorf("installing %s %s into %s: %w", s.Name, s.Version, dir, err)
	}
	bin = filepath.Join(vdir, binaryName(s.Name))
	if fi, err := os.Stat(bin); err == nil {
		i.remember(bin, fi)
	}
	return bin, nil
}

// refusal is the error of a download that failed: local when writing
// failed here, unavailable when a request failed (watch), else what the
// library's error says, as read by verification and missing.
func (i *Installer) refusal(s spec, w *watch, err error, verification, missing func(error) (string, bool)) error {
	err = s.scrub(err)
	if local := w.localFailed(); local != nil {
		return fmt.Errorf("installing %s %s: %w", s.Name, s.Version, local)
	}
	if f := w.failure(); f != nil {
		return &UnavailableError{Engine: s.Name, Version: s.Version, URL: f.url, Reason: f.reason, Searched: i.Local, Err: err}
	}
	if reason, ok := verification(err); ok {
		return &VerificationError{Engine: s.Name, Version: s.Version, URL: s.source(), Reason: reason, Err: err}
	}
	if reason, ok := missing(err); ok {
		return &UnavailableError{Engine: s.Name, Version: s.Version, URL: s.source(), Reason: reason, Searched: i.Local, Err: err}
	}
	return fmt.Errorf("installing %s %s from %s: %w", s.Name, s.Version, s.source(), err)
}

// prune removes the least recently used versions beyond Keep, never keep
// (the one just installed), and what interrupted downloads left behind.
//
// A version is used when Install returns it; its binary runs afterwards.
// Removing a running binary is harmless on Linux, so the one race left is
// a version pruned between another process's Install and its exec, which
// takes more than Keep versions installed in those moments.
func (i *Installer) prune(dir, keep string) error {
	type version struct {
		dir  string
		used time.Time
	}
	var versions []version
	var errs []error
	for _, name := range []string{OpenTofu, Terraform} {
		entries, err := os.ReadDir(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, e := range entries {
			vdir := filepath.Join(dir, name, e.Name())
			if fi, err := os.Stat(filepath.Join(vdir, recordFile)); err == nil && vdir != keep {
				versions = append(versions, version{vdir, fi.ModTime()})
			}
		}
	}
	slices.SortFunc(versions, func(a, b version) int { return b.used.Compare(a.used) })
	for n, v := range versions {
		if n+1 >= i.keep() {
			errs = append(errs, discard(dir, v.dir))
		}
	}
	// An interrupted download's directory is older than any download
	// may take.
	entries, err := os.ReadDir(dir)
	errs = append(errs, err)
	for _, e := range entries {
		fi, err := e.Info()
		if strings.HasPrefix(e.Name(), tmpPrefix) && err == nil && time.Since(fi.ModTime()) > 2*i.timeout() {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// discard removes the version directory vdir of dir: renamed first, so
// that no one sees it half removed.
func discard(dir, vdir string) error {
	trash := filepath.Join(dir, tmpPrefix+"pruned-"+rand.Text())
	if err := os.Rename(vdir, trash); err != nil {
		return err
	}
	return os.RemoveAll(trash)
}

// FileSHA256 is the hex SHA-256 of the file at p, as SHA256SUMS lists it.
func FileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
