package engines_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/landform-dev/landform/internal/engines"
	"github.com/landform-dev/landform/internal/testenv/enginemirror"
)

func TestInstallDownloadsVerifiesAndCaches(t *testing.T) {
	for _, e := range bothEngines(t) {
		t.Run(e.name, func(t *testing.T) {
			m := enginemirror.New(t, e.serve())
			dir := t.TempDir()
			in := &engines.Installer{Dir: dir, Transport: loopbackOnly(t)}

			bin, err := in.Install(context.Background(), e.spec(m))
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir, e.name, e.version, filepath.Base(e.binary)); bin != want {
				t.Errorf("installed at %s, want %s", bin, want)
			}
			out, err := engineCommand(bin, "version").Output()
			if err != nil || !strings.Contains(string(out), e.prints) {
				t.Fatalf("%s version: %v: %s (want %q)", bin, err, out, e.prints)
			}
			var rec struct{ SHA256 string }
			b, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "engine.json"))
			if err != nil || json.Unmarshal(b, &rec) != nil || rec.SHA256 != sha256Of(t, e.binary) {
				t.Errorf("engine.json records %q (%v), want the binary's sha256 %s", b, err, sha256Of(t, e.binary))
			}
			if n := m.Requests(enginemirror.ArchivePath(e.name, e.version)); n != 1 {
				t.Errorf("archive downloaded %d times, want 1", n)
			}

			// Another process sharing the directory: no request at all.
			before := m.TotalRequests()
			again := &engines.Installer{Dir: dir, Transport: loopbackOnly(t)}
			bin2, err := again.Install(context.Background(), e.spec(m))
			if err != nil || bin2 != bin {
				t.Fatalf("second install: %q, %v; want %q", bin2, err, bin)
			}
			if n := m.TotalRequests() - before; n != 0 {
				t.Errorf("second install made %d requests, want none", n)
			}
			if left := slices.DeleteFunc(entries(t, dir), func(n string) bool { return n == e.name }); len(left) > 0 {
				t.Errorf("left in the install directory: %v", left)
			}
		})
	}
}

func TestInstallRefusesWhatDoesNotVerify(t *testing.T) {
	for _, e := range bothEngines(t) {
		for _, tc := range []struct {
			name   string
			mirror enginemirror.Option
			reason string
		}{
			{"tampered archive", enginemirror.Tampered(e.name, e.version), "does not match the checksum in its signed SHA256SUMS"},
			{"signed by another key", enginemirror.SignedByAnotherKey(), "signature does not verify with the configured signing key"},
		} {
			t.Run(e.name+"/"+tc.name, func(t *testing.T) {
				m := enginemirror.New(t, e.serve(), tc.mirror)
				dir := t.TempDir()
				in := &engines.Installer{Dir: dir, Transport: loopbackOnly(t)}

				bin, err := in.Install(context.Background(), e.spec(m))
				var verr *engines.VerificationError
				if !errors.As(err, &verr) {
					t.Fatalf("Install = %q, %v; want a *VerificationError", bin, err)
				}
				t.Log(err)
				if !strings.Contains(verr.Reason, tc.reason) || verr.Version != e.version || verr.URL == "" {
					t.Errorf("refused with %q, want the version, the source and %q", err, tc.reason)
				}
				if left := entries(t, dir); len(left) > 0 {
					t.Errorf("left in the install directory: %v", left)
				}
			})
		}
	}
}

func TestInstallSaysWhatIsUnavailable(t *testing.T) {
	for _, e := range bothEngines(t) {
		for _, tc := range []struct {
			name    string
			mirror  []enginemirror.Option
			down    bool
			version string
			max     int64
			timeout time.Duration
			url     string // a path of the URL named, on the mirror
			reason  string
		}{{
			name: "mirror unreachable", down: true, reason: "connection refused",
		}, {
			name: "version not offered", version: "1.0.99",
			reason: map[string]string{engines.Terraform: "not offered there (404 Not Found)", engines.OpenTofu: "its api.json does not list it"}[e.name],
			url:    map[string]string{engines.Terraform: "/terraform/1.0.99/index.json", engines.OpenTofu: "/tofu/api.json"}[e.name],
		}, {
			name: "download too large", max: 1 << 20, reason: "exceeds its limit of 1048576 bytes",
			url: enginemirror.ArchivePath(e.name, e.version),
		}, {
			name: "download too slow", mirror: []enginemirror.Option{enginemirror.StallingArchives()}, timeout: time.Second,
			reason: "no complete answer within 1s", url: enginemirror.ArchivePath(e.name, e.version),
		}} {
			t.Run(e.name+"/"+tc.name, func(t *testing.T) {
				m := enginemirror.New(t, append(tc.mirror, e.serve())...)
				sp := e.spec(m)
				if tc.version != "" {
					sp.Version = tc.version
				}
				want := m.URL(e.name)
				if tc.down {
					sp.ReleasesURL = enginemirror.Unreachable(t)
					want = sp.ReleasesURL
				}
				if tc.url != "" {
					want = m.TerraformURL() + tc.url
				}
				in := &engines.Installer{
					Dir: t.TempDir(), MaxDownload: tc.max, Timeout: tc.timeout, Transport: loopbackOnly(t),
					Local: []string{"/opt/engines/" + filepath.Base(e.binary)},
				}

				bin, err := in.Install(context.Background(), sp)
				var uerr *engines.UnavailableError
				if !errors.As(err, &uerr) {
					t.Fatalf("Install = %q, %v; want an *UnavailableError", bin, err)
				}
				t.Log(err)
				msg := err.Error()
				for _, s := range []string{e.name + " " + sp.Version, "releases URL", in.Local[0], tc.reason} {
					if !strings.Contains(msg, s) {
						t.Errorf("message %q does not say %q", msg, s)
					}
				}
				if !strings.HasPrefix(uerr.URL, want) {
					t.Errorf("URL tried %s, want %s", uerr.URL, want)
				}
				if left := entries(t, in.Dir); len(left) > 0 {
					t.Errorf("left in the install directory: %v", left)
				}
			})
		}
	}
}

