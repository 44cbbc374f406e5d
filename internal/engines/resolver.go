package engines

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/hc-install/product"
	"github.com/hashicorp/hc-install/releases"
	"golang.org/x/sync/singleflight"
)

// Defaults of a Resolver's zero fields.
const (
	DefaultListTTL     = 10 * time.Minute
	DefaultListTimeout = 30 * time.Second
)

// maxListing caps a version listing: releases.hashicorp.com's
// terraform/index.json, every version with every build, is the largest.
const maxListing = 64 << 20

// Resolver resolves a version constraint to the newest version a source
// lists that matches it. It keeps each source's listing for TTL, so the controller
// may ask on every reconcile. It is safe for concurrent use.
type Resolver struct {
	// TTL is how long a listing is reused. Zero: DefaultListTTL.
	TTL time.Duration
	// Timeout bounds one listing. Zero: DefaultListTimeout.
	Timeout time.Duration
	// Transport makes the HTTP requests. Nil: http.DefaultTransport.
	Transport http.RoundTripper

	flight singleflight.Group

	mu       sync.Mutex
	listings map[string]listing
}

// listing is a source's versions, newest first.
type listing struct {
	versions []*version.Version
	at       time.Time
}

func (r *Resolver) ttl() time.Duration     { return orDefault(r.TTL, DefaultListTTL) }
func (r *Resolver) timeout() time.Duration { return orDefault(r.Timeout, DefaultListTimeout) }

// Resolve returns the version of engine name that constraint selects from
// the versions releasesURL lists (empty: the engine's official source; the
// URL as in Spec.ReleasesURL). An exact version returns itself, without a
// request. A constraint (hashicorp/go-version syntax: "~> 1.9",
// ">= 1.5, < 2.0") selects the newest version that matches, by go-version's
// rule a stable one unless the constraint itself names a prerelease
// ("~> 1.6.0-beta1"). A source that cannot be listed, or lists no match, is
// an *UnavailableError.
func (r *Resolver) Resolve(ctx context.Context, name, constraint, releasesURL string) (string, error) {
	if name != OpenTofu && name != Terraform {
		return "", fmt.Errorf("unknown engine %q: want %q or %q", name, OpenTofu, Terraform)
	}
	constraint = strings.TrimSpace(constraint)
	if exactVersion.MatchString(constraint) {
		v, err := exact(name, constraint)
		if err != nil {
			return "", err
		}
		return v.Original(), nil
	}
	cs, err := version.NewConstraint(constraint)
	if err != nil {
		return "", fmt.Errorf("%s version %q is neither a version nor a constraint: %w", name, constraint, err)
	}
	base, err := checkReleasesURL(releasesURL)
	if err != nil {
		return "", err
	}
	s := spec{Spec: Spec{Name: name, ReleasesURL: base}}
	versions, err := r.list(ctx, s)
	if err != nil {
		if u, ok := err.(*UnavailableError); ok {
			u.Version = constraint
		}
		return "", err
	}
	for _, v := range versions {
		if cs.Check(v) {
			return v.Original(), nil
		}
	}
	reason := "it lists no version"
	if len(versions) > 0 {
		reason = fmt.Sprintf("no version it lists matches (the newest is %s)", versions[0].Original())
	}
	return "", &UnavailableError{Engine: name, Version: constraint, URL: s.source(), Reason: reason}
}

// list returns s's source's versions, newest first, from the cache while
// it is fresh.
func (r *Resolver) list(ctx context.Context, s spec) ([]*version.Version, error) {
	key := s.Name + "\x00" + s.ReleasesURL
	r.mu.Lock()
	l, ok := r.listings[key]
	r.mu.Unlock()
	if ok && time.Since(l.at) < r.ttl() {
		return l.versions, nil
	}
	ch := r.flight.DoChan(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout())
		defer cancel()
		w := &watch{base: r.transport(), limit: maxListing, timeout: r.timeout()}
		var versions []*version.Version
		var err error
		if s.Name == Terraform {
			versions, err = listTerraform(ctx, s, w)
		} else {
			versions, err = listOpenTofu(ctx, s, w)
		}
		if err != nil {
			err = s.scrub(err)
			if f := w.failure(); f != nil {
				return nil, &UnavailableError{Engine: s.Name, URL: f.url, Reason: f.reason, Err: err}
			}
			return nil, fmt.Errorf("listing %s versions at %s: %w", s.Name, s.source(), err)
		}
		slices.SortFunc(versions, func(a, b *version.Version) int { return b.Compare(a) })
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.listings == nil {
			r.listings = map[string]listing{}
		}
		r.listings[key] = listing{versions: versions, at: time.Now()}
		return versions, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			// Each caller gets its own copy to name its constraint in.
			if u, ok := res.Err.(*UnavailableError); ok {
				c := *u
				return nil, &c
			}
			return nil, res.Err
		}
		return res.Val.([]*version.Version), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("listing %s versions: %w", s.Name, ctx.Err())
	}
}

func (r *Resolver) transport() http.RoundTripper {
	if r.Transport != nil {
		return r.Transport
	}
	return http.DefaultTransport
}

// listTerraform reads the releases API's product index (terraform/index.json)
// the way hc-install lists versions: without constraints, every version but
// the enterprise builds.
func listTerraform(ctx context.Context, s spec, w *watch) ([]*version.Version, error) {
	vs := &releases.Versions{
		Product:     product.Terraform,
		ApiBaseURL:  s.ReleasesURL,
		HTTPClient:  w.client(),
		ListTimeout: w.timeout,
	}
	sources, err := vs.List(ctx)
	if err != nil {
		return nil, err
	}
	versions := make([]*version.Version, 0, len(sources))
	for _, src := range sources {
		if ev, ok := src.(*releases.ExactVersion); ok {
			versions = append(versions, ev.Version)
		}
	}
	return versions, nil
}

// listOpenTofu reads the source's api.json through tofudl, every version.
func listOpenTofu(ctx context.Context, s spec, w *watch) ([]*version.Version, error) {
	dl, err := tofuDownloader(s, w)
	if err != nil {
		return nil, err
	}
	listed, err := dl.ListVersions(ctx)
	if err != nil {
		return nil, err
	}
	versions := make([]*version.Version, 0, len(listed))
	for _, l := range listed {
		if v, err := version.NewVersion(string(l.ID)); err == nil {
			versions = append(versions, v)
		}
	}
	return versions, nil
}
