package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/testenv"
	"github.com/landform-dev/landform/runner"
	runnerpb "github.com/landform-dev/landform/runner/proto"
)

var (
	// enginePath is the real engine every test runs: LANDFORM_TOFU, else
	// the repository's bin/tofu.
	enginePath string
	testCA     *mtls.CA
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeControllerEnv) != "" {
		fakeController()
		return
	}
	var err error
	if enginePath, err = testenv.Tool("tofu", "LANDFORM_TOFU"); err != nil {
		fmt.Fprintln(os.Stderr, "runner tests need OpenTofu (LANDFORM_TOFU may name a tofu or terraform binary):", err)
		os.Exit(1)
	}
	// A hostile machine environment, which the runner must keep from
	// terraform: TF_CLI_ARGS would add an unknown flag to every command,
	// TF_WORKSPACE would select another workspace, a missing CLI
	// configuration makes terraform warn on every call, and a stray
	// TF_VAR_ would fill the variable the missing-variable test leaves out.
	for k, v := range map[string]string{
		"TF_CLI_ARGS":        "-no-such-flag",
		"TF_WORKSPACE":       "elsewhere",
		"TF_CLI_CONFIG_FILE": "/nonexistent/terraformrc",
		"TF_VAR_name":        "from-the-machine",
	} {
		os.Setenv(k, v)
	}
	if testCA, err = mtls.NewCA("landform-test-ca", time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	runnerBin.cleanup()
	kube.stop()
	os.Exit(code)
}

// tool is the program name, where testenv.Tool finds it; a missing one
// fails t.
func tool(t *testing.T, name, envVar string) string {
	t.Helper()
	path, err := testenv.Tool(name, envVar)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// testRunner is an in-process runner server on loopback, reached over mTLS.
type testRunner struct {
	server *Server
	client *runner.Client
	addr   string
}

// testContext ends with the test or after d, whichever comes first: a
// call that hangs fails its own test, not the whole package by its
// timeout.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func startRunner(t *testing.T) *testRunner {
	t.Helper()
	return startRunnerWith(t, enginePath)
}

// startRunnerWith starts a runner on the given engine binary.
func startRunnerWith(t *testing.T, engine string) *testRunner {
	t.Helper()
	return startRunnerOpts(t, Options{Engine: engine})
}

// startRunnerOpts starts a runner with opts, defaulting the work dir, the
// interrupt grace and the logger.
func startRunnerOpts(t *testing.T, opts Options) *testRunner {
	t.Helper()
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	if opts.InterruptGrace == 0 {
		opts.InterruptGrace = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := testCA.IssueServer([]string{"127.0.0.1", "::1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := mtls.ServerTLSConfig(certPEM, keyPEM, testCA.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	gs, err := srv.NewGRPCServer(serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := runner.Dial(ctx, lis.Addr().String(), clientTLS(t, testCA))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		if err := srv.Shutdown(30 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		gs.Stop()
	})
	return &testRunner{server: srv, client: client, addr: lis.Addr().String()}
}

// startLocalRunner starts the runner binary as the controller's local
// runners run, on the test engine in a work dir of t's unless opts say
// otherwise, and stops it when the test ends.
func startLocalRunner(t *testing.T, ctx context.Context, opts runner.LocalOptions) *runner.LocalRunner {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = runnerBinary(t)
	}
	if opts.Engine == "" {
		opts.Engine = enginePath
	}
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	lr, err := runner.StartLocalRunner(ctx, testCA, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lr.Stop(10 * time.Second) })
	return lr
}

func clientTLS(t *testing.T, ca *mtls.CA) *tls.Config {
	t.Helper()
	c, k, err := ca.IssueClient("landform-controller", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mtls.ClientTLSConfig(c, k, testCA.CertPEM(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// tarball is a gzip tar of testdata/modules, as source-controller serves
// artifacts, with padding bytes of random (incompressible) data.
type tarball struct {
	data   []byte
	digest string
}

func modulesTarball(t *testing.T, padding int) tarball {
	t.Helper()
	if padding == 0 {
		return buildTarball(t, nil)
	}
	return buildTarball(t, map[string][]byte{"padding.bin": randomBytes(t, padding)})
}

// buildTarball tars testdata/modules plus extra files (path: content).
func buildTarball(t *testing.T, extra map[string][]byte) tarball {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "modules"))); err != nil {
		t.Fatal(err)
	}
	for name, data := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, digest := testenv.TarDir(t, dir)
	return tarball{data: data, digest: digest}
}

// encryptedTarball is modulesTarball with the encrypted module made whole:
// testdata/modules/encrypted holds only OpenTofu's encryption block, and
// takes its main.tf from the module named like.
func encryptedTarball(t *testing.T, like string) tarball {
	t.Helper()
	main, err := os.ReadFile(filepath.Join("testdata", "modules", like, "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	return buildTarball(t, map[string][]byte{"encrypted/main.tf": main})
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// localBackend keeps the state in stateDir; the kubernetes backend is
// covered by the controller's envtest suites.
func localBackend(stateDir string) string {
	return fmt.Sprintf("terraform {\n  backend \"local\" {\n    path          = %q\n    workspace_dir = %q\n  }\n}\n",
		filepath.Join(stateDir, "terraform.tfstate"), filepath.Join(stateDir, "workspaces"))
}

func workspaceSpec(t *testing.T, tb tarball, path string, vars map[string]any, stateDir string) *runnerpb.WorkspaceSpec {
	t.Helper()
	var varsJSON []byte
	if vars != nil {
		var err error
		if varsJSON, err = json.Marshal(vars); err != nil {
			t.Fatal(err)
		}
	}
	return &runnerpb.WorkspaceSpec{
		TarballDigest: tb.digest,
		TarballSize:   int64(len(tb.data)),
		Path:          path,
		VarsJson:      varsJSON,
		CustomBackend: localBackend(stateDir),
	}
}

func upload(t *testing.T, ctx context.Context, c *runner.Client, spec *runnerpb.WorkspaceSpec, tb tarball) {
	t.Helper()
	if err := c.UploadWorkspace(ctx, spec, bytes.NewReader(tb.data)); err != nil {
		t.Fatalf("upload %s: %v", spec.Path, err)
	}
}

// wantError asserts a typed runner error.
func wantError(t *testing.T, err error, code codes.Code, reason string) *runner.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s (%s), got no error", reason, code)
	}
	e, ok := runner.AsError(err)
	if !ok {
		t.Fatalf("want %s (%s), got %v", reason, code, err)
	}
	if e.Code != code || e.Reason != reason {
		t.Fatalf("want %s (%s), got %s (%s): %s", reason, code, e.Reason, e.Code, e.Message)
	}
	t.Logf("%s: %s", e.Reason, e.Message)
	return e
}

func outputsByName(outs []*runnerpb.Output) map[string]*runnerpb.Output {
	m := map[string]*runnerpb.Output{}
	for _, o := range outs {
		m[o.Name] = o
	}
	return m
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(data)
}

// runnerBin builds cmd/runner once, unless LANDFORM_RUNNER_BIN names a
// built one.
type binaryBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

var runnerBin binaryBuild

func (b *binaryBuild) cleanup() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

func runnerBinary(t *testing.T) string {
	t.Helper()
	runnerBin.once.Do(func() {
		if runnerBin.dir, runnerBin.err = os.MkdirTemp("", "landform-runner-bin-"); runnerBin.err == nil {
			runnerBin.path, runnerBin.err = testenv.RunnerBinary(runnerBin.dir)
		}
	})
	if runnerBin.err != nil {
		t.Fatal(runnerBin.err)
	}
	return runnerBin.path
}
