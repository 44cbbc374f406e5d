package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/placement"
)

// newPlacer builds the runner placement c asks for.
func newPlacer(ctx context.Context, c Config, cfg *rest.Config, scheme *runtime.Scheme, log logr.Logger) (placement.Placer, error) {
	switch c.Runner {
	case RunnerPod:
		// Not the manager's client: a cache would watch every Pod and
		// ServiceAccount in the cluster; runner Pods are read one by one,
		// and a starting one watched by name.
		kc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		cm, err := certs.New(ctx, kc, certs.Options{Namespace: c.Pod.Namespace})
		if err != nil {
			return nil, fmt.Errorf("loading the runner CA: %w", err)
		}
		p := &placement.Pod{
			Client:          kc,
			Certs:           cm,
			Image:           c.Pod.Image,
			KeepPods:        c.Pod.KeepPods,
			StartTimeout:    c.Pod.StartTimeout,
			ProviderMirrors: c.ProviderMirrors,
			Policy:          c.Pod.Policy,
		}
		p.ReuseFor(c.Pod.Reuse)
		return p, nil
	case RunnerLocal:
		if err := os.MkdirAll(c.WorkDir, 0o700); err != nil {
			return nil, err
		}
		ca, err := localCA(c)
		if err != nil {
			return nil, err
		}
		kubeconfig := filepath.Join(c.WorkDir, "runner-kubeconfig")
		if err := placement.WriteKubeconfig(cfg, kubeconfig); err != nil {
			return nil, fmt.Errorf("writing the runners' kubeconfig: %w", err)
		}
		opts := c.Local
		if opts.WorkDir == "" {
			opts.WorkDir = filepath.Join(c.WorkDir, "runners")
		}
		if opts.ProviderMirrors == nil {
			opts.ProviderMirrors = c.ProviderMirrors
		}
		if opts.EngineDir == "" {
			// spec.engine's versions, installed once for all local runners.
			opts.EngineDir = filepath.Join(c.WorkDir, "engines")
		}
		local := &placement.Local{CA: ca, Kubeconfig: kubeconfig, Options: opts}
		// Runners of an earlier controller process ended with it.
		kept, err := local.RemoveStale()
		if err != nil {
			log.Error(err, "removing the directories of earlier local runners")
		}
		for _, k := range kept {
			// The controller could not keep its own copy before it
			// stopped: `landform state push --file` writes it.
			log.Info("an earlier local runner left a state its engine could not save; see docs/troubleshooting.md", "file", k)
		}
		return local, nil
	}
	return nil, fmt.Errorf("--runner=%s is not supported: use --runner=%s or --runner=%s", c.Runner, RunnerPod, RunnerLocal)
}

// nonZero is d, or nil (the manager's default) when zero.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

// localCA is the CA of local runners. Runners that end with this process
// need one only it holds; detached runners outlive it, so their CA is kept
// in the work dir (readable by its owner only), for the next controller
// process to dial them.
func localCA(c Config) (*mtls.CA, error) {
	if !c.Local.Detach {
		ca, err := mtls.NewCA("landform-local-runners", 365*24*time.Hour)
		if err != nil {
			return nil, fmt.Errorf("creating the runner CA: %w", err)
		}
		return ca, nil
	}
	dir := filepath.Join(c.WorkDir, "runner-ca")
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	if certErr == nil && keyErr == nil {
		ca, err := mtls.LoadCA(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("loading the local runners' CA from %s: %w (remove it to start afresh: running local runners are then stopped by their idle exit)", dir, err)
		}
		return ca, nil
	}
	ca, err := mtls.NewCA("landform-local-runners", 365*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("creating the runner CA: %w", err)
	}
	keyPEM, err = ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for path, data := range map[string][]byte{certPath: ca.CertPEM(), keyPath: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("keeping the local runners' CA: %w", err)
		}
	}
	return ca, nil
}

// orNone is addr, or "0" (no listener) when empty.
func orNone(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}
