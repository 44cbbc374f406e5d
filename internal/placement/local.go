package placement

import (
	"context"
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
func (l *Local) Start(ctx context.Context, obj *infrav1.Terraform) (*Run, error) {
	started := time.Now()
	c, stop, err := runner.StartLocal(ctx, l.CA, l.Options)
	if err != nil {
		return nil, fmt.Errorf("starting local runner: %w", err)
	}
	metrics.ObserveRunnerStart("local", time.Since(started))
	grace := l.Grace
	if grace == 0 {
		grace = 30 * time.Second
	}
	return &Run{
		Client:  c,
		Backend: map[string]string{"config_path": l.Kubeconfig},
		stop:    stop,
		grace:   grace,
	}, nil
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
