package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// PruneOptions bound the artifact cache. A zero bound is no bound.
type PruneOptions struct {
	// MaxAge removes the artifacts that no Fetch has returned for this long.
	MaxAge time.Duration
	// MaxSize, in bytes, removes the least recently used artifacts while the
	// cache (tarballs, extracted trees and leftovers of interrupted
	// downloads, by the apparent size of their files) is larger.
	MaxSize int64
	// MinAge spares every artifact that Fetch returned less than MinAge ago,
	// whatever MaxAge and MaxSize say, so the cache may stay above MaxSize:
	// Fetch's callers read the tarball and the tree after Fetch returns, and
	// MinAge must be longer than they do. Leftovers of interrupted downloads
	// and extractions are removed once this old. DefaultPruneMinAge when
	// zero or negative; it cannot be turned off.
	MinAge time.Duration
}

// DefaultPruneMinAge is PruneOptions.MinAge when none is set.
const DefaultPruneMinAge = time.Hour

func (o PruneOptions) minAge() time.Duration {
	if o.MinAge <= 0 {
		return DefaultPruneMinAge
	}
	return o.MinAge
}

// PruneResult says what one Prune did.
type PruneResult struct {
	// Removed is how many artifacts (tarball and tree) were removed.
	Removed int
	// FreedBytes is how many bytes were removed, leftovers of interrupted
	// downloads and extractions included.
	FreedBytes int64
	// RemainingBytes is the size of the cache after the prune, as this prune
	// measured it; Fetches running meanwhile may have added to it.
	RemainingBytes int64
}

// cached is one artifact in the cache as Prune found it.
type cached struct {
	base, hex string    // <Dir>/<algorithm>, and the digest's hex
	lastUse   time.Time // the tarball's mtime (the tree's when there is no tarball)
	removed   bool
}

func (c *cached) key() string { return filepath.Base(c.base) + ":" + c.hex }

// Prune removes the artifacts that no Fetch has returned for opts.MaxAge,
// then, while the cache is larger than opts.MaxSize, the least recently used
// ones. It never removes an artifact that a Fetch holds right now or
// returned less than opts.MinAge ago. Errors do not stop it; the result
// counts what was done.
func (f *Fetcher) Prune(opts PruneOptions) (PruneResult, error) {
	var res PruneResult
	algos, err := os.ReadDir(f.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	now := time.Now()
	// Anything used at or after spareAfter is spared.
	spareAfter := now.Add(-opts.minAge())

	var (
		arts []*cached
		errs []error
	)
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
		byHex := map[string]*cached{}
		for _, e := range entries {
			name := e.Name()
			path := filepath.Join(base, name)
			res.RemainingBytes += diskUsage(path)
			if strings.HasPrefix(name, tmpPrefix) {
				freed, err := f.removeLeftover(path, spareAfter)
				res.FreedBytes += freed
				res.RemainingBytes -= freed
				errs = append(errs, err)
				continue
			}
			hex, isTarball := strings.CutSuffix(name, ".tar.gz")
			if !isTarball && !e.IsDir() {
				continue // not ours; counted, never removed
			}
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			c := byHex[hex]
			if c == nil {
				c = &cached{base: base, hex: hex}
				byHex[hex] = c
				arts = append(arts, c)
			}
			if isTarball || c.lastUse.IsZero() {
				c.lastUse = info.ModTime()
			}
		}
	}

	remove := func(c *cached) {
		freed, err := f.removeArtifact(c)
		res.FreedBytes += freed
		res.RemainingBytes -= freed
		if c.removed {
			res.Removed++
		}
		errs = append(errs, err)
	}
	if opts.MaxAge > 0 {
		cutoff := now.Add(-opts.MaxAge)
		for _, c := range arts {
			if c.lastUse.Before(cutoff) && c.lastUse.Before(spareAfter) {
				remove(c)
			}
		}
	}
	if opts.MaxSize > 0 {
		slices.SortFunc(arts, func(a, b *cached) int { return a.lastUse.Compare(b.lastUse) })
		for _, c := range arts {
			if res.RemainingBytes <= opts.MaxSize || !c.lastUse.Before(spareAfter) {
				break // under the bound, or only recently used ones are left
			}
			if !c.removed {
				remove(c)
			}
		}
	}
	return res, errors.Join(errs...)
}

// removeArtifact removes c's tarball and tree unless a Fetch holds the
// digest or has returned it since Prune looked, and returns the bytes freed.
func (f *Fetcher) removeArtifact(c *cached) (int64, error) {
	unlock, ok := f.locks.tryLock(c.key())
	if !ok {
		return 0, nil
	}
	defer unlock()
	tarball := filepath.Join(c.base, c.hex+".tar.gz")
	tree := filepath.Join(c.base, c.hex)
	info, err := os.Stat(tarball)
	if errors.Is(err, os.ErrNotExist) {
		info, err = os.Stat(tree)
	}
	if err != nil || info.ModTime().After(c.lastUse) {
		return 0, nil // gone, or used since
	}
	before := diskUsage(tarball) + diskUsage(tree)
	err = removeTree(c.base, c.hex)
	if err == nil {
		if err = os.Remove(tarball); errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		return before - diskUsage(tarball) - diskUsage(tree), err
	}
	c.removed = true
	return before, nil
}

// removeLeftover removes a partial download or extraction (or a tree whose
// removal failed) older than spareAfter that no Fetch is writing, and
// returns the bytes freed. Its name, .tmp-<hex>-..., says which digest's
// lock guards it.
func (f *Fetcher) removeLeftover(path string, spareAfter time.Time) (int64, error) {
	info, err := os.Lstat(path)
	if err != nil || !info.ModTime().Before(spareAfter) {
		return 0, nil
	}
	hex, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(path), tmpPrefix), "-")
	unlock, ok := f.locks.tryLock(filepath.Base(filepath.Dir(path)) + ":" + hex)
	if !ok {
		return 0, nil
	}
	defer unlock()
	size := diskUsage(path)
	err = os.RemoveAll(path)
	return size - diskUsage(path), err
}

// removeTree moves the tree out of its final name before deleting it, so a
// removal that fails half-way never leaves a partial tree that Fetch would
// take for a complete one.
func removeTree(base, hex string) error {
	tree := filepath.Join(base, hex)
	doomed := filepath.Join(base, tmpPrefix+hex+"-prune")
	if err := os.Rename(tree, doomed); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.RemoveAll(doomed)
}

// diskUsage is the apparent size of the regular files at or under path; 0
// when it does not exist.
func diskUsage(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile, or unreadable: not counted
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
