package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
)

// seedState makes a new workspace's state Secret ready for init. The
// controller creates it holding an empty state (tfstate.SeedAnnotation),
// so that the kubernetes backend, which would lock the Lease, write an
// empty state and unlock, writes nothing: this leaves it so, unless the
// module may encrypt its state (OpenTofu's encryption block, or
// TF_ENCRYPTION), whose enforced encryption would refuse a plain state:
// then an untouched seed is removed and the engine makes the state. A
// Secret a controller before that created empty is seeded here (one write
// where the engine makes three). A Secret that holds a state written by
// anyone else is left alone. Best effort: if a write fails, the engine
// creates the state as it always did, or reads the seed.
func (s *Server) seedState(ctx context.Context, ws *workspace, logf func(string)) {
	if ws.customBackend != "" {
		return
	}
	c, ns, err := s.stateClient(ws)
	if err != nil {
		return
	}
	secrets := c.Secrets(ns)
	name := statelock.StateSecretName(ws.workspace, ws.backendConfig["secret_suffix"])
	secret, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	data := secret.Data[tfstate.DataKey]
	encrypts := mayEncrypt(ws)
	var done string
	switch {
	case len(data) == 0 && !encrypts:
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[tfstate.DataKey] = tfstate.Empty(statelock.NewID())
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations["encoding"] = "gzip"
		done = "Landform wrote the empty state of the new workspace."
	case encrypts && tfstate.IsSeed(data, secret.Annotations[tfstate.SeedAnnotation]):
		delete(secret.Data, tfstate.DataKey)
		delete(secret.Annotations, tfstate.SeedAnnotation)
		done = "Landform removed the empty state it made for the new workspace: the module may encrypt its state, and the engine makes it."
	default:
		return
	}
	// The update is conditional on the Secret as read: a state written
	// meanwhile wins, and the engine reads it.
	if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: "landform-runner"}); err == nil {
		logf(done)
	}
}

// mayEncrypt reports whether the engine may encrypt this workspace's
// state: TF_ENCRYPTION in its environment, or the word encryption in any
// configuration file of the root module, where OpenTofu's encryption
// block must be. A false alarm only costs the writes saved.
func mayEncrypt(ws *workspace) bool {
	if ws.env["TF_ENCRYPTION"] != "" {
		return true
	}
	entries, err := os.ReadDir(ws.moduleDir)
	if err != nil {
		return true
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !(strings.HasSuffix(n, ".tf") || strings.HasSuffix(n, ".tofu") || strings.HasSuffix(n, ".tf.json") || strings.HasSuffix(n, ".tofu.json")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(ws.moduleDir, n))
		if err != nil || strings.Contains(string(data), "encryption") {
			return true
		}
	}
	return false
}
