package server

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/runner"
)

// apiLink forwards TCP connections to the test API server until it is
// cut: then every connection through it breaks and new ones are closed at
// once, as when the API server is gone, until it is restored. The API
// server itself is shared with other tests and keeps running.
type apiLink struct {
	addr string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// apiHost is the test API server's host:port.
func apiHost(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(kube.env.Config.Host)
	if err != nil || u.Host == "" {
		t.Fatalf("API server address %q: %v", kube.env.Config.Host, err)
	}
	return u.Host
}

func startAPILink(t *testing.T, target string) *apiLink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	a := &apiLink{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go a.forward(c, target)
		}
	}()
	return a
}

func (a *apiLink) forward(c net.Conn, target string) {
	a.mu.Lock()
	if a.cut {
		a.mu.Unlock()
		c.Close()
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		a.mu.Unlock()
		c.Close()
		return
	}
	a.conns = append(a.conns, c, up)
	a.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

func (a *apiLink) setCut(cut bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cut = cut
	if cut {
		for _, c := range a.conns {
			c.Close()
		}
		a.conns = nil
	}
}

// kubeconfigThrough writes k's kubeconfig with the API server reached
// through a.
func (k *kubeState) kubeconfigThrough(t *testing.T, a *apiLink) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = a.addr
		c.Server = u.String()
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-link")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// persistEvents collects what a watch reports of a kept state.
type persistEvents struct {
	mu   sync.Mutex
	seen []runner.StatePersist
}

func (p *persistEvents) add(e runner.StatePersist) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, e)
}

func (p *persistEvents) all() []runner.StatePersist {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]runner.StatePersist(nil), p.seen...)
}

// The API server goes away while an apply creates its resource, for
// longer than the engine tries to write the state: the engine writes
// errored.tfstate and fails. The runner keeps that state, hands it to the
// watch, writes it to the state Secret once the API server answers again,
// and the run succeeds: the state holds the resource, created once, and
// the lock is free. With OpenTofu state encryption (which `tofu state
// push` cannot read back) the state is written as encrypted as the engine
// wrote it.
func TestRunnerWritesTheStateTheEngineCouldNotSave(t *testing.T) {
	for _, module := range []string{"counted", "encrypted"} {
		t.Run(module, func(t *testing.T) {
			t.Parallel()
			writesTheStateTheEngineCouldNotSave(t, module)
		})
	}
}

func writesTheStateTheEngineCouldNotSave(t *testing.T, module string) {
	ctx := testContext(t, 4*time.Minute)
	k := newKubeState(t, "unsaved-"+module)
	link := startAPILink(t, apiHost(t))
	r := startRunner(t)
	// The encrypted module is the counted module with encryption.tf.
	tb := encryptedTarball(t, "counted")
	effects := filepath.Join(t.TempDir(), "effects")
	spec := k.useBackend(workspaceSpec(t, tb, module, map[string]any{"effects": effects, "seconds": 10}, ""))
	spec.BackendConfig["config_path"] = k.kubeconfigThrough(t, link)
	upload(t, ctx, r.client, spec, tb)
	plan := planFor(t, ctx, r.client)

	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile, LockFile: plan.LockFile})
	var persist persistEvents
	l, watched := watchExecuting(t, ctx, r.client, id, runner.OnStatePersist(persist.add))
	link.setCut(true)
	l.waitFor(t, "Landform keeps the state", time.Minute)
	l.waitFor(t, "could not write the kept state to the backend yet (attempt 2)", time.Minute)
	kept, err := os.ReadFile(filepath.Join(r.server.workDir, runner.KeptStateFile))
	if err != nil {
		t.Fatalf("the runner keeps no state in its work directory: %v", err)
	}
	switch encrypted := strings.Contains(string(kept), `"encrypted_data"`); {
	case module == "encrypted" && (!encrypted || strings.Contains(string(kept), "terraform_data")):
		t.Fatalf("the kept state is not encrypted:\n%s", kept)
	case module != "encrypted" && !strings.Contains(string(kept), "terraform_data"):
		t.Fatalf("the kept state lacks the resource:\n%s", kept)
	}
	link.setCut(false)

	got := <-watched
	if got.err != nil {
		t.Fatalf("run: %v\n%s", got.err, l.text())
	}
	if o := outputsByName(got.res.Outputs)["effects"]; o == nil {
		t.Fatalf("outputs %v", got.res.Outputs)
	}
	if n := countCreates(t, effects); n != 1 {
		t.Fatalf("creates %d, want 1", n)
	}
	events := persist.all()
	if len(events) != 2 || events[0].Saved || string(events[0].State) != string(kept) || !events[1].Saved || events[1].Digest != events[0].Digest {
		t.Fatalf("state persist events %+v, want the kept state then saved", events)
	}
	stored, err := tfstate.Decompress(k.state(t, ctx))
	if err != nil || string(stored) != string(kept) {
		t.Fatalf("the state Secret holds %q (%v), want the kept state", stored, err)
	}
	if info := k.lock(t); info != nil {
		t.Fatalf("the lock outlived the run: %+v", info)
	}
	if _, err := os.Stat(filepath.Join(r.server.workDir, runner.KeptStateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the kept state outlived its write: %v", err)
	}
	if !strings.Contains(l.text(), "Landform wrote the kept state to the backend") {
		t.Fatalf("the run log does not say the state was written:\n%s", l.text())
	}
	// The engine reads the state as written: a plan finds nothing to do.
	if again := planFor(t, ctx, r.client); again.Result.GetHasChanges() {
		t.Fatalf("a plan after the written state has changes: %+v", again.Result)
	}
}

