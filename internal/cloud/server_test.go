package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixture is a server with one security group ("web") and one database
// ("app", using it), reached through a Client.
type fixture struct {
	srv    *Server
	client *Client
	sg     *SecurityGroup
	db     *Database
}

// wantSecurityGroup checks the fixture's security group as c serves it.
func (f *fixture) wantSecurityGroup(t *testing.T, c *Client, want *SecurityGroup, when string) {
	t.Helper()
	got, err := c.GetSecurityGroup(context.Background(), f.sg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("security group %s (-want +got):\n%s", when, d)
	}
}

// wantDatabase checks that c serves the fixture's database at sizeGB,
// without its password, and the password, unchanged, from its
// credentials.
func (f *fixture) wantDatabase(t *testing.T, c *Client, sizeGB int, when string) {
	t.Helper()
	got, err := c.GetDatabase(context.Background(), f.db.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *f.db
	want.SizeGB, want.Password = sizeGB, ""
	if d := cmp.Diff(&want, got); d != "" {
		t.Errorf("database %s (-want +got):\n%s", when, d)
	}
	creds, err := c.DatabaseCredentials(context.Background(), f.db.ID)
	if err != nil || creds.Password != f.db.Password {
		t.Errorf("password %s: %v", when, err)
	}
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	srv := New(opts)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c := &Client{URL: ts.URL, Token: opts.Token}
	ctx := context.Background()
	sg, err := c.CreateSecurityGroup(ctx, SecurityGroupRequest{
		Name:        new("web"),
		Description: new("web tier"),
		Ingress:     &[]IngressRule{{Protocol: "tcp", Port: 5432, CIDR: "10.0.0.0/8"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := c.CreateDatabase(ctx, DatabaseRequest{
		Name: new("app"), Engine: new("postgres"), SizeGB: new(10), SecurityGroupIDs: &[]string{sg.ID},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, client: c, sg: sg, db: db}
}

// call sends a raw request and returns the status and decoded body.
func (f *fixture) call(t *testing.T, method, path, body, token string) (int, http.Header, any) {
	t.Helper()
	req, err := http.NewRequest(method, f.client.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out any
	if resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: response is not JSON: %v", method, path, err)
		}
	}
	return resp.StatusCode, resp.Header, out
}

var (
	sgID = regexp.MustCompile(`^sg-[0-9a-f]{10}$`)
	dbID = regexp.MustCompile(`^db-[0-9a-f]{10}$`)
)

func TestAPI(t *testing.T) {
	type want struct {
		code  int
		error string // substring of the error message; "" for success
	}
	tests := []struct {
		name   string
		method string
		path   string // {sg} and {db} are the fixture's ids
		body   string
		want   want
		// check runs after the request, for successful ones.
		check func(t *testing.T, f *fixture, body map[string]any, h http.Header)
	}{
		{name: "list security groups", method: "GET", path: "/v1/security-groups", want: want{code: 200}},
		{
			name: "create security group", method: "POST", path: "/v1/security-groups",
			body: `{"name":"db","ingress":[{"protocol":"udp","port":53,"cidr":"192.168.0.0/16"}]}`,
			want: want{code: 201},
			check: func(t *testing.T, f *fixture, body map[string]any, h http.Header) {
				id, _ := body["id"].(string)
				if !sgID.MatchString(id) {
					t.Errorf("id %q does not look like sg-<hex>", id)
				}
				if h.Get("Location") != "/v1/security-groups/"+id {
					t.Errorf("Location %q", h.Get("Location"))
				}
				got, err := f.client.GetSecurityGroup(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				want := &SecurityGroup{ID: id, Name: "db", Description: "", Ingress: []IngressRule{{"udp", 53, "192.168.0.0/16"}}}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("stored group (-want +got):\n%s", d)
				}
			},
		},
		{name: "create security group: name taken", method: "POST", path: "/v1/security-groups", body: `{"name":"web"}`, want: want{409, `a security group named "web" already exists`}},
		{name: "create security group: no name", method: "POST", path: "/v1/security-groups", body: `{"description":"x"}`, want: want{400, "name is required"}},
		{name: "create security group: bad name", method: "POST", path: "/v1/security-groups", body: `{"name":"Web Tier"}`, want: want{400, `name "Web Tier" is invalid`}},
		{name: "create security group: host bits", method: "POST", path: "/v1/security-groups", body: `{"name":"x","ingress":[{"protocol":"tcp","port":22,"cidr":"10.1.2.3/8"}]}`, want: want{400, `ingress[0]: cidr "10.1.2.3/8" has host bits set: use 10.0.0.0/8`}},
		{name: "create security group: not a cidr", method: "POST", path: "/v1/security-groups", body: `{"name":"x","ingress":[{"protocol":"tcp","port":22,"cidr":"anywhere"}]}`, want: want{400, `cidr "anywhere" is not a CIDR range`}},
		{name: "create security group: protocol", method: "POST", path: "/v1/security-groups", body: `{"name":"x","ingress":[{"protocol":"icmp","port":1,"cidr":"0.0.0.0/0"}]}`, want: want{400, `protocol "icmp" is not supported`}},
		{name: "create security group: port", method: "POST", path: "/v1/security-groups", body: `{"name":"x","ingress":[{"protocol":"tcp","port":0,"cidr":"0.0.0.0/0"}]}`, want: want{400, "port 0 is out of range 1-65535"}},
		{name: "create security group: unknown field", method: "POST", path: "/v1/security-groups", body: `{"name":"x","rules":[]}`, want: want{400, `unknown field "rules"`}},
		{name: "create security group: empty body", method: "POST", path: "/v1/security-groups", want: want{400, "empty request body"}},
		{name: "create security group: two values", method: "POST", path: "/v1/security-groups", body: `{"name":"x"} {}`, want: want{400, "more than one value"}},
		{name: "get security group", method: "GET", path: "/v1/security-groups/{sg}", want: want{code: 200}},
		{name: "get security group: unknown", method: "GET", path: "/v1/security-groups/sg-0000000000", want: want{404, `security group "sg-0000000000" not found`}},
		{
			name: "patch security group keeps other fields", method: "PATCH", path: "/v1/security-groups/{sg}",
			body: `{"description":"changed"}`, want: want{code: 200},
			check: func(t *testing.T, f *fixture, _ map[string]any, _ http.Header) {
				want := *f.sg
				want.Description = "changed"
				f.wantSecurityGroup(t, f.client, &want, "after the patch")
			},
		},
		{
			name: "put security group resets omitted fields", method: "PUT", path: "/v1/security-groups/{sg}",
			body: `{"name":"web2"}`, want: want{code: 200},
			check: func(t *testing.T, f *fixture, _ map[string]any, _ http.Header) {
				f.wantSecurityGroup(t, f.client, &SecurityGroup{ID: f.sg.ID, Name: "web2", Ingress: []IngressRule{}}, "after the put")
			},
		},
		{name: "put security group: no name", method: "PUT", path: "/v1/security-groups/{sg}", body: `{"description":"x"}`, want: want{400, "name is required"}},
		{name: "patch security group: unknown", method: "PATCH", path: "/v1/security-groups/sg-0000000000", body: `{}`, want: want{404, "not found"}},
		{
			name: "delete security group detaches it", method: "DELETE", path: "/v1/security-groups/{sg}", want: want{code: 204},
			check: func(t *testing.T, f *fixture, _ map[string]any, _ http.Header) {
				if _, err := f.client.GetSecurityGroup(context.Background(), f.sg.ID); !IsNotFound(err) {
					t.Errorf("group still there: %v", err)
				}
				db, err := f.client.GetDatabase(context.Background(), f.db.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(db.SecurityGroupIDs) != 0 {
					t.Errorf("database still lists %v", db.SecurityGroupIDs)
				}
			},
		},
		{name: "delete security group: unknown", method: "DELETE", path: "/v1/security-groups/sg-0000000000", want: want{404, "not found"}},
		{name: "security groups: method", method: "DELETE", path: "/v1/security-groups", want: want{405, "use GET, POST"}},

		{
			name: "create database", method: "POST", path: "/v1/databases",
			body: `{"name":"orders","engine":"mysql","size_gb":5}`, want: want{code: 201},
			check: func(t *testing.T, f *fixture, body map[string]any, _ http.Header) {
				id, _ := body["id"].(string)
				if !dbID.MatchString(id) {
					t.Errorf("id %q does not look like db-<hex>", id)
				}
				pw, _ := body["password"].(string)
				if len(pw) < 20 {
					t.Errorf("password %q is too short", pw)
				}
				want := map[string]any{
					"id": id, "name": "orders", "engine": "mysql", "size_gb": 5.0, "security_group_ids": []any{},
					"endpoint": id + ".db.landform.internal", "port": 3306.0, "username": "admin", "password": pw,
				}
				if d := cmp.Diff(want, body); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
				c, err := f.client.DatabaseCredentials(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if c.Password != pw || c.Username != "admin" {
					t.Errorf("credentials %+v, want admin/%s", c, pw)
				}
			},
		},
		{name: "create database: name taken", method: "POST", path: "/v1/databases", body: `{"name":"app","engine":"postgres","size_gb":1}`, want: want{409, `a database named "app" already exists`}},
		{name: "create database: missing fields", method: "POST", path: "/v1/databases", body: `{"name":"x"}`, want: want{400, "required: engine, size_gb"}},
		{name: "create database: engine", method: "POST", path: "/v1/databases", body: `{"name":"x","engine":"oracle","size_gb":1}`, want: want{400, `engine "oracle" is not supported`}},
		{name: "create database: size", method: "POST", path: "/v1/databases", body: `{"name":"x","engine":"postgres","size_gb":0}`, want: want{400, "size_gb 0 is out of range 1-16384"}},
		{name: "create database: unknown group", method: "POST", path: "/v1/databases", body: `{"name":"x","engine":"postgres","size_gb":1,"security_group_ids":["sg-0000000000"]}`, want: want{400, `security group "sg-0000000000" does not exist`}},
		{name: "create database: group twice", method: "POST", path: "/v1/databases", body: `{"name":"x","engine":"postgres","size_gb":1,"security_group_ids":["{sg}","{sg}"]}`, want: want{400, "listed twice"}},
		{
			name: "get database has no password", method: "GET", path: "/v1/databases/{db}", want: want{code: 200},
			check: func(t *testing.T, f *fixture, body map[string]any, _ http.Header) {
				if _, ok := body["password"]; ok {
					t.Errorf("GET returned the password")
				}
				if body["port"] != 5432.0 || body["endpoint"] != f.db.ID+".db.landform.internal" {
					t.Errorf("port %v, endpoint %v", body["port"], body["endpoint"])
				}
			},
		},
		{name: "get database: unknown", method: "GET", path: "/v1/databases/db-0000000000", want: want{404, `database "db-0000000000" not found`}},
		{name: "credentials: unknown", method: "GET", path: "/v1/databases/db-0000000000/credentials", want: want{404, "not found"}},
		{
			name: "patch database size", method: "PATCH", path: "/v1/databases/{db}", body: `{"size_gb":20}`, want: want{code: 200},
			check: func(t *testing.T, f *fixture, body map[string]any, _ http.Header) {
				if _, ok := body["password"]; ok {
					t.Errorf("PATCH returned the password")
				}
				f.wantDatabase(t, f.client, 20, "after the update")
			},
		},
		{name: "patch database: engine", method: "PATCH", path: "/v1/databases/{db}", body: `{"engine":"mysql"}`, want: want{400, "engine cannot change from postgres to mysql"}},
		{name: "put database: missing fields", method: "PUT", path: "/v1/databases/{db}", body: `{"size_gb":3}`, want: want{400, "required: name, engine"}},
		{name: "delete database", method: "DELETE", path: "/v1/databases/{db}", want: want{code: 204}},
		{name: "delete database: unknown", method: "DELETE", path: "/v1/databases/db-0000000000", want: want{404, "not found"}},
		{name: "credentials: method", method: "POST", path: "/v1/databases/{db}/credentials", want: want{405, "use GET"}},
		{name: "unknown endpoint", method: "GET", path: "/v1/buckets", want: want{404, "no such endpoint: GET /v1/buckets"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			r := strings.NewReplacer("{sg}", f.sg.ID, "{db}", f.db.ID)
			code, h, out := f.call(t, tc.method, r.Replace(tc.path), r.Replace(tc.body), "")
			if code != tc.want.code {
				t.Fatalf("status %d, want %d: %v", code, tc.want.code, out)
			}
			body, _ := out.(map[string]any)
			if tc.want.error != "" {
				msg, _ := body["error"].(string)
				if !strings.Contains(msg, tc.want.error) {
					t.Fatalf("error %q, want it to contain %q", msg, tc.want.error)
				}
				return
			}
			if _, ok := body["error"]; ok {
				t.Fatalf("success with an error body: %v", body)
			}
			if tc.check != nil {
				tc.check(t, f, body, h)
			}
		})
	}
}

func TestListsAreSortedAndWithoutPasswords(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	for _, name := range []string{"zeta", "alpha"} {
		if _, err := f.client.CreateDatabase(ctx, DatabaseRequest{Name: new(name), Engine: new("mysql"), SizeGB: new(1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.client.CreateSecurityGroup(ctx, SecurityGroupRequest{Name: new(name)}); err != nil {
			t.Fatal(err)
		}
	}
	dbs, err := f.client.ListDatabases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, db := range dbs {
		names = append(names, db.Name)
		if db.Password != "" {
			t.Errorf("list returned %s's password", db.Name)
		}
	}
	if d := cmp.Diff([]string{"alpha", "app", "zeta"}, names); d != "" {
		t.Errorf("database order (-want +got):\n%s", d)
	}
	sgs, err := f.client.ListSecurityGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, sg := range sgs {
		names = append(names, sg.Name)
	}
	if d := cmp.Diff([]string{"alpha", "web", "zeta"}, names); d != "" {
		t.Errorf("security group order (-want +got):\n%s", d)
	}
}

func TestToken(t *testing.T) {
	f := newFixture(t, Options{Token: "s3cret"})
	tests := []struct {
		name, path, token string
		code              int
	}{
		{"no token", "/v1/databases", "", 401},
		{"wrong token", "/v1/databases", "wrong", 401},
		{"right token", "/v1/databases", "s3cret", 200},
		{"health needs none", "/healthz", "", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, h, out := f.call(t, "GET", tc.path, "", tc.token)
			if code != tc.code {
				t.Fatalf("status %d, want %d: %v", code, tc.code, out)
			}
			if code == 401 {
				if h.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				if strings.Contains(toJSON(t, out), "s3cret") {
					t.Error("the error shows the token")
				}
			}
		})
	}
	if _, err := (&Client{URL: f.client.URL}).ListDatabases(context.Background()); err == nil || !strings.Contains(err.Error(), "bearer token") {
		t.Fatalf("client without token: %v", err)
	}
}

func toJSON(t *testing.T, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestStateFileSurvivesRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state", "cloud.json")
	f := newFixture(t, Options{StateFile: file})
	ctx := context.Background()
	if _, err := f.client.UpdateDatabase(ctx, f.db.ID, DatabaseRequest{SizeGB: new(42)}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("state file mode %v, want 0600 (it holds passwords)", mode)
	}

	again := New(Options{StateFile: file})
	url, err := again.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	c := &Client{URL: url}
	f.wantDatabase(t, c, 42, "after restart")
	f.wantSecurityGroup(t, c, f.sg, "after restart")

	// Deletions are saved too.
	if err := c.DeleteDatabase(ctx, f.db.ID); err != nil {
		t.Fatal(err)
	}
	dbs, err := (&Client{URL: startTest(t, Options{StateFile: file})}).ListDatabases(ctx)
	if err != nil || len(dbs) != 0 {
		t.Errorf("after deletion and restart: %v, %v", dbs, err)
	}
}

func TestUnreadableStateFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cloud.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := New(Options{StateFile: file})
	if _, err := s.Start("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("Start: %v, want an error about the state file", err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	_, err := (&Client{URL: ts.URL}).CreateSecurityGroup(context.Background(), SecurityGroupRequest{Name: new("x")})
	if err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("request: %v, want an error about the state file", err)
	}
	if data, _ := os.ReadFile(file); string(data) != "{not json" {
		t.Fatalf("the unreadable state file was overwritten: %q", data)
	}
}

func TestSaveFailureLeavesNothingBehind(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cloud.json")
	f := newFixture(t, Options{StateFile: file})
	// A directory where the file should be: the rename fails, even for root.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(file, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.client.CreateSecurityGroup(ctx, SecurityGroupRequest{Name: new("new")}); err == nil || !strings.Contains(err.Error(), "saving cloud state") {
		t.Fatalf("create: %v, want an error saving the state", err)
	}
	if err := f.client.DeleteDatabase(ctx, f.db.ID); err == nil {
		t.Fatal("delete succeeded although the state could not be saved")
	}
	sgs, err := f.client.ListSecurityGroups(ctx)
	if err != nil || len(sgs) != 1 {
		t.Fatalf("after a failed save: %v, %v; want only the fixture's group", sgs, err)
	}
	if _, err := f.client.GetDatabase(ctx, f.db.ID); err != nil {
		t.Fatalf("database gone after a failed delete: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(file))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestStart(t *testing.T) {
	s := New(Options{})
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("url %q", url)
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded")
	}
	addr := strings.TrimPrefix(url, "http://")
	if _, err := New(Options{}).Start(addr); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Start on a used port: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Client{URL: url}).ListDatabases(context.Background()); err == nil {
		t.Error("the API still answers after Close")
	}
}

// startTest starts a server for the rest of the test and returns its URL.
func startTest(t *testing.T, opts Options) string {
	t.Helper()
	s := New(opts)
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return url
}

// A database answers only to its own credentials, whatever the cloud's
// token: a client holding a DSN can prove it works, and a wrong password is
// refused.
func TestConnectNeedsTheDatabaseCredentials(t *testing.T) {
	f := newFixture(t, Options{Token: "s3cret"})
	ctx := context.Background()
	creds, err := f.client.DatabaseCredentials(ctx, f.db.ID)
	if err != nil {
		t.Fatal(err)
	}
	anonymous := &Client{URL: f.client.URL} // no cloud token: not needed
	s, err := anonymous.Connect(ctx, f.db.ID, creds.Username, creds.Password)
	if err != nil {
		t.Fatalf("connect with the right credentials: %v", err)
	}
	if s.Database != "app" || s.Username != creds.Username {
		t.Errorf("session %+v, want database app as %s", s, creds.Username)
	}
	for _, tc := range []struct{ name, user, password string }{
		{"wrong password", creds.Username, creds.Password + "x"},
		{"wrong user", "root", creds.Password},
		{"none", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := anonymous.Connect(ctx, f.db.ID, tc.user, tc.password)
			var e *Error
			if !errors.As(err, &e) || e.StatusCode != 401 {
				t.Fatalf("connect: %v, want 401", err)
			}
			if strings.Contains(e.Message, creds.Password) {
				t.Error("the error shows the password")
			}
		})
	}
	if _, err := anonymous.Connect(ctx, "db-0000000000", creds.Username, creds.Password); err == nil {
		t.Error("connect to an unknown database succeeded")
	}
}
