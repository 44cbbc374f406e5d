package engines_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/landform-dev/landform/internal/engines"
	"github.com/landform-dev/landform/internal/testenv/enginemirror"
)

func TestResolve(t *testing.T) {
	es := bothEngines(t)
	// Extra versions, all the same binary: a newer patch that sorts
	// before the real one as text, an older minor, a prerelease and a
	// major that constraints must skip.
	m := enginemirror.New(t,
		es[0].serve("1.5.10", "1.4.6", "1.6.0-beta1", "2.0.0"),
		es[1].serve("1.12.10", "1.11.5", "1.13.0-rc1", "2.0.0"))
	for _, tc := range []struct {
		engine, constraint, want string
	}{
		{engines.Terraform, "~> 1.5", "1.5.10"},
		{engines.Terraform, "~> 1.4.0", "1.4.6"},
		{engines.Terraform, ">= 1.5, < 2.0", "1.5.10"},
		{engines.Terraform, "< 1.5.8", "1.5.7"},
		{engines.Terraform, ">= 1.0", "2.0.0"},
		{engines.Terraform, "~> 1.6.0-beta1", "1.6.0-beta1"},
		{engines.OpenTofu, "~> 1.11", "1.12.10"},
		{engines.OpenTofu, "~> 1.11.0", "1.11.5"},
		{engines.OpenTofu, "< 1.12.7, >= 1.12", "1.12.6"},
	} {
		t.Run(tc.engine+" "+tc.constraint, func(t *testing.T) {
			r := &engines.Resolver{Transport: loopbackOnly(t)}
			got, err := r.Resolve(context.Background(), tc.engine, tc.constraint, m.URL(tc.engine))
			if err != nil || got != tc.want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", tc.constraint, got, err, tc.want)
			}
		})
	}
}

func TestResolveExactVersionMakesNoRequest(t *testing.T) {
	down := enginemirror.Unreachable(t)
	for _, tc := range []struct{ engine, version, want string }{
		{engines.Terraform, "1.5.7", "1.5.7"},
		{engines.Terraform, "v1.9.0-alpha20240404", "1.9.0-alpha20240404"},
		{engines.OpenTofu, "1.10.0-rc1", "1.10.0-rc1"},
	} {
		r := &engines.Resolver{Transport: loopbackOnly(t)}
		got, err := r.Resolve(context.Background(), tc.engine, tc.version, down)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%s %q) = %q, %v; want %q", tc.engine, tc.version, got, err, tc.want)
		}
	}
}

func TestResolveListsOncePerTTL(t *testing.T) {
	e := bothEngines(t)[0]
	m := enginemirror.New(t, e.serve("1.4.6"))
	r := &engines.Resolver{Transport: loopbackOnly(t), TTL: time.Hour}
	for _, c := range []string{"~> 1.5", "~> 1.4.0", ">= 1.0"} {
		if _, err := r.Resolve(context.Background(), e.name, c, m.URL(e.name)); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Requests("/terraform/index.json"); n != 1 {
		t.Errorf("listed %d times, want once", n)
	}

	r.TTL = time.Nanosecond
	if _, err := r.Resolve(context.Background(), e.name, "~> 1.5", m.URL(e.name)); err != nil {
		t.Fatal(err)
	}
	if n := m.Requests("/terraform/index.json"); n != 2 {
		t.Errorf("listed %d times after the TTL, want twice", n)
	}
}

func TestResolveSaysWhatIsUnavailable(t *testing.T) {
	for _, e := range bothEngines(t) {
		m := enginemirror.New(t, e.serve())
		down := enginemirror.Unreachable(t)
		for _, tc := range []struct {
			name, url, reason string
		}{
			{"no match", m.URL(e.name), "no version it lists matches (the newest is " + e.version + ")"},
			{"mirror unreachable", down, "connection refused"},
		} {
			t.Run(e.name+"/"+tc.name, func(t *testing.T) {
				r := &engines.Resolver{Transport: loopbackOnly(t)}
				got, err := r.Resolve(context.Background(), e.name, "~> 9.0", tc.url)
				var uerr *engines.UnavailableError
				if !errors.As(err, &uerr) {
					t.Fatalf("Resolve = %q, %v; want an *UnavailableError", got, err)
				}
				t.Log(err)
				for _, s := range []string{e.name + " ~> 9.0", tc.url, tc.reason, "releases URL"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("message %q does not say %q", err, s)
					}
				}
			})
		}
	}
}
