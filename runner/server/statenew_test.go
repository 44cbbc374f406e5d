package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/runner"
)

// A new workspace's first plan, on the Secret and Lease the controller
// claims empty, writes the state Secret once and the Lease never: the
// runner writes the empty state (not the engine under its own lock) and
// the plan reads the state without a lock. The apply then takes the lock
// and writes the state of the same lineage.
func TestNewWorkspaceFirstPlanWritesNoLease(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	r, k, _ := runnerOnKube(t, ctx, "seeded", 0)
	secrets := k.clientset.CoreV1().Secrets(k.namespace)
	name := statelock.StateSecretName("", k.suffix)
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"encoding": "gzip"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease, err := k.leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k.leaseName()}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := newLogs()
	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Plan})
	res, err := r.client.WatchRun(ctx, id, 0, func(_ int64, line string) { l.add(line) })
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Landform wrote the empty state of the new workspace.", "Landform found the state unlocked: the plan reads it without a lock."} {
		if !strings.Contains(l.text(), want) {
			t.Errorf("plan log lacks %q:\n%s", want, l.text())
		}
	}
	after, err := k.leases.Get(ctx, k.leaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != lease.ResourceVersion {
		t.Errorf("the Lease was written during the first plan (resourceVersion %s, then %s)", lease.ResourceVersion, after.ResourceVersion)
	}
	seeded := readState(t, k.state(t, ctx))
	if seeded.Lineage == "" || seeded.Serial != 0 {
		t.Fatalf("the new workspace's state: %+v; want serial 0 of a new lineage", seeded)
	}

	id = startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: res.Plan.PlanFile, LockFile: res.Plan.LockFile})
	if _, err := r.client.WatchRun(ctx, id, 0, nil); err != nil {
		t.Fatal(err)
	}
	applied := readState(t, k.state(t, ctx))
	if applied.Lineage != seeded.Lineage || applied.Serial <= seeded.Serial || applied.Resources == 0 {
		t.Errorf("the applied state %+v; want lineage %s, a higher serial, resources", applied, seeded.Lineage)
	}
}

type stateFacts struct {
	Lineage   string
	Serial    int64
	Resources int
}

func readState(t *testing.T, gzipped []byte) stateFacts {
	t.Helper()
	raw, err := tfstate.Decompress(gzipped)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Lineage   string            `json:"lineage"`
		Serial    int64             `json:"serial"`
		Resources []json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	return stateFacts{st.Lineage, st.Serial, len(st.Resources)}
}

// A module that may encrypt its state is left to the engine.
func TestMayEncrypt(t *testing.T) {
	for _, tt := range []struct {
		name string
		file string
		env  map[string]string
		want bool
	}{
		{"plain module", `resource "terraform_data" "x" {}`, nil, false},
		{"encryption block", "terraform {\n  encryption {\n    method \"aes_gcm\" \"m\" {}\n  }\n}\n", nil, true},
		{"TF_ENCRYPTION", `resource "terraform_data" "x" {}`, map[string]string{"TF_ENCRYPTION": "key_provider {}"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := mayEncrypt(&workspace{moduleDir: dir, env: tt.env}); got != tt.want {
				t.Errorf("mayEncrypt = %v, want %v", got, tt.want)
			}
		})
	}
}
