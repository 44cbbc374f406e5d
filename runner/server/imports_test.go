package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tfjson "github.com/hashicorp/terraform-json"
	"google.golang.org/grpc/codes"
	"k8s.io/utils/ptr"

	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

func TestCheckImports(t *testing.T) {
	imp := func(to, id string) *runnerpb.Import { return &runnerpb.Import{To: to, Id: id} }
	for _, to := range []string{
		"aws_db_instance.main",
		`module.db.aws_db_instance.this["a"]`,
		"module.a[0].module.b.x_y.z-1[3]",
		`x.y["with space and ünïcode"]`,
	} {
		if err := checkImports([]*runnerpb.Import{imp(to, "id")}); err != nil {
			t.Errorf("%s: %v", to, err)
		}
	}
	for name, imports := range map[string][]*runnerpb.Import{
		"no type":                     {imp("main", "id")},
		"data source":                 {imp("data.x.y.z", "id")},
		"block after the address":     {imp("x.y\n}\nresource \"x\" \"z\" {", "id")},
		"template in a key":           {imp(`x.y["${var.a}"]`, "id")},
		"quote in a key":              {imp(`x.y["a"b"]`, "id")},
		"a key over two lines":        {imp("x.y[\"a\nb\"]", "id")},
		"a key with a control char":   {imp("x.y[\"a\x01b\"]", "id")},
		"expression":                  {imp("x.y[var.i]", "id")},
		"trailing space":              {imp("x.y ", "id")},
		"too long":                    {imp("x."+strings.Repeat("y", maxImportTo), "id")},
		"twice":                       {imp("x.y", "a"), imp("x.y", "b")},
		"empty id":                    {imp("x.y", "")},
		"id not UTF-8":                {imp("x.y", "db-\xff")},
		"id too long":                 {imp("x.y", strings.Repeat("i", maxImportIDLen+1))},
		"more imports than the CRD's": make([]*runnerpb.Import, maxImports+1),
	} {
		err := checkImports(imports)
		e, ok := runner.AsError(err)
		if !ok || e.Code != codes.InvalidArgument || e.Reason != runner.ReasonInvalidConfiguration {
			t.Errorf("%s: got %v, want INVALID_CONFIGURATION", name, err)
		}
	}
}

