package main

// End-to-end tests of landform_security_group, landform_database and
// modules/app-infra against the real stand-in cloud: cmd/landform-cloud,
// built from the main module (this module cannot import it) and run as a
// process, driven by a real engine.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	cloudBinOnce sync.Once
	cloudBin     string
	cloudBinErr  error
)

// buildCloud builds cmd/landform-cloud once per test binary.
func buildCloud(t *testing.T) string {
	t.Helper()
	cloudBinOnce.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			cloudBinErr = err
			return
		}
		cloudBin = filepath.Join(testTmp, "landform-cloud")
		cmd := exec.Command("go", "build", "-o", cloudBin, "./cmd/landform-cloud")
		cmd.Dir = root // the main module, which holds internal/cloud
		if out, err := cmd.CombinedOutput(); err != nil {
			cloudBinErr = fmt.Errorf("building cmd/landform-cloud: %v\n%s", err, out)
		}
	})
	if cloudBinErr != nil {
		t.Fatal(cloudBinErr)
	}
	return cloudBin
}

// cloudProc is a running landform-cloud.
type cloudProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	client *cloudClient
}

// startCloud runs landform-cloud on a free loopback port, keeping its
// objects in stateFile, until stop or the end of the test.
func startCloud(t *testing.T, stateFile, token string) *cloudProc {
	t.Helper()
	cmd := exec.Command(buildCloud(t), "--listen", "127.0.0.1:0", "--state-file", stateFile, "--token", token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &cloudProc{t: t, cmd: cmd}
	t.Cleanup(p.stop)

	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		first <- sc.Text()
		for sc.Scan() { // drain
		}
	}()
	select {
	case p.url = <-first:
	case <-time.After(30 * time.Second):
		t.Fatalf("landform-cloud printed no URL in 30s; stderr:\n%s", stderr.String())
	}
	if !strings.HasPrefix(p.url, "http://127.0.0.1:") {
		t.Fatalf("landform-cloud printed %q, want its URL; stderr:\n%s", p.url, stderr.String())
	}
	if p.client, err = newCloudClient(p.url, token); err != nil {
		t.Fatal(err)
	}
	return p
}

// stop interrupts the process and waits for it; it may be called twice.
func (p *cloudProc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("landform-cloud exited: %v", err)
		}
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
		p.t.Errorf("landform-cloud did not stop on an interrupt")
	}
}

func (p *cloudProc) call(method, path string, in, out any) {
	p.t.Helper()
	if err := p.client.do(context.Background(), method, path, in, out); err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
}

func (p *cloudProc) securityGroups() []cloudSecurityGroup {
	p.t.Helper()
	var out []cloudSecurityGroup
	p.call(http.MethodGet, "/v1/security-groups", nil, &out)
	return out
}

func (p *cloudProc) databases() []cloudDatabase {
	p.t.Helper()
	var out []cloudDatabase
	p.call(http.MethodGet, "/v1/databases", nil, &out)
	return out
}

