package server

import (
	"context"
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
// claims, writes neither: the controller created the Secret holding an
// empty state (tfstate.SeedAnnotation), so the engine writes none under
// its own lock, and the plan reads the state without a lock. The apply
// then takes the lock and writes the state of the same lineage. A Secret
// an older controller created empty is seeded by the runner: one write.
func TestNewWorkspaceFirstPlanWritesNoLease(t *testing.T) {
	for _, tt := range []struct {
		name string
		// seed is the lineage of the empty state the controller created
		// the Secret with; none: created empty.
		seed string
		// secretWrites is the state Secret's writes during the plan.
		secretWrites int
		log          string
	}{
		{name: "seeded", seed: statelock.NewID(), secretWrites: 0},
		{name: "empty", secretWrites: 1, log: "Landform wrote the empty state of the new workspace."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 3*time.Minute)
			r, k, _ := runnerOnKube(t, ctx, "new-"+tt.name, 0)
			secret, lease := claimState(t, ctx, k, tt.seed)
			l := newLogs()
			id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Plan})
			res, err := r.client.WatchRun(ctx, id, 0, func(_ int64, line string) { l.add(line) })
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{tt.log, "Landform found the state unlocked: the plan reads it without a lock."} {
				if !strings.Contains(l.text(), want) {
					t.Errorf("plan log lacks %q:\n%s", want, l.text())
				}
			}
			if n := k.writesSince(t, ctx, secret); n != tt.secretWrites {
				t.Errorf("the state Secret was written %d times during the first plan, want %d", n, tt.secretWrites)
			}
			if n := k.writesSince(t, ctx, lease); n != 0 {
				t.Errorf("the Lease was written %d times during the first plan", n)
			}
			seeded := readState(t, k.state(t, ctx))
			if seeded.Lineage == "" || seeded.Serial != 0 || (tt.seed != "" && seeded.Lineage != tt.seed) {
				t.Fatalf("the new workspace's state: %+v; want serial 0 of lineage %q (or a new one)", seeded, tt.seed)
			}

			id = startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Apply, PlanFile: res.Plan.PlanFile, LockFile: res.Plan.LockFile})
			if _, err := r.client.WatchRun(ctx, id, 0, nil); err != nil {
				t.Fatal(err)
			}
			applied := readState(t, k.state(t, ctx))
			if applied.Lineage != seeded.Lineage || applied.Serial <= seeded.Serial || applied.Resources == 0 {
				t.Errorf("the applied state %+v; want lineage %s, a higher serial, resources", applied, seeded.Lineage)
			}
		})
	}
}

// A module that encrypts its state (OpenTofu's encryption block, with no
// fallback: a plain state is refused) gets a state of the engine's own:
// the runner removes the controller's untouched empty state first, and
// the engine writes an encrypted one.
func TestEncryptingModuleGetsTheEnginesState(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	k := newKubeState(t, "new-encrypted")
	r := startRunner(t)
	tb := encryptedTarball(t, "counted")
	effects := filepath.Join(t.TempDir(), "effects")
	upload(t, ctx, r.client, k.useBackend(workspaceSpec(t, tb, "encrypted", map[string]any{"effects": effects, "seconds": 0}, "")), tb)
	claimState(t, ctx, k, statelock.NewID())

	l := newLogs()
	id := startRun(t, ctx, r.client, runner.RunSpec{Action: runner.Plan})
	if _, err := r.client.WatchRun(ctx, id, 0, func(_ int64, line string) { l.add(line) }); err != nil {
		t.Fatalf("plan of an encrypting module on the seeded Secret: %v\n%s", err, l.text())
	}
	if want := "Landform removed the empty state it made for the new workspace"; !strings.Contains(l.text(), want) {
		t.Errorf("plan log lacks %q:\n%s", want, l.text())
	}
	raw, err := tfstate.Decompress(k.state(t, ctx))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"encrypted_data"`) {
		t.Errorf("the state the engine made is not encrypted:\n%s", raw)
	}
}

// claimState creates k's state Secret and Lease as the controller's claim
// does: the Secret holding the empty state of lineage seed, or empty
// without one (as controllers before the seed did). It returns both as
// created.
func claimState(t *testing.T, ctx context.Context, k *kubeState, seed string) (*corev1.Secret, *coordinationv1.Lease) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: statelock.StateSecretName("", k.suffix), Annotations: map[string]string{"encoding": "gzip"}}}
	if seed != "" {
		s.Annotations[tfstate.SeedAnnotation] = seed
		s.Data = map[string][]byte{tfstate.DataKey: tfstate.Empty(seed)}
	}
	secret, err := k.clientset.CoreV1().Secrets(k.namespace).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := k.leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k.leaseName()}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return secret, lease
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
