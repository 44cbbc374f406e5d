package cloud

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Options configure a Server.
type Options struct {
	// Token, when set, is the bearer token every request under /v1 must carry.
	Token string
	// StateFile, when set, keeps the objects across restarts: it is read by
	// New and rewritten (atomically, mode 0600: it holds the passwords) after
	// every change. A missing file is an empty cloud.
	StateFile string
}

// Server is the stand-in cloud. Serve its Handler yourself, or Start it.
type Server struct {
	opts    Options
	handler http.Handler
	loadErr error // the state file could not be read

	mu  sync.Mutex // guards the objects and the state file
	sgs map[string]SecurityGroup
	dbs map[string]Database

	srvMu sync.Mutex
	srv   *http.Server
}

// New returns a server holding the objects in opts.StateFile, if any. A state
// file that cannot be read is reported by Start, and by every request to the
// Handler: a server that silently started empty would drop the user's objects
// on its first write.
func New(opts Options) *Server {
	s := &Server{
		opts: opts,
		sgs:  map[string]SecurityGroup{},
		dbs:  map[string]Database{},
	}
	if err := s.load(); err != nil {
		s.loadErr = err
		s.opts.StateFile = "" // never overwrite a file we could not read
		s.handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
		})
		return s
	}
	s.handler = s.routes()
	return s
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return s.handler }

// Start serves the API on addr (host:port; port 0 picks a free one) in the
// background and returns its base URL, e.g. http://127.0.0.1:8480. The API
// is meant for loopback: give it a token if addr is reachable from elsewhere.
func (s *Server) Start(addr string) (string, error) {
	if s.loadErr != nil {
		return "", s.loadErr
	}
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv != nil {
		return "", errors.New("cloud API already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("cloud API: %w", err)
	}
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // always ErrServerClosed or a listener error after Close
	return "http://" + ln.Addr().String(), nil
}

// Close stops a started server. Every change is already saved.
func (s *Server) Close() error {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv == nil {
		return nil
	}
	return s.srv.Close()
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("/v1/security-groups", s.api(s.securityGroups))
	mux.Handle("/v1/security-groups/{id}", s.api(s.securityGroup))
	mux.Handle("/v1/databases", s.api(s.databases))
	mux.Handle("/v1/databases/{id}", s.api(s.database))
	mux.Handle("/v1/databases/{id}/credentials", s.api(s.credentials))
	// A database answers its own clients, who hold its credentials (from a
	// DSN), not the cloud's token.
	mux.Handle("/v1/databases/{id}/connect", s.handle(s.connect))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

// apiFunc handles one request and returns the status and body to send; an
// error is sent as {"error": …} with its status (500 unless a *statusError).
type apiFunc func(w http.ResponseWriter, r *http.Request) (int, any, error)

// api checks the bearer token and turns an apiFunc into a handler.
func (s *Server) api(f apiFunc) http.Handler {
	next := s.handle(f)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="landform-cloud"`)
				writeJSON(w, http.StatusUnauthorized, errorBody{Error: "missing or wrong bearer token"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// handle turns an apiFunc into a handler.
func (s *Server) handle(f apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, body, err := f(w, r)
		if err != nil {
			code = http.StatusInternalServerError
			if se, ok := errors.AsType[*statusError](err); ok {
				code = se.code
			}
			writeJSON(w, code, errorBody{Error: err.Error()})
			return
		}
		writeJSON(w, code, body)
	})
}

func (s *Server) securityGroups(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return collection(w, r, s.listSecurityGroups, s.createSecurityGroup, func(sg SecurityGroup) string { return "/v1/security-groups/" + sg.ID })
}

func (s *Server) securityGroup(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return item(w, r, s.getSecurityGroup, s.updateSecurityGroup, s.deleteSecurityGroup)
}

func (s *Server) databases(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return collection(w, r, s.listDatabases, s.createDatabase, func(db Database) string { return "/v1/databases/" + db.ID })
}

func (s *Server) database(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return item(w, r, s.getDatabase, s.updateDatabase, s.deleteDatabase)
}

// collection serves a kind's collection: GET lists, POST creates from a
// Req and answers 201 with the new object's location.
func collection[Req, Obj any](w http.ResponseWriter, r *http.Request, list func() []Obj, create func(Req) (Obj, error), location func(Obj) string) (int, any, error) {
	switch r.Method {
	case http.MethodGet:
		return http.StatusOK, list(), nil
	case http.MethodPost:
		var req Req
		if err := decode(w, r, &req); err != nil {
			return 0, nil, err
		}
		obj, err := create(req)
		if err != nil {
			return 0, nil, err
		}
		w.Header().Set("Location", location(obj))
		return http.StatusCreated, obj, nil
	}
	return notAllowed(w, "GET, POST")
}

// item serves one object of a kind, {id}: GET reads, PUT replaces, PATCH
// changes the fields the Req sets, DELETE deletes.
func item[Req, Obj any](w http.ResponseWriter, r *http.Request, get func(id string) (Obj, error), update func(id string, req Req, full bool) (Obj, error), del func(id string) error) (int, any, error) {
	id := r.PathValue("id")
	switch r.Method {
	case http.MethodGet:
		obj, err := get(id)
		return http.StatusOK, obj, err
	case http.MethodPut, http.MethodPatch:
		var req Req
		if err := decode(w, r, &req); err != nil {
			return 0, nil, err
		}
		obj, err := update(id, req, r.Method == http.MethodPut)
		return http.StatusOK, obj, err
	case http.MethodDelete:
		return http.StatusNoContent, nil, del(id)
	}
	return notAllowed(w, "GET, PUT, PATCH, DELETE")
}

func (s *Server) credentials(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if r.Method != http.MethodGet {
		return notAllowed(w, "GET")
	}
	c, err := s.databaseCredentials(r.PathValue("id"))
	return http.StatusOK, c, err
}

// connect answers a client of the database that presents the database's
// username and password (HTTP Basic auth), as a database would: 401 to
// anyone else.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if r.Method != http.MethodGet {
		return notAllowed(w, "GET")
	}
	c, err := s.databaseCredentials(r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	user, password, ok := r.BasicAuth()
	if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(c.Username)) != 1 || subtle.ConstantTimeCompare([]byte(password), []byte(c.Password)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="landform-cloud database"`)
		return 0, nil, errorf(http.StatusUnauthorized, "wrong database username or password")
	}
	db, err := s.getDatabase(r.PathValue("id"))
	return http.StatusOK, Session{Database: db.Name, Username: user}, err
}

// statusError is an error the client caused (or may fix), with its status.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &statusError{code: code, msg: fmt.Sprintf(format, args...)}
}

func notAllowed(w http.ResponseWriter, allow string) (int, any, error) {
	w.Header().Set("Allow", allow)
	return 0, nil, errorf(http.StatusMethodNotAllowed, "method not allowed: use %s", allow)
}

// maxBody bounds a request body; the largest valid one is a few kilobytes.
const maxBody = 1 << 20

// decode reads one JSON object into v, refusing unknown fields so that a
// misspelt field is an error rather than silently ignored.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errorf(http.StatusBadRequest, "empty request body: send a JSON object")
		}
		return errorf(http.StatusBadRequest, "invalid JSON body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid JSON body: more than one value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	if code == http.StatusNoContent {
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(body) //nolint:errcheck // the client went away
}
