package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
)

// seedState writes an empty state into a new workspace's state Secret
// before init. The controller creates that Secret empty when it claims
// the state; the kubernetes backend, finding no state, would lock the
// Lease, write an empty state and unlock: three writes where this is one
// (make bench's write table). A Secret that holds anything is left to the
// engine, and so is a module that may encrypt its state (OpenTofu's
// encryption block, or TF_ENCRYPTION): a plain state would be refused by
// an enforced encryption. Best effort: if the write fails the engine
// creates the state as it always did.
func (s *Server) seedState(ctx context.Context, ws *workspace, logf func(string)) {
	if ws.customBackend != "" || mayEncrypt(ws) {
		return
	}
	c, ns, err := s.stateClient(ws)
	if err != nil {
		return
	}
	secrets := c.CoreV1().Secrets(ns)
	name := statelock.StateSecretName(ws.workspace, ws.backendConfig["secret_suffix"])
	secret, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(secret.Data[tfstate.DataKey]) > 0 {
		return
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[tfstate.DataKey] = tfstate.Compress(emptyState())
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations["encoding"] = "gzip"
	// The update is conditional on the Secret as read: a state written
	// meanwhile wins, and the engine reads it.
	if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: "landform-runner"}); err == nil {
		logf("Landform wrote the empty state of the new workspace.")
	}
}

// emptyState is a state of a new lineage holding nothing, as the engine
// writes for a new workspace.
func emptyState() []byte {
	return []byte(fmt.Sprintf(`{"version":4,"serial":0,"lineage":%q,"outputs":{},"resources":[],"check_results":null}`, statelock.NewID()))
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
