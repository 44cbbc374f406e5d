package server

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

// currentRoot returns the extracted tarball's directory, taking the
// operation slot like an RPC does.
func (s *Server) currentRoot() string {
	s.op <- struct{}{}
	defer func() { <-s.op }()
	if s.ws == nil {
		return ""
	}
	return s.ws.root
}

// countingReader counts what the client read of a tarball.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 5*time.Minute)
	r := startRunner(t)
	c := r.client
	stateDir, markerDir := t.TempDir(), t.TempDir()
	marker := filepath.Join(markerDir, "marker.txt")

	// Beyond 8 MiB, the default gRPC and Flux size limits.
	tb := modulesTarball(t, 9<<20)
	if len(tb.data) <= 8<<20 {
		t.Fatalf("tarball is %d bytes, want more than 8 MiB", len(tb.data))
	}

	if _, err := c.Plan(ctx, false, nil); err != nil {
		wantError(t, err, codes.FailedPrecondition, runner.ReasonNoWorkspace)
	} else {
		t.Fatal("plan before upload succeeded")
	}

	spec := workspaceSpec(t, tb, "basic", map[string]any{"name": "one", "dir": markerDir}, stateDir)
	upload(t, ctx, c, spec, tb)
	root := r.server.currentRoot()
	if _, err := os.Stat(filepath.Join(root, "padding.bin")); err != nil {
		t.Fatalf("tarball not extracted: %v", err)
	}
	vars, err := os.Stat(filepath.Join(root, "basic", VarsFile))
	if err != nil || vars.Mode().Perm() != 0o600 {
		t.Fatalf("vars file: %v, mode %v", err, vars)
	}

	step(t, "same digest again is a no-op", func(t *testing.T) {
		sentinel := filepath.Join(root, "sentinel")
		if err := os.WriteFile(sentinel, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		cr := &countingReader{r: bytes.NewReader(tb.data)}
		if err := c.UploadWorkspace(ctx, spec, cr); err != nil {
			t.Fatal(err)
		}
		if got := r.server.currentRoot(); got != root {
			t.Fatalf("workspace re-extracted into %s", got)
		}
		if _, err := os.Stat(sentinel); err != nil {
			t.Fatalf("workspace replaced: %v", err)
		}
		if cr.n >= len(tb.data) {
			t.Fatalf("client sent the whole tarball (%d bytes) again", cr.n)
		}
	})

	var first *runner.PlanOutput
	step(t, "plan", func(t *testing.T) {
		l := newLogs()
		out, err := c.Plan(ctx, false, l.add)
		if err != nil {
			t.Fatal(err)
		}
		res := out.Result
		if res.Add != 2 || res.Change != 0 || res.Destroy != 0 || !res.HasChanges {
			t.Fatalf("counts: %+v", res)
		}
		if want := []string{"terraform_data.marker", "terraform_data.static"}; !slices.Equal(res.Resources, want) {
			t.Fatalf("resources %v, want %v", res.Resources, want)
		}
		// Named without a `version` process, yet as `version` names it.
		if want := engineFirstLine(t); res.Engine != want {
			t.Fatalf("engine %q, want %q (the first line of `version`)", res.Engine, want)
		}
		if len(res.ChangesDigest) != 64 {
			t.Fatalf("digest %q", res.ChangesDigest)
		}
		// The machine's TF_CLI_CONFIG_FILE may name a missing file; the
		// runner's own configuration replaces it.
		if strings.Contains(l.text(), "CLI configuration") {
			t.Fatalf("terraform complained about its CLI configuration:\n%s", l.text())
		}
		if !strings.Contains(l.text(), "2 to add, 0 to change, 0 to destroy") {
			t.Fatalf("logs lack the plan summary:\n%s", l.text())
		}
		if len(out.PlanFile) == 0 {
			t.Fatal("no plan file")
		}
		var plan struct {
			ResourceChanges []struct{ Address string } `json:"resource_changes"`
		}
		if err := json.Unmarshal(out.JSONPlan, &plan); err != nil || len(plan.ResourceChanges) != 2 {
			t.Fatalf("JSON plan: %v, %d resource changes", err, len(plan.ResourceChanges))
		}
		human := string(out.HumanPlan)
		if !strings.Contains(human, "terraform_data.marker will be created") || !strings.Contains(human, "Plan: 2 to add, 0 to change, 0 to destroy.") {
			t.Fatalf("human plan:\n%s", human)
		}
		// The plan's own output, less the advice on applying a plan file
		// that only the runner had.
		if strings.Contains(human, "Saved the plan to") || strings.Contains(human, ".tfplan") || strings.Contains(human, "─") {
			t.Fatalf("human plan keeps the apply advice:\n%s", human)
		}
		for name, text := range map[string]string{"human plan": human, "logs": l.text()} {
			if strings.Contains(text, "s3cr3t-value") {
				t.Fatalf("%s shows a sensitive value", name)
			}
		}
		first = out
	})

	var second *runner.PlanOutput
	step(t, "identical re-plan has the same digest", func(t *testing.T) {
		out, err := c.Plan(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.Result.ChangesDigest != first.Result.ChangesDigest {
			t.Fatalf("digest changed: %s, then %s", first.Result.ChangesDigest, out.Result.ChangesDigest)
		}
		second = out
	})

	step(t, "apply", func(t *testing.T) {
		l := newLogs()
		outs, err := c.Apply(ctx, second.PlanFile, l.add)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, marker); got != "one" {
			t.Fatalf("marker %q, want one", got)
		}
		if !strings.Contains(l.text(), "Apply complete!") {
			t.Fatalf("apply logs:\n%s", l.text())
		}
		checkOutputs(t, outs, "one", marker)
		outs, err = c.Outputs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkOutputs(t, outs, "one", marker)
	})

	step(t, "plan after apply has no changes", func(t *testing.T) {
		out, err := c.Plan(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := out.Result
		if res.HasChanges || res.Add+res.Change+res.Destroy != 0 || len(res.Resources) != 0 {
			t.Fatalf("want no changes, got %+v", res)
		}
		if res.ChangesDigest == first.Result.ChangesDigest {
			t.Fatal("a plan without changes has the digest of one with changes")
		}
	})

	step(t, "changed variable replaces the marker", func(t *testing.T) {
		spec := workspaceSpec(t, tb, "basic", map[string]any{"name": "two", "dir": markerDir}, stateDir)
		upload(t, ctx, c, spec, tb)
		out, err := c.Plan(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := out.Result
		if res.Add != 1 || res.Change != 0 || res.Destroy != 1 {
			t.Fatalf("a replace counts as one add and one destroy, got %+v", res)
		}
		if !slices.Equal(res.Resources, []string{"terraform_data.marker"}) {
			t.Fatalf("resources %v", res.Resources)
		}
		if res.ChangesDigest == first.Result.ChangesDigest {
			t.Fatal("a different plan has the same digest")
		}
		outs, err := c.Apply(ctx, out.PlanFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, marker); got != "two" {
			t.Fatalf("marker %q, want two", got)
		}
		checkOutputs(t, outs, "two", marker)
	})

	step(t, "destroy plan", func(t *testing.T) {
		out, err := c.Plan(ctx, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res := out.Result; res.Destroy != 2 || res.Add != 0 || !res.HasChanges {
			t.Fatalf("destroy plan: %+v", res)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatal("planning a destroy removed the marker")
		}
	})

	step(t, "destroy", func(t *testing.T) {
		l := newLogs()
		if err := c.Destroy(ctx, l.add); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(marker); !os.IsNotExist(err) {
			t.Fatalf("marker still there after destroy: %v", err)
		}
		if !strings.Contains(l.text(), "Destroy complete!") {
			t.Fatalf("destroy logs:\n%s", l.text())
		}
		outs, err := c.Outputs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 0 {
			t.Fatalf("outputs after destroy: %v", outs)
		}
	})
}

func checkOutputs(t *testing.T, outs []*runnerpb.Output, name, marker string) {
	t.Helper()
	byName := outputsByName(outs)
	want := map[string]struct {
		value     string
		typ       string
		sensitive bool
	}{
		"name":     {`"` + name + `"`, `"string"`, false},
		"answer":   {`42`, `"number"`, false},
		"labels":   {`{"app":"landform","name":"` + name + `"}`, `["object",{"app":"string","name":"string"}]`, false},
		"password": {`"s3cr3t-value"`, `"string"`, true},
		"marker":   {`"` + marker + `"`, `"string"`, false},
	}
	if len(byName) != len(want) {
		t.Fatalf("outputs %v", byName)
	}
	for k, w := range want {
		o := byName[k]
		if o == nil {
			t.Fatalf("output %s missing", k)
		}
		if got := compactJSON(t, o.ValueJson); got != w.value {
			t.Errorf("output %s = %s, want %s", k, got, w.value)
		}
		if got := compactJSON(t, o.TypeJson); got != w.typ {
			t.Errorf("output %s type %s, want %s", k, got, w.typ)
		}
		if o.Sensitive != w.sensitive {
			t.Errorf("output %s sensitive %v, want %v", k, o.Sensitive, w.sensitive)
		}
	}
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("invalid JSON %q: %v", b, err)
	}
	return buf.String()
}

// step runs a subtest that later steps depend on: the test stops at the
// first failed step.
func step(t *testing.T, name string, fn func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, fn) {
		t.FailNow()
	}
}