// Should the API server not come back before the run's deadline, the run
// fails with STATE_UNSAVED, and the runner keeps the state.
func TestRunnerKeepsTheStateItCouldNotSaveByTheDeadline(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 4*time.Minute)
	k := newKubeState(t, "unsaved-deadline")
	link := startAPILink(t, apiHost(t))
	r := startRunner(t)
	tb := modulesTarball(t, 0)
	effects := filepath.Join(t.TempDir(), "effects")
	spec := k.useBackend(workspaceSpec(t, tb, "counted", map[string]any{"effects": effects, "seconds": 2}, ""))
	spec.BackendConfig["config_path"] = k.kubeconfigThrough(t, link)
	upload(t, ctx, r.client, spec, tb)
	plan := planFor(t, ctx, r.client)

	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile, LockFile: plan.LockFile, Deadline: 25 * time.Second})
	var persist persistEvents
	_, watched := watchExecuting(t, ctx, r.client, id, runner.OnStatePersist(persist.add))
	link.setCut(true)
	wantError(t, (<-watched).err, codes.Unavailable, runner.ReasonStateUnsaved)
	events := persist.all()
	if len(events) != 1 || events[0].Saved || !strings.Contains(string(events[0].State), "terraform_data") {
		t.Fatalf("state persist events %+v, want the kept state, unsaved", events)
	}
	kept, err := os.ReadFile(filepath.Join(r.server.workDir, runner.KeptStateFile))
	if err != nil || string(kept) != string(events[0].State) {
		t.Fatalf("the runner keeps %q (%v), want the state it sent", kept, err)
	}
	if n := countCreates(t, effects); n != 1 {
		t.Fatalf("creates %d, want 1", n)
	}
}

// Once the runner wrote the state, the engine's complaint about it is no
// failure; any other error still is.
func TestWithoutPersistErrors(t *testing.T) {
	persist := "\nError: Failed to save state\n\nError saving state: Get \"https://x\": EOF\n\n" +
		"Error: Failed to persist state to backend\n\nThe error shown above has prevented OpenTofu from writing the updated state\nto the configured backend.\n"
	if err := withoutPersistErrors(&engineExit{code: 1, stderr: persist}); err != nil {
		t.Fatalf("only the state could not be saved: %v", err)
	}
	other := "\nError: creating thing: boom\n\n  with thing.this,\n" + persist
	err := withoutPersistErrors(&engineExit{code: 1, stderr: other})
	var exit *engineExit
	if !errors.As(err, &exit) || !strings.Contains(exit.stderr, "creating thing: boom") || strings.Contains(exit.stderr, "Failed to save state") {
		t.Fatalf("with another error: %v", err)
	}
	plain := errors.New("not an exit")
	if err := withoutPersistErrors(plain); err != plain {
		t.Fatalf("another failure: %v", err)
	}
}

// A module whose artifact ships an errored.tfstate (a person's failed local
// apply, committed) of another lineage: the runner drops it when it
// extracts the tarball and says so, without its content, so the apply
// succeeds and writes its own state, and nothing is kept unsaved.
func TestRunnerIgnoresAShippedErroredState(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 4*time.Minute)
	k := newKubeState(t, "shipped-errored")
	r := startRunner(t)
	const shippedLineage = "0badf00d-5151-4e0e-8ed0-000000000000"
	shipped := `{"version":4,"terraform_version":"1.8.0","serial":41,"lineage":"` + shippedLineage + `","outputs":{},` +
		`"resources":[{"mode":"managed","type":"terraform_data","name":"shipped","provider":"provider[\"terraform.io/builtin/terraform\"]",` +
		`"instances":[{"schema_version":0,"attributes":{"id":"shipped-id","input":null,"output":null,"triggers_replace":null}}]}],"check_results":null}` + "\n"
	tb := buildTarball(t, map[string][]byte{"counted/" + erroredStateFile: []byte(shipped)})
	effects := filepath.Join(t.TempDir(), "effects")
	spec := k.useBackend(workspaceSpec(t, tb, "counted", map[string]any{"effects": effects, "seconds": 0}, ""))
	upload(t, ctx, r.client, spec, tb)
	plan := planFor(t, ctx, r.client)

	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: plan.PlanFile, LockFile: plan.LockFile})
	var persist persistEvents
	l := newLogs()
	res, err := r.client.WatchRun(ctx, id, 0, func(_ int64, line string) { l.add(line) }, runner.OnStatePersist(persist.add))
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, l.text())
	}
	if o := outputsByName(res.Outputs)["effects"]; o == nil {
		t.Fatalf("outputs %v", res.Outputs)
	}
	if events := persist.all(); len(events) != 0 {
		t.Fatalf("the run sent an unsaved state: %+v", events)
	}
	if _, err := os.Stat(filepath.Join(r.server.workDir, runner.KeptStateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the runner keeps a state: %v", err)
	}
	if n := countCreates(t, effects); n != 1 {
		t.Fatalf("creates %d, want 1", n)
	}
	stored, err := tfstate.Decompress(k.state(t, ctx))
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Lineage   string `json:"lineage"`
		Resources []struct{ Type, Name string }
	}
	if err := json.Unmarshal(stored, &state); err != nil {
		t.Fatal(err)
	}
	if state.Lineage == shippedLineage || len(state.Resources) != 1 || state.Resources[0].Type != "terraform_data" || state.Resources[0].Name != "this" {
		t.Fatalf("the state Secret holds:\n%s\nwant the apply's own state, with terraform_data.this only", stored)
	}
	if info := k.lock(t); info != nil {
		t.Fatalf("the lock outlived the run: %+v", info)
	}
	logText := l.text()
	if !strings.Contains(logText, "counted/"+erroredStateFile) || strings.Contains(logText, shippedLineage) || strings.Contains(logText, "shipped-id") {
		t.Fatalf("the run log does not name the ignored file, or shows its content:\n%s", logText)
	}
}
