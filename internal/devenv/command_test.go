package devenv

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/landform-dev/landform/internal/cloud"
)

// startCloud starts a stand-in cloud on loopback until the test ends.
func startCloud(t *testing.T) (*cloud.Server, string) {
	t.Helper()
	srv := cloud.New(cloud.Options{})
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, url
}

// TestCloudLs lists a real stand-in cloud found through env.json, the way
// `landform dev cloud ls` does in another terminal.
func TestCloudLs(t *testing.T) {
	srv, url := startCloud(t)
	c := &cloud.Client{URL: url}
	ctx := context.Background()
	name, desc := "web", "web tier"
	sg, err := c.CreateSecurityGroup(ctx, cloud.SecurityGroupRequest{Name: &name, Description: &desc,
		Ingress: &[]cloud.IngressRule{{Protocol: "tcp", Port: 5432, CIDR: "10.0.0.0/8"}}})
	if err != nil {
		t.Fatal(err)
	}
	dbName, engine, size := "app", "postgres", 10
	db, err := c.CreateDatabase(ctx, cloud.DatabaseRequest{Name: &dbName, Engine: &engine, SizeGB: &size, SecurityGroupIDs: &[]string{sg.ID}})
	if err != nil {
		t.Fatal(err)
	}

	state := t.TempDir()
	writeInfo(t, state, Info{CloudURL: url})
	out := runDev(t, "--state-dir", state, "cloud", "ls")
	for _, want := range []string{
		"security-group   " + sg.ID + "   web",
		"tcp/5432 from 10.0.0.0/8",
		"database         " + db.ID + "   app",
		"postgres 10GB",
		"security groups: " + sg.ID,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("cloud ls lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, db.Password) {
		t.Errorf("cloud ls shows the database password:\n%s", out)
	}

	// No environment yet, and one that is not running.
	err = runDevErr(t, "--state-dir", t.TempDir(), "cloud", "ls")
	if err == nil || !strings.Contains(err.Error(), "start one with `landform dev`") {
		t.Errorf("cloud ls without env.json: %v", err)
	}
	srv.Close()
	err = runDevErr(t, "--state-dir", state, "cloud", "ls")
	if err == nil || !strings.Contains(err.Error(), "is `landform dev` running?") {
		t.Errorf("cloud ls with the cloud stopped: %v", err)
	}
}

func TestCloudLsEmpty(t *testing.T) {
	_, url := startCloud(t)
	state := t.TempDir()
	writeInfo(t, state, Info{CloudURL: url})
	if out := runDev(t, "--state-dir", state, "cloud", "ls"); out != "The stand-in cloud is empty.\n" {
		t.Errorf("cloud ls of an empty cloud: %q", out)
	}
}

func TestFindRepo(t *testing.T) {
	root, err := filepath.Abs(repoRoot())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := FindRepo(""); err != nil || got != root {
		t.Errorf("findRepo from the package directory: %q, %v; want %q", got, err, root)
	}
	if _, err := FindRepo(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not a Landform checkout") {
		t.Errorf("findRepo of an empty directory: %v", err)
	}
}

func writeInfo(t *testing.T, state string, info Info) {
	t.Helper()
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "env.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func runDev(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("dev %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

func runDevErr(t *testing.T, args ...string) error {
	t.Helper()
	var out bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs(args)
	return cmd.Execute()
}
