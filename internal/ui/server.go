// Package ui is `landform ui`: a web view of Terraform objects, their plans
// as resource-by-resource diffs, drift, runs, events, outputs and state
// versions, with Approve, Reconcile, Suspend and Resume.
//
// The server acts with the credentials it is given (the user's kubeconfig)
// and nothing more: every read and write is the user's own, so the API
// server's RBAC decides what the page shows and what a button may do. It
// stores no credential. Because anyone on the machine can reach a port on
// 127.0.0.1, the URL it prints carries a random token that the first request
// trades for a cookie (as Jupyter does); a request without it is refused, a
// Host header that is not the address it listens on is refused (DNS
// rebinding), and every form carries a CSRF token checked with the Origin.
package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

const (
	cookieName = "landform_ui"
	// csrfField is the form field and meta tag holding the CSRF token.
	csrfField = "csrf"
)

// Options configure a Server.
type Options struct {
	// Config is the user's own: the server never acts with other rights.
	Config *rest.Config
	// Client is built from Config when nil.
	Client client.WithWatch
	// Namespace is the namespace shown when the user may not list
	// Terraform objects across namespaces (the kubeconfig context's).
	Namespace string
	// Now is the clock ages are computed from; time.Now when nil.
	Now func() time.Time
	// PageSize is how many resources of a plan one page shows; 25 when 0.
	PageSize int
}

// Server serves the web view.
type Server struct {
	c        client.WithWatch
	ns       string
	now      func() time.Time
	pageSize int
	tmpl     *template.Template
	assets   http.Handler
	// token is in the URL the user is given; csrf is in every form.
	token, csrf string
	// host is the Host the server accepts ("127.0.0.1:8421"); set by
	// Listen.
	host string
}

// New builds a Server. Nothing is sent to the API server yet.
func New(o Options) (*Server, error) {
	c := o.Client
	if c == nil {
		var err error
		if c, err = client.NewWithWatch(o.Config, client.Options{Scheme: scheme}); err != nil {
			return nil, err
		}
	}
	tmpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	s := &Server{
		c: c, ns: o.Namespace, now: o.Now, pageSize: o.PageSize, tmpl: tmpl,
		assets: http.StripPrefix("/assets/", http.FileServerFS(static)),
		token:  randomToken(), csrf: randomToken(),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.pageSize <= 0 {
		s.pageSize = 25
	}
	return s, nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return base64.RawURLEncoding.EncodeToString(b)
}

// Listen opens addr, which must be a loopback address: the server acts
// with the user's credentials, so no other machine may reach it.
func (s *Server) Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, errors.New("--address must be a loopback address (127.0.0.1, [::1] or localhost): the UI acts with your credentials, so it is never served to other machines")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.host = l.Addr().String()
	return l, nil
}

// URL is the address to open, with the token that lets the browser in.
func (s *Server) URL() string {
	return (&url.URL{Scheme: "http", Host: s.host, Path: "/", RawQuery: url.Values{"token": {s.token}}.Encode()}).String()
}

// base is the server's root, without the token.
func (s *Server) base() string { return "http://" + s.host }

// Serve serves on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if s.host == "" {
		s.host = l.Addr().String()
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is every page, behind the token, Host and CSRF checks.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.listPage)
	mux.HandleFunc("GET /stream/list", s.listStream)
	mux.HandleFunc("GET /t/{ns}/{name}", s.objectPage)
	mux.HandleFunc("GET /stream/t/{ns}/{name}", s.objectStream)
	mux.HandleFunc("POST /t/{ns}/{name}/{action}", s.act)
	mux.Handle("GET /assets/", s.assets)
	return s.guard(mux)
}

// guard lets a request through only from the browser that was given the
// URL, on the address the server listens on; a POST also needs the CSRF
// token and, when the browser sends one, the server's own Origin.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
		w.Header().Set("Referrer-Policy", "same-origin") // no-referrer would make the Origin of our own forms "null"
		w.Header().Set("Cache-Control", "no-store")
		if s.host != "" && r.Host != s.host && !sameLoopback(r.Host, s.host) {
			http.Error(w, "this server answers only on "+s.host, http.StatusMisdirectedRequest)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && equal(t, s.token) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(cookieName); err != nil || !equal(c.Value, s.token) {
			http.Error(w, "open the URL that `landform ui` printed: it carries the token that lets your browser in", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
				http.Error(w, "refused: the request came from another site ("+o+")", http.StatusForbidden)
				return
			}
			if !equal(r.PostFormValue(csrfField), s.csrf) {
				http.Error(w, "refused: the form carried no valid CSRF token; reload the page and try again", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sameLoopback accepts localhost for 127.0.0.1 on the same port.
func sameLoopback(got, want string) bool {
	gh, gp, err1 := net.SplitHostPort(got)
	wh, wp, err2 := net.SplitHostPort(want)
	if err1 != nil || err2 != nil || gp != wp {
		return false
	}
	loop := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "localhost" || (ip != nil && ip.IsLoopback())
	}
	return loop(gh) && loop(wh)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// objectPath is an object's page.
func objectPath(ns, name string) string {
	return "/t/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
}
