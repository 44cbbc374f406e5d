package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/runner"
)

// TestLocalRunner drives the built runner binary through runner.StartLocal,
// in a named terraform workspace, then stops it with SIGTERM in the middle
// of a long apply: terraform must stop cleanly and release the state lock.
func TestLocalRunner(t *testing.T) {
	t.Parallel()
	bin := runnerBinary(t)
	ctx := testContext(t, 4*time.Minute)
	workDir := t.TempDir()
	var runnerLog bytes.Buffer
	client, stop, err := runner.StartLocal(ctx, testCA, runner.LocalOptions{
		Binary:  bin,
		Engine:  enginePath,
		WorkDir: workDir,
		Stderr:  &runnerLog,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop(30 * time.Second)
		}
	}()

	tb := modulesTarball(t, 0)
	stateDir, markerDir := t.TempDir(), t.TempDir()
	spec := workspaceSpec(t, tb, "basic", map[string]any{"name": "local", "dir": markerDir}, stateDir)
	spec.Workspace = "staging"
	upload(t, ctx, client, spec, tb)
	plan, err := client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Result.Add != 2 {
		t.Fatalf("plan %+v", plan.Result)
	}
	outs, err := client.Apply(ctx, plan.PlanFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(markerDir, "marker.txt")); got != "local" {
		t.Fatalf("marker %q", got)
	}
	if v := outputsByName(outs)["name"]; v == nil || string(v.ValueJson) != `"local"` {
		t.Fatalf("outputs %v", outs)
	}
	// The state went to the selected workspace, not to default.
	if _, err := os.Stat(filepath.Join(stateDir, "workspaces", "staging", "terraform.tfstate")); err != nil {
		t.Fatalf("no state in workspace staging: %v", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "terraform.tfstate")); err == nil {
		t.Fatal("state written to the default workspace")
	}

	// Same tarball, another module: no transfer, but a new init.
	slow := workspaceSpec(t, tb, "slow", nil, stateDir)
	slow.Workspace = "staging"
	upload(t, ctx, client, slow, tb)
	slowPlan, err := client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := slowPlan.Result; res.Add != 1 || res.Destroy != 2 {
		t.Fatalf("slow plan %+v, want the basic resources destroyed and one added", res)
	}
	_, applied := applyExecuting(t, ctx, client, slowPlan.PlanFile)

	began := time.Now()
	stopped = true
	if err := stop(30 * time.Second); err != nil {
		t.Fatalf("stop: %v\nrunner log:\n%s", err, runnerLog.String())
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Fatalf("runner took %s to stop", d)
	}
	select {
	case err := <-applied:
		if err == nil {
			t.Fatal("interrupted apply succeeded")
		}
		t.Logf("interrupted apply: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("apply call did not return after the runner stopped")
	}
	if entries, _ := os.ReadDir(workDir); len(entries) != 0 {
		t.Fatalf("runner dir left behind: %v", entries)
	}
	// The runner logs lifecycle lines only: no terraform output.
	checkRunnerLog(t, runnerLog.String())

	// Terraform released the lock: another runner can plan this state.
	r := startRunner(t)
	upload(t, ctx, r.client, slow, tb)
	if _, err := r.client.Plan(ctx, false, nil); err != nil {
		t.Fatalf("state still locked after SIGTERM: %v", err)
	}
}

// checkRunnerLog asserts that the runner logged its lifecycle and nothing
// of terraform's output or the workspace's values.
func checkRunnerLog(t *testing.T, log string) {
	t.Helper()
	if !strings.Contains(log, "rpc finished") {
		t.Fatalf("no lifecycle lines in the runner log:\n%s", log)
	}
	for _, leak := range []string{"Executing", "terraform_data", "Plan:", "s3cr3t"} {
		if strings.Contains(log, leak) {
			t.Fatalf("runner log contains %q:\n%s", leak, log)
		}
	}
}

// TestRunnerSIGTERM sends SIGTERM to the runner binary during a long apply:
// the runner interrupts terraform, the call ends with INTERRUPTED, the
// runner exits cleanly and the state lock is released.
func TestRunnerSIGTERM(t *testing.T) {
	t.Parallel()
	bin := runnerBinary(t)
	ctx := testContext(t, 3*time.Minute)
	dir := t.TempDir()
	files := runnerCertFiles(t, dir)
	addrR, addrW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var runnerLog bytes.Buffer
	cmd := exec.Command(bin,
		"--listen", "127.0.0.1:0", "--address-fd", "3",
		"--tls-cert", files.cert, "--tls-key", files.key, "--tls-client-ca", files.ca,
		"--work-dir", filepath.Join(dir, "work"), "--engine", enginePath, "--grace", "30s")
	cmd.Stderr = &runnerLog
	cmd.ExtraFiles = []*os.File{addrW}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrW.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	// The runner writes its address and closes the pipe, which also
	// closes if it exits before listening.
	defer context.AfterFunc(ctx, func() { addrR.Close() })()
	written, err := io.ReadAll(addrR)
	addr := strings.TrimSpace(string(written))
	if err != nil || addr == "" {
		t.Fatalf("runner address %q: %v", addr, err)
	}
	client, err := runner.Dial(ctx, addr, clientTLS(t, testCA))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	tb := modulesTarball(t, 0)
	spec := workspaceSpec(t, tb, "slow", nil, t.TempDir())
	upload(t, ctx, client, spec, tb)
	plan, err := client.Plan(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, applied := applyExecuting(t, ctx, client, plan.PlanFile)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-applied:
		wantError(t, err, codes.Unavailable, runner.ReasonInterrupted)
	case <-time.After(20 * time.Second):
		t.Fatal("apply did not return within 20s of SIGTERM")
	}
	select {
	case <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("runner exit code %d\n%s", code, runnerLog.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("runner still running 20s after SIGTERM")
	}
	// Terraform was interrupted, not killed: it said so, and the runner
	// streamed that before the call ended.
	if !strings.Contains(l.text(), "Interrupt received") {
		t.Fatalf("apply logs:\n%s", l.text())
	}
	checkRunnerLog(t, runnerLog.String())

	r := startRunner(t)
	upload(t, ctx, r.client, spec, tb)
	if _, err := r.client.Plan(ctx, false, nil); err != nil {
		t.Fatalf("state still locked after SIGTERM: %v", err)
	}
}

// certFiles are a runner's TLS files, as its flags name them.
type certFiles struct{ cert, key, ca string }

// runnerCertFiles writes a runner's server certificate, its key and the
// client CA, issued by testCA, into dir.
func runnerCertFiles(t *testing.T, dir string) certFiles {
	t.Helper()
	certPEM, keyPEM, err := testCA.IssueServer([]string{"127.0.0.1", "::1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := certFiles{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key"), ca: filepath.Join(dir, "ca.crt")}
	for path, data := range map[string][]byte{files.cert: certPEM, files.key: keyPEM, files.ca: testCA.CertPEM()} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func TestRefusesUnauthenticatedClients(t *testing.T) {
	t.Parallel()
	r := startRunner(t)
	other, err := mtls.NewCA("other-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreignCert, foreignKey, err := other.IssueClient("intruder", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := mtls.ClientTLSConfig(foreignCert, foreignKey, testCA.CertPEM(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	// Present the foreign certificate even though the server does not
	// list its CA.
	foreignPair := foreign.Certificates[0]
	foreign.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreignPair, nil }

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(testCA.CertPEM())
	anonymous := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}

	for _, tt := range []struct {
		name, refusal string
		cfg           *tls.Config
	}{
		{"certificate from another CA", "unknown certificate authority", foreign},
		{"no certificate", "certificate required", anonymous},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t, 2*time.Second)
			c, err := runner.Dial(ctx, r.addr, tt.cfg)
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			// Why: the server's alert, seen on a raw connection (gRPC
			// reports whichever error its last attempt hit).
			cfg := tt.cfg.Clone()
			cfg.NextProtos = []string{"h2"}
			conn, err := tls.Dial("tcp", r.addr, cfg)
			if err == nil {
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.refusal) {
				t.Fatalf("want a TLS refusal %q, got %v", tt.refusal, err)
			}
		})
	}

	// The real client still gets in, and gets a typed error.
	_, err = r.client.Plan(context.Background(), false, nil)
	wantError(t, err, codes.FailedPrecondition, runner.ReasonNoWorkspace)
}