func TestInstallUsesLocalBinaryOfThatVersion(t *testing.T) {
	for _, e := range bothEngines(t) {
		t.Run(e.name, func(t *testing.T) {
			m := enginemirror.New(t, e.serve("1.0.99"))
			in := &engines.Installer{
				Dir:       t.TempDir(),
				Transport: loopbackOnly(t),
				Local:     []string{"/nonexistent/" + filepath.Base(e.binary), terraformBin, tofuBin},
			}
			want, err := filepath.Abs(e.binary)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				bin, err := in.Install(context.Background(), e.spec(m))
				if err != nil || bin != want {
					t.Fatalf("Install = %q, %v; want the local %s", bin, err, want)
				}
			}
			if n := m.TotalRequests(); n != 0 {
				t.Errorf("%d requests, want none", n)
			}
			if left := entries(t, in.Dir); len(left) > 0 {
				t.Errorf("installed into the directory: %v", left)
			}

			// Another version is downloaded, not taken from Local.
			other := e.spec(m)
			other.Version = "1.0.99"
			bin, err := in.Install(context.Background(), other)
			if err != nil || bin == want {
				t.Fatalf("Install(1.0.99) = %q, %v; want a download", bin, err)
			}
			if n := m.Requests(enginemirror.ArchivePath(e.name, "1.0.99")); n != 1 {
				t.Errorf("1.0.99 downloaded %d times, want 1", n)
			}
		})
	}
}

// Two processes installing one version into one directory at once: each
// downloads, one rename wins, both use it, nothing else stays.
func TestInstallConcurrentlyIntoOneDirectory(t *testing.T) {
	for _, e := range bothEngines(t) {
		t.Run(e.name, func(t *testing.T) {
			m := enginemirror.New(t, e.serve())
			dir := t.TempDir()
			paths := make([]string, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for n := range 2 {
				wg.Go(func() {
					in := &engines.Installer{Dir: dir, Transport: loopbackOnly(t)}
					paths[n], errs[n] = in.Install(context.Background(), e.spec(m))
				})
			}
			wg.Wait()
			if errs[0] != nil || errs[1] != nil || paths[0] != paths[1] {
				t.Fatalf("Install = %q, %v and %q, %v; want one path", paths[0], errs[0], paths[1], errs[1])
			}
			// Both downloaded, so one lost the rename.
			if n := m.Requests(enginemirror.ArchivePath(e.name, e.version)); n != 2 {
				t.Errorf("archive downloaded %d times, want twice", n)
			}
			if out, err := engineCommand(paths[0], "version").Output(); err != nil || !strings.Contains(string(out), e.prints) {
				t.Errorf("%s version: %v: %s", paths[0], err, out)
			}
			if got := entries(t, dir); !slices.Equal(got, []string{e.name}) {
				t.Errorf("install directory holds %v, want only %s/", got, e.name)
			}
			if got := entries(t, filepath.Join(dir, e.name)); !slices.Equal(got, []string{e.version}) {
				t.Errorf("%s/ holds %v, want only %s", e.name, got, e.version)
			}
		})
	}
}

func TestInstallPrunesLeastRecentlyUsed(t *testing.T) {
	e := bothEngines(t)[0]
	m := enginemirror.New(t, e.serve("1.4.6", "1.3.9"))
	dir := t.TempDir()
	in := &engines.Installer{Dir: dir, Keep: 2, Transport: loopbackOnly(t)}
	install := func(v string) {
		t.Helper()
		sp := e.spec(m)
		sp.Version = v
		if _, err := in.Install(context.Background(), sp); err != nil {
			t.Fatal(err)
		}
	}
	install("1.5.7")
	install("1.4.6")
	install("1.5.7") // used again: now 1.4.6 is the least recently used

	// What a download killed a day ago left, and one under way now in
	// another process.
	killed, running := filepath.Join(dir, ".install-terraform-1.2.0-1"), filepath.Join(dir, ".install-terraform-1.3.9-2")
	for _, d := range []string{killed, running} {
		if err := os.MkdirAll(d, 0o700); err != nil || os.WriteFile(filepath.Join(d, "terraform"), []byte("partial"), 0o600) != nil {
			t.Fatal(err)
		}
	}
	dayAgo := time.Now().Add(-24 * time.Hour)
	if err := os.Chtimes(killed, dayAgo, dayAgo); err != nil {
		t.Fatal(err)
	}

	install("1.3.9")

	if got := entries(t, filepath.Join(dir, e.name)); !slices.Equal(got, []string{"1.3.9", "1.5.7"}) {
		t.Errorf("kept %v, want 1.3.9 and 1.5.7", got)
	}
	if got, want := entries(t, dir), []string{filepath.Base(running), e.name}; !slices.Equal(got, want) {
		t.Errorf("install directory holds %v, want %v", got, want)
	}
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
