package placement

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/runner"
)

// Local runs each runner as a child process on loopback, with the same
// protocol and mTLS as a Pod. Used by `--runner=local`, `landform dev` and tests.
type Local struct {
	CA      *mtls.CA
	Options runner.LocalOptions
	// Kubeconfig is the file the runner's kubernetes backend reads.
	Kubeconfig string
	// Grace is how long a stopping runner may take to interrupt terraform.
	Grace time.Duration
}

// Start implements Placer.
func (l *Local) Start(ctx context.Context, obj *infrav1.Terraform, runID string) (*Run, error) {
	started := time.Now()
	lr, err := runner.StartLocalRunner(ctx, l.CA, l.Options)
	if err != nil {
		return nil, fmt.Errorf("starting local runner: %w", err)
	}
	metrics.ObserveRunnerStart("local", time.Since(started))
	grace := l.Grace
	if grace == 0 {
		grace = 30 * time.Second
	}
	return &Run{
		Client:   lr.Client,
		Backend:  map[string]string{"config_path": l.Kubeconfig},
		Identity: fmt.Sprintf("local runner (pid %d)", lr.PID),
		stop:     lr.Stop,
		grace:    grace,
		alive: func(context.Context) (bool, string) {
			select {
			case <-lr.Exited():
				return false, fmt.Sprintf("local runner process %d exited", lr.PID)
			default:
				return true, ""
			}
		},
	}, nil
}

// Attach implements Placer: local runners are children of the controller
// process and end with it, so a run this process is not following (one an
// earlier process recorded, or one whose end could not be recorded) has no
// runner any more.
func (l *Local) Attach(_ context.Context, _ *infrav1.Terraform, runID string) (*Run, error) {
	return nil, fmt.Errorf("%w: local runners end with the controller process that started them, and run %s is not running in this one "+
		"(an earlier process started it, or it ended and its result could not be recorded)", ErrRunnerGone, runID)
}

// Durable implements Placer: local runners end with the controller, which
// drains them before it exits.
func (l *Local) Durable() bool { return false }

// RemoveStale removes the directories of local runners that earlier
// controller processes left behind: none can still run, since runners end
// with the process that started them. Call it before the first Start.
func (l *Local) RemoveStale() error {
	if l.Options.WorkDir == "" {
		// Runners live in the system temp dir, beside everything else.
		return nil
	}
	dirs, err := filepath.Glob(filepath.Join(l.Options.WorkDir, "landform-runner-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// WriteKubeconfig writes cfg as a kubeconfig file readable only by its owner,
// so that local runners reach the same API server as the controller.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	cluster := &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	user := &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["landform"] = cluster
	kc.AuthInfos["landform"] = user
	kc.Contexts["landform"] = &clientcmdapi.Context{Cluster: "landform", AuthInfo: "landform"}
	kc.CurrentContext = "landform"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}