// TestAppInfraModule applies modules/app-infra against the stand-in cloud
// and takes it through drift (a change and a deletion made out of band),
// repair, import and destroy, checking the cloud's objects at every step.
func TestAppInfraModule(t *testing.T) {
	module, err := filepath.Abs(filepath.Join("..", "..", "modules", "app-infra"))
	if err != nil {
		t.Fatal(err)
	}
	const token = "test-token-5e1f"
	stateFile := filepath.Join(t.TempDir(), "cloud.json")
	cloud := startCloud(t, stateFile, token)

	cfg := providerBlock + fmt.Sprintf(`
module "infra" {
  source = %q
  name   = "shop"
}

# A group with neither description nor rules, which must round-trip too.
resource "landform_security_group" "bare" {
  name = "bare"
}

output "security_group_id" { value = module.infra.security_group_id }
output "db_endpoint"       { value = module.infra.db_endpoint }
output "db_port"           { value = module.infra.db_port }
output "dsn" {
  value     = module.infra.dsn
  sensitive = true
}
`, module)
	e := newTF(t, cfg)
	e.env = []string{"LANDFORM_CLOUD_ENDPOINT=" + cloud.url, "LANDFORM_CLOUD_TOKEN=" + token}

	const (
		sgAddr = "module.infra.landform_security_group.db"
		dbAddr = "module.infra.landform_database.this"
	)
	var password string // known once the database exists
	noSecret := func(step, out string) {
		t.Helper()
		if password != "" && strings.Contains(out, password) {
			t.Fatalf("%s shows the database password:\n%s", step, out)
		}
		if strings.Contains(out, token) {
			t.Fatalf("%s shows the token:\n%s", step, out)
		}
	}
	wantPlan := func(step string, want map[string][]string) string {
		t.Helper()
		out, changes, actions := e.plan()
		noSecret(step, out)
		if len(want) == 0 {
			want = map[string][]string{}
		}
		if changes != (len(want) > 0) || !reflect.DeepEqual(actions, want) {
			t.Fatalf("%s: want %v, got %v (changes: %v)\n%s", step, want, actions, changes, out)
		}
		return out
	}
	// cloudObjects returns the app's group and database as the API has them,
	// checking that they are the only ones besides "bare".
	cloudObjects := func(step string) (cloudSecurityGroup, cloudDatabase) {
		t.Helper()
		sgs, dbs := cloud.securityGroups(), cloud.databases()
		if len(sgs) != 2 || sgs[0].Name != "bare" || sgs[1].Name != "shop-db" || len(dbs) != 1 {
			t.Fatalf("%s: the cloud holds security groups %+v and databases %+v; want bare, shop-db and one database", step, sgs, dbs)
		}
		return sgs[1], dbs[0]
	}

	e.must("init", "-input=false", "-no-color")
	out := e.must("apply", "-input=false", "-no-color", "-auto-approve")
	sg, db := cloudObjects("after apply")
	wantSG := cloudSecurityGroup{
		ID: sg.ID, Name: "shop-db", Description: "PostgreSQL access for shop",
		Ingress: []cloudIngressRule{{Protocol: "tcp", Port: 5432, CIDR: "10.0.0.0/8"}},
	}
	if !reflect.DeepEqual(sg, wantSG) {
		t.Fatalf("security group %+v, want %+v", sg, wantSG)
	}
	wantDB := cloudDatabase{
		ID: db.ID, Name: "shop", Engine: "postgres", SizeGB: 10, SecurityGroupIDs: []string{sg.ID},
		Endpoint: db.ID + ".db.landform.internal", Port: 5432, Username: "admin",
	}
	if !reflect.DeepEqual(db, wantDB) {
		t.Fatalf("database %+v, want %+v", db, wantDB)
	}
	var creds cloudCredentials
	cloud.call(http.MethodGet, "/v1/databases/"+db.ID+"/credentials", nil, &creds)
	password = creds.Password
	if len(password) < 20 {
		t.Fatalf("password %q", password)
	}
	noSecret("apply", out)

	var outputs map[string]struct {
		Sensitive bool            `json:"sensitive"`
		Type      json.RawMessage `json:"type"`
		Value     any             `json:"value"`
	}
	if err := json.Unmarshal([]byte(e.must("output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	wantOutputs := map[string]any{
		"security_group_id": sg.ID,
		"db_endpoint":       db.Endpoint,
		"db_port":           5432.0,
		"dsn":               fmt.Sprintf("postgres://admin:%s@%s:5432/shop", password, db.Endpoint),
	}
	for name, want := range wantOutputs {
		o := outputs[name]
		if !reflect.DeepEqual(o.Value, want) {
			t.Errorf("output %s = %#v, want %#v", name, o.Value, want)
		}
		if o.Sensitive != (name == "dsn") {
			t.Errorf("output %s: sensitive = %v", name, o.Sensitive)
		}
	}
	if string(outputs["db_port"].Type) != `"number"` {
		t.Errorf("db_port has type %s, want number", outputs["db_port"].Type)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The cloud keeps its objects across a restart (its state file).
	cloud.stop()
	cloud = startCloud(t, stateFile, token)
	e.env = []string{"LANDFORM_CLOUD_ENDPOINT=" + cloud.url, "LANDFORM_CLOUD_TOKEN=" + token}
	wantPlan("plan after apply and a cloud restart", nil)

	// Configuration errors say what to do.
	for _, tc := range []struct{ step, env, want string }{
		{"plan with a wrong token", "LANDFORM_CLOUD_TOKEN=wrong", "missing or wrong bearer token"},
		{"plan without an endpoint", "LANDFORM_CLOUD_ENDPOINT=", "LANDFORM_CLOUD_ENDPOINT"},
		{"plan with a bad endpoint", "LANDFORM_CLOUD_ENDPOINT=127.0.0.1:1", "is not an http(s) URL"},
	} {
		saved := e.env
		e.env = append(slices.Clone(e.env), tc.env)
		out, code := e.exec("plan", "-input=false", "-no-color")
		e.env = saved
		if code == 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), tc.want) {
			t.Fatalf("%s: exit %d, want a failure mentioning %q:\n%s", tc.step, code, tc.want, out)
		}
		noSecret(tc.step, out)
	}

	// Drift: the database resized out of band.
	cloud.call(http.MethodPatch, "/v1/databases/"+db.ID, map[string]any{"size_gb": 20}, nil)
	out = wantPlan("plan after resizing out of band", map[string][]string{dbAddr: {"update"}})
	if !strings.Contains(out, "20 -> 10") {
		t.Fatalf("the plan does not show size_gb going back from 20 to 10:\n%s", out)
	}

	// Drift: the security group deleted out of band (the cloud detaches it
	// from the database, which therefore needs an update too).
	cloud.call(http.MethodDelete, "/v1/security-groups/"+sg.ID, nil, nil)
	wantPlan("plan after deleting the group out of band", map[string][]string{sgAddr: {"create"}, dbAddr: {"update"}})

	noSecret("repairing apply", e.must("apply", "-input=false", "-no-color", "tfplan"))
	sg2, db2 := cloudObjects("after the repair")
	if sg2.ID == sg.ID {
		t.Fatalf("the group was not created again: %s", sg2.ID)
	}
	wantSG.ID = sg2.ID
	if !reflect.DeepEqual(sg2, wantSG) {
		t.Fatalf("security group after the repair %+v, want %+v", sg2, wantSG)
	}
	wantDB.SecurityGroupIDs = []string{sg2.ID}
	if !reflect.DeepEqual(db2, wantDB) {
		t.Fatalf("database after the repair %+v, want %+v", db2, wantDB)
	}
	wantPlan("plan after the repair", nil)

	// Import: the password, which reads never return, comes from the
	// credentials endpoint, so the DSN stays the same.
	e.must("state", "rm", dbAddr)
	noSecret("import", e.must("import", "-input=false", "-no-color", dbAddr, db.ID))
	wantPlan("plan after import", nil)
	if err := json.Unmarshal([]byte(e.must("output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	if got := outputs["dsn"].Value; got != wantOutputs["dsn"] {
		t.Fatalf("dsn after import %v, want %v", got, wantOutputs["dsn"])
	}

	noSecret("destroy", e.must("destroy", "-input=false", "-no-color", "-auto-approve"))
	if sgs, dbs := cloud.securityGroups(), cloud.databases(); len(sgs) != 0 || len(dbs) != 0 {
		t.Fatalf("destroy left security groups %+v and databases %+v", sgs, dbs)
	}
}

// TestCloudValidation: bad values are reported at plan time, naming the
// attribute, and nothing reaches the cloud.
func TestCloudValidation(t *testing.T) {
	cloud := startCloud(t, filepath.Join(t.TempDir(), "cloud.json"), "")
	cfg := providerBlock + `
resource "landform_security_group" "bad" {
  name = "Bad Name"
  ingress {
    protocol = "icmp"
    port     = 0
    cidr     = "10.1.2.3/8"
  }
}

resource "landform_database" "bad" {
  name    = "db"
  engine  = "oracle"
  size_gb = 0
}
`
	e := newTF(t, cfg)
	e.env = []string{"LANDFORM_CLOUD_ENDPOINT=" + cloud.url}
	e.must("init", "-input=false", "-no-color")
	out, code := e.exec("plan", "-input=false", "-no-color")
	if code == 0 {
		t.Fatalf("plan succeeded:\n%s", out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		`"Bad Name" is not a valid name`,
		`"icmp" is not supported: use one of tcp, udp`,
		"0 is not between 1 and 65535",
		`"10.1.2.3/8" has host bits set: use 10.0.0.0/8`,
		`"oracle" is not supported: use one of postgres, mysql`,
		"0 is not between 1 and 16384",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("plan output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("plan output:\n%s", out)
	}
	if sgs, dbs := cloud.securityGroups(), cloud.databases(); len(sgs) != 0 || len(dbs) != 0 {
		t.Fatalf("validation errors, yet the cloud holds %+v and %+v", sgs, dbs)
	}
}
