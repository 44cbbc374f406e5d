package ui

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/client-go/rest"

	"github.com/landform-dev/landform/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// serve starts a UI server acting with cfg on a free loopback port.
func serve(t testing.TB, cfg *rest.Config, o Options) *Server {
	t.Helper()
	o.Config = cfg
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Serve(ctx, l); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// browser starts Debian's Chromium, headless, for one test. Chromium is
// installed by `make tools` (hack/tools.sh chromium); where it cannot be
// installed the browser tests skip and say so.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := testenv.Tool("chromium", "LANDFORM_CHROMIUM")
	if err != nil {
		t.Skipf("Chromium is not installed, so the browser tests of the UI cannot run: `hack/tools.sh chromium` installs Debian's chromium package (%v)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI containers
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true),
		// Nothing leaves the machine: no component updates, no safe
		// browsing, no DNS prefetch.
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-features", "OptimizationHints,MediaRouter,DialMediaRouteProvider,Translate"),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium %s: %v", path, err)
	}
	return ctx
}

// screenshot keeps a full-page PNG of what the browser shows as a test
// artefact (go test -artifacts keeps them), and in
// $LANDFORM_UI_SCREENSHOTS when set (`make ui-screenshots` refreshes the
// ones docs/ui.md shows).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv("LANDFORM_UI_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "ui-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pageSource is the page as the browser holds it now, live updates
// included.
func pageSource(t *testing.T, ctx context.Context) string {
	t.Helper()
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	return html
}

// textOf is the visible text of the first element sel matches.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// waitText waits until the element sel shows want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		// Read without waiting for the element: it may come and go.
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`) || {}).innerText || ""`))
		if err == nil && strings.Contains(s, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q; it shows %q (%v)", sel, want, s, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// httpClient is a client that has been let in with the server's token.
func httpClient(t testing.TB, s *Server) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c
}