func TestHCLString(t *testing.T) {
	for in, want := range map[string]string{
		"db-123":                  `"db-123"`,
		`say "hi"`:                `"say \"hi\""`,
		`C:\path\n`:               `"C:\\path\\n"`,
		"two\nlines\r\n\tand":     `"two\nlines\r\n\tand"`,
		"${var.secret}":           `"$${var.secret}"`,
		"%{ if true }x%{ endif }": `"%%{ if true }x%%{ endif }"`,
		"$${already}":             `"$$${already}"`,
		"100% $ {} $":             `"100% $ {} $"`,
		"nul\x00bell\x07del\x7f":  `"nul\u0000bell\u0007del\u007f"`,
		"line\u2028sep":           `"line\u2028sep"`,
		"zero\u200bwidth":         `"zero\u200bwidth"`,
		"ünïcødé ✓ 🦫":             `"ünïcødé ✓ 🦫"`,
		"tag\U000E0041":           `"tag\U000e0041"`,
	} {
		if got := hclString(in); got != want {
			t.Errorf("hclString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestRenderImports(t *testing.T) {
	got := string(renderImports([]*runnerpb.Import{
		{To: "landform_database.main", Id: "db-123"},
		{To: `module.m.x.y["k"]`, Id: `a"b`},
	}))
	want := `# Written by the Landform runner from spec.imports.

import {
  to = landform_database.main
  id = "db-123"
}

import {
  to = module.m.x.y["k"]
  id = "a\"b"
}
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if renderImports(nil) != nil {
		t.Fatal("no imports, yet a file")
	}
}

// The runner never overwrites a module's own file of the imports file's
// name, and never mistakes its own file, left from the previous spec in a
// reused tree, for the module's.
func TestImportsFileOfTheModule(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, time.Minute)
	tr := startRunner(t)
	imports := []*runnerpb.Import{{To: "terraform_data.marker", Id: "x"}}

	own := buildTarball(t, map[string][]byte{"basic/" + ImportsFile: []byte("# the module's\n")})
	spec := workspaceSpec(t, own, "basic", nil, t.TempDir())
	spec.Imports = imports
	err := tr.client.UploadWorkspace(ctx, spec, strings.NewReader(string(own.data)))
	e := wantError(t, err, codes.InvalidArgument, runner.ReasonInvalidConfiguration)
	if !strings.Contains(e.Message, "basic/"+ImportsFile) {
		t.Fatalf("message: %s", e.Message)
	}
	// Without imports the module's file is the module's business.
	spec.Imports = nil
	upload(t, ctx, tr.client, spec, own)
	if got := readFile(t, filepath.Join(tr.server.currentRoot(), "basic", ImportsFile)); got != "# the module's\n" {
		t.Fatalf("the module's file became %q", got)
	}

	tb := modulesTarball(t, 0)
	spec = workspaceSpec(t, tb, "basic", nil, t.TempDir())
	spec.Imports = imports
	upload(t, ctx, tr.client, spec, tb)
	file := filepath.Join(tr.server.currentRoot(), "basic", ImportsFile)
	place := func(plan bool) {
		t.Helper()
		tr.server.op <- struct{}{}
		defer func() { <-tr.server.op }()
		if err := tr.server.ws.placeImports(plan); err != nil {
			t.Fatal(err)
		}
	}
	place(true)
	if got := readFile(t, file); !strings.Contains(got, `id = "x"`) {
		t.Fatalf("import blocks:\n%s", got)
	}
	// The same tarball again (the tree is reused): the file is the
	// runner's own.
	spec.Imports = []*runnerpb.Import{{To: "terraform_data.marker", Id: "y"}}
	upload(t, ctx, tr.client, spec, tb)
	place(true)
	if got := readFile(t, file); !strings.Contains(got, `id = "y"`) {
		t.Fatalf("import blocks:\n%s", got)
	}
	place(false)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("import blocks left for a destroy: %v", err)
	}
	place(true)
	spec.Imports = nil
	upload(t, ctx, tr.client, spec, tb)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("import blocks left after a spec without imports: %v", err)
	}
	// Nor do they stay when the same tree is used for another module.
	spec.Imports = imports
	upload(t, ctx, tr.client, spec, tb)
	place(true)
	upload(t, ctx, tr.client, workspaceSpec(t, tb, "outputs", nil, t.TempDir()), tb)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("import blocks left after a spec for another module: %v", err)
	}
}

// testCloud is the stand-in cloud on loopback, counting the databases
// created through its API.
type testCloud struct {
	url     string
	client  *cloud.Client
	creates atomic.Int32
}

func startCloud(t *testing.T) *testCloud {
	t.Helper()
	c := &testCloud{}
	h := cloud.New(cloud.Options{}).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/databases" {
			c.creates.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	c.client = &cloud.Client{URL: srv.URL}
	return c
}

// eachImportEngine runs test, in parallel, on each engine the import
// tests run on: c is a runner on that engine with the test provider.
func eachImportEngine(t *testing.T, test func(t *testing.T, c *runner.Client)) {
	t.Helper()
	for name, engine := range map[string]string{"tofu": enginePath, "terraform": terraformBinary(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, providerRunner(t, engine).client)
		})
	}
}

// A database made in the cloud directly is imported, not created again:
// the plan imports it and adds nothing, the apply records the existing id,
// and the same imports planned again change nothing. A destroy plans no
// import; an unknown id fails the plan with the engine's word for it (a
// generic failure, retried: the object may yet appear), an unknown
// address as invalid configuration.
func TestImport(t *testing.T) {
	t.Parallel()
	eachImportEngine(t, func(t *testing.T, c *runner.Client) {
		ctx := testContext(t, 4*time.Minute)
		cl := startCloud(t)
		db, err := cl.client.CreateDatabase(ctx, cloud.DatabaseRequest{Name: ptr.To("orders"), Engine: ptr.To(cloud.EnginePostgres), SizeGB: ptr.To(10)})
		if err != nil {
			t.Fatal(err)
		}
		tb := modulesTarball(t, 0)
		stateDir := t.TempDir()
		spec := workspaceSpec(t, tb, "imports", map[string]any{"name": "orders"}, stateDir)
		spec.Env = map[string]string{"LANDFORM_CLOUD_ENDPOINT": cl.url}
		spec.Imports = []*runnerpb.Import{{To: "landform_database.main", Id: db.ID}}
		upload(t, ctx, c, spec, tb)

		// A destroy plan has no import blocks: nothing to import,
		// nothing to destroy while the state is empty.
		destroy, err := c.Plan(ctx, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&runnerpb.PlanResult{}, destroy.Result, planCounts); diff != "" {
			t.Fatalf("destroy plan of an empty state (-want +got):\n%s", diff)
		}

		plan, err := c.Plan(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := &runnerpb.PlanResult{
			HasChanges: true, ImportCount: 1,
			ResourcesToImport: []string{"landform_database.main"}, Resources: []string{"landform_database.main"},
		}
		if diff := cmp.Diff(want, plan.Result, planCounts); diff != "" {
			t.Fatalf("plan (-want +got):\n%s", diff)
		}
		if got := importingIDs(t, plan.JSONPlan); !cmp.Equal(got, map[string]string{"landform_database.main": db.ID}) {
			t.Fatalf("importing %v", got)
		}

		outs, err := c.Apply(ctx, plan.PlanFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		if o := outputsByName(outs)["id"]; o == nil || string(o.ValueJson) != `"`+db.ID+`"` {
			t.Fatalf("output id %v, want %s", o, db.ID)
		}
		if got := stateIDs(t, filepath.Join(stateDir, "terraform.tfstate")); !cmp.Equal(got, map[string]string{"landform_database.main": db.ID}) {
			t.Fatalf("state holds %v, want %s", got, db.ID)
		}
		dbs, err := cl.client.ListDatabases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(dbs) != 1 || dbs[0].ID != db.ID || cl.creates.Load() != 1 {
			t.Fatalf("the cloud holds %v after %d creates, want only %s, created once (directly)", dbs, cl.creates.Load(), db.ID)
		}

		// The import stays listed: a no-op once the state has it.
		again, err := c.Plan(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&runnerpb.PlanResult{}, again.Result, planCounts); diff != "" {
			t.Fatalf("second plan (-want +got):\n%s", diff)
		}

		// The destroy plan destroys what the state has, importing
		// nothing.
		destroy, err = c.Plan(ctx, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := destroy.Result; r.Destroy != 1 || r.ImportCount != 0 || len(r.ResourcesToImport) != 0 {
			t.Fatalf("destroy plan %+v", r)
		}

		// An id the cloud does not know, in a state without the
		// database.
		unknown := workspaceSpec(t, tb, "imports", map[string]any{"name": "orders"}, t.TempDir())
		unknown.Env = spec.Env
		unknown.Imports = []*runnerpb.Import{{To: "landform_database.main", Id: "db-0000000000"}}
		upload(t, ctx, c, unknown, tb)
		_, err = c.Plan(ctx, false, nil)
		e := wantError(t, err, codes.Unknown, runner.ReasonTerraformFailed)
		if flat := strings.Join(strings.Fields(e.Message), " "); !strings.Contains(flat, "Cannot import non-existent remote object") {
			t.Fatalf("message: %s", e.Message)
		}
		if n := cl.creates.Load(); n != 1 {
			t.Fatalf("%d creates, want the direct one only", n)
		}

		// An address the module does not have: fix the spec or
		// the module.
		unknown.Imports = []*runnerpb.Import{{To: "landform_database.other", Id: db.ID}}
		upload(t, ctx, c, unknown, tb)
		_, err = c.Plan(ctx, false, nil)
		wantError(t, err, codes.InvalidArgument, runner.ReasonInvalidConfiguration)

	})
}

// An id is a string literal whatever it holds: quotes, backslashes, new
// lines, template sequences and control characters reach the provider as
// they were, and add no configuration. A file's path can hold all of them.
func TestImportHostileID(t *testing.T) {
	t.Parallel()
	eachImportEngine(t, func(t *testing.T, c *runner.Client) {
		ctx := testContext(t, 3*time.Minute)
		hostile := filepath.Join(t.TempDir(), "x\"\n}\nimport {\n  to = landform_file.other\n  id = \"${path.root} %{if true}y%{endif} $${z} %%{w} \\u0041 \\\" \t\r\x01\x7f\u2028 \U000E0041 🦫 $ % {")
		if err := os.WriteFile(hostile, []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
		tb := modulesTarball(t, 0)
		spec := workspaceSpec(t, tb, "import-file", map[string]any{"path": hostile}, t.TempDir())
		spec.Imports = []*runnerpb.Import{{To: "landform_file.imported", Id: hostile}}
		upload(t, ctx, c, spec, tb)
		plan, err := c.Plan(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := importingIDs(t, plan.JSONPlan); !cmp.Equal(got, map[string]string{"landform_file.imported": hostile}) {
			t.Fatalf("importing %q, want only landform_file.imported from %q", got, hostile)
		}
		want := &runnerpb.PlanResult{
			HasChanges: true, ImportCount: 1,
			ResourcesToImport: []string{"landform_file.imported"}, Resources: []string{"landform_file.imported"},
		}
		if diff := cmp.Diff(want, plan.Result, planCounts); diff != "" {
			t.Fatalf("plan (-want +got):\n%s", diff)
		}

	})
}

// An engine without import blocks fails a plan with imports as
// IMPORT_UNSUPPORTED, and still plans a destroy and destroys: those get no
// import blocks. The engine is OpenTofu behind a script that fails as
// Terraform 1.4 does when the module has import blocks.
func TestImportUnsupported(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	old := filepath.Join(t.TempDir(), "terraform-1.4")
	script := "#!/bin/sh\nif grep -qs '^import {' *.tf; then\n  printf '%s\\n' " + shellQuote(importInitText) + " >&2\n  exit 1\nfi\nexec " + shellQuote(enginePath) + " \"$@\"\n"
	if err := os.WriteFile(old, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startRunnerWith(t, old).client
	tb := modulesTarball(t, 0)
	markerDir := t.TempDir()
	spec := workspaceSpec(t, tb, "basic", map[string]any{"name": "old", "dir": markerDir}, t.TempDir())
	upload(t, ctx, c, spec, tb)
	plan, err := c.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, plan.PlanFile, nil); err != nil {
		t.Fatal(err)
	}

	spec.Imports = []*runnerpb.Import{{To: "terraform_data.marker", Id: "m"}}
	upload(t, ctx, c, spec, tb)
	_, err = c.Plan(ctx, false, nil)
	wantError(t, err, codes.FailedPrecondition, runner.ReasonImportUnsupported)

	destroy, err := c.Plan(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if destroy.Result.Destroy != 2 {
		t.Fatalf("destroy plan %+v", destroy.Result)
	}
	if err := c.Destroy(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(markerDir, "marker.txt")); !os.IsNotExist(err) {
		t.Fatalf("marker not destroyed: %v", err)
	}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// planCounts compares what a plan changes and imports, not its digests
// or engine.
var planCounts = cmp.FilterPath(func(p cmp.Path) bool {
	switch p.Last().String() {
	case ".ChangesDigest", ".StateDigest", ".Engine", ".state", ".sizeCache", ".unknownFields":
		return true
	}
	return false
}, cmp.Ignore())

// importingIDs are the import ids of a JSON plan's resource changes, by
// address.
func importingIDs(t *testing.T, jsonPlan []byte) map[string]string {
	t.Helper()
	var p tfjson.Plan
	if err := json.Unmarshal(jsonPlan, &p); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, rc := range p.ResourceChanges {
		if rc.Change != nil && rc.Change.Importing != nil {
			ids[rc.Address] = rc.Change.Importing.ID
		}
	}
	return ids
}

// stateIDs are the ids of a state file's resource instances, by address.
func stateIDs(t *testing.T, path string) map[string]string {
	t.Helper()
	var st testenv.State
	if err := json.Unmarshal([]byte(readFile(t, path)), &st); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range st.Resources {
		for _, in := range r.Instances {
			ids[r.Type+"."+r.Name] = in.Attributes.ID
		}
	}
	return ids
}
