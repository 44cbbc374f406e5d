package demo

import (
	"context"
	"errors"
	"fmt"
	"io"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/devenv"
)

// clusterFlags point the walkthrough at a running cluster.
type clusterFlags struct {
	kubeconfig, gitURL, cloudURL, appImage string
}

// runOnCluster walks through on a cluster where Landform, Flux's
// controllers, a git server and the stand-in cloud already run
// (e2e/cluster/demo.sh sets them up and tears them down).
func runOnCluster(ctx context.Context, out io.Writer, f clusterFlags) error {
	if f.gitURL == "" || f.cloudURL == "" {
		return errors.New("--cluster-kubeconfig needs --git-url and --cloud-url (make demo-cluster passes them)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("--cluster-kubeconfig %s: %w", f.kubeconfig, err)
	}
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, infrav1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	env := &devenv.Env{Kubeconfig: f.kubeconfig, GitURL: f.gitURL, CloudURL: f.cloudURL, Config: cfg, Client: c}
	fmt.Fprintf(out, "==> walking through on the cluster of %s\n", f.kubeconfig)
	return Run(ctx, Options{Env: env, Out: out, Node: &Node{AppImage: f.appImage}})
}
