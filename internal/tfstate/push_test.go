package tfstate

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/landform-dev/landform/internal/testenv"
)

func stateFile(lineage string, serial int, resources string) []byte {
	return []byte(fmt.Sprintf(`{"version":4,"serial":%d,"lineage":%q,"resources":[%s],"outputs":{}}`, serial, lineage, resources))
}

func encryptedFile(lineage string, serial int, payload string) []byte {
	return []byte(fmt.Sprintf(`{"serial":%d,"lineage":%q,"meta":{},"encrypted_data":%q,"encryption_version":"v0"}`, serial, lineage, payload))
}

// Push decides as `state push` does, and never overwrites a state of
// another lineage, a newer one, or another of the same serial unless the
// caller held the lock since the engine tried to write it.
func TestCheckPush(t *testing.T) {
	res := `{"type":"terraform_data","name":"this"}`
	next := stateFile("L", 4, res)
	for _, tc := range []struct {
		name    string
		current []byte
		state   []byte
		opts    PushOptions
		write   bool
		refused bool
	}{
		{name: "no state yet", current: nil, state: next, write: true},
		{name: "the serial before", current: stateFile("L", 3, ""), state: next, write: true},
		{name: "these very bytes", current: next, state: next, write: false},
		{name: "an empty state of another lineage", current: stateFile("M", 9, ""), state: next, write: true},
		{name: "another lineage", current: stateFile("M", 3, res), state: next, refused: true},
		{name: "a newer serial", current: stateFile("L", 5, res), state: next, refused: true},
		{name: "the same serial, other bytes", current: stateFile("L", 4, res+`,{"name":"x"}`), state: next, refused: true},
		{name: "the same serial under the apply's lock", current: encryptedFile("L", 4, "a"), state: encryptedFile("L", 4, "b"), opts: PushOptions{HeldSinceApply: true}, write: true},
		{name: "an encrypted state of another lineage", current: encryptedFile("M", 3, "a"), state: encryptedFile("L", 4, "b"), refused: true},
		{name: "forced over a newer one", current: stateFile("L", 5, res), state: next, opts: PushOptions{Force: true}, write: true},
		{name: "over an unreadable state", current: []byte("garbage"), state: next, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := readHeader(tc.state)
			if err != nil {
				t.Fatal(err)
			}
			_, write, err := checkPush(tc.current, tc.state, h, tc.opts)
			if IsRefused(err) != tc.refused || (err != nil && !tc.refused) {
				t.Fatalf("error %v, want refused %v", err, tc.refused)
			}
			if write != tc.write {
				t.Fatalf("write %v, want %v", write, tc.write)
			}
		})
	}
}

// Push writes the state as the backend does (gzip'd, in the Secret the
// backend reads) and refuses what it must, against a real API server.
func TestPush(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := env.Namespace(t)
	secrets := cs.CoreV1().Secrets(ns)
	if _, err := Push(ctx, secrets, "tfstate-default-x", stateFile("L", 1, ""), PushOptions{}); err == nil || IsRefused(err) {
		t.Fatalf("push without a state Secret: %v, want an error that is no refusal", err)
	}
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tfstate-default-x"}, Data: map[string][]byte{DataKey: Compress(stateFile("L", 3, ""))}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	next := stateFile("L", 4, `{"name":"this"}`)
	pushed, err := Push(ctx, secrets, "tfstate-default-x", next, PushOptions{})
	if err != nil || !pushed.Written || pushed.Previous.Serial != 3 {
		t.Fatalf("push: %+v, %v", pushed, err)
	}
	s, err := secrets.Get(ctx, "tfstate-default-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Decompress(s.Data[DataKey])
	if err != nil || string(raw) != string(next) {
		t.Fatalf("the Secret holds %q (%v)", raw, err)
	}
	if pushed, err := Push(ctx, secrets, "tfstate-default-x", next, PushOptions{}); err != nil || pushed.Written {
		t.Fatalf("pushing the same bytes again: %+v, %v", pushed, err)
	}
	if _, err := Push(ctx, secrets, "tfstate-default-x", stateFile("L", 2, ""), PushOptions{}); !IsRefused(err) {
		t.Fatalf("pushing an older state: %v, want refused", err)
	}
}
