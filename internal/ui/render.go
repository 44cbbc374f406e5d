package ui

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/landform-dev/landform/internal/version"
)

// page is what every page's layout needs.
type page struct {
	Title   string
	CSRF    string
	Version string
}

func (s *Server) page(title string) page {
	return page{Title: title, CSRF: s.csrf, Version: version.Version}
}

func parseTemplates() (*template.Template, error) {
	return template.New("ui").Funcs(template.FuncMap{
		"objectPath":  objectPath,
		"short":       shortRevision,
		"attrClass":   attrClass,
		"actionClass": actionClass,
		"lower":       strings.ToLower,
		"time":        func(t time.Time) string { return formatTime(t) },
		"add":         func(a, b int) int { return a + b },
		"stateLabel":  stateLabel,
		"pageURL":     func(path string, n int) string { return path + "?page=" + strconv.Itoa(n) + "#plan" },
	}).ParseFS(templateFS, "templates/*.html")
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// stateLabel names a list filter for people.
func stateLabel(s string) string {
	switch s {
	case statePending:
		return "plan pending"
	}
	return s
}

// render writes a page; a template that fails is the server's fault and
// says so without any of the page's data.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "rendering "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// errorView is a page that could not be shown, and why.
type errorView struct {
	page
	What, Err string
}

// fail shows why a page could not be read; the API server's refusal with
// its own status code.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	status := http.StatusInternalServerError
	if code := statusCode(err); code != 0 {
		status = code
	}
	msg := err.Error()
	if apierrors.IsForbidden(err) {
		msg = "The API server refused: " + msg
	}
	s.render(w, status, "error.html", errorView{page: s.page("Error"), What: what, Err: msg})
}
