package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Resource names as `kubectl auth can-i` takes them.
const (
	resTerraforms  = "terraforms.infra.landform.dev"
	resSecrets     = "secrets"
	resLeases      = "leases.coordination.k8s.io"
	resPods        = "pods"
	resEvents      = "events"
	resDeployments = "deployments.apps"
)

var scheme = func() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// session is one command's connection to the cluster.
type session struct {
	c   client.WithWatch
	cfg *rest.Config
	// ns is the namespace from -n or the kubeconfig context.
	ns string
}

// connect resolves the kubeconfig flags into a client. Nothing is sent to
// the API server yet.
func (a *app) connect() (*session, error) {
	cfg, err := a.flags.ToRESTConfig()
	if err != nil {
		return nil, configError(err)
	}
	ns, _, err := a.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, configError(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	return &session{c: c, cfg: cfg, ns: ns}, nil
}

func configError(err error) error {
	if clientcmd.IsEmptyConfig(err) {
		return errors.New("no Kubernetes configuration found: set KUBECONFIG or pass --kubeconfig")
	}
	return fmt.Errorf("reading the kubeconfig: %v (check KUBECONFIG, --kubeconfig and --context)", err)
}

// errNotInstalled is returned when the Terraform CRD is missing.
var errNotInstalled = errors.New("Landform is not installed in this cluster (the CRD " + resTerraforms +
	" is missing): install it as the README's \"Install\" section says, or check --context")

// explain turns an API error into one line that says what to do. verb and
// resource are what was attempted, as `kubectl auth can-i` takes them; kind
// names the object in "not found" messages.
func (s *session) explain(err error, verb, resource, kind, ns, name string) error {
	if err == nil {
		return nil
	}
	where := "in namespace " + ns
	canI := "-n " + ns
	if ns == "" {
		where, canI = "in any namespace", "-A"
	}
	var urlErr *url.Error
	var netErr *net.OpError
	switch {
	case apimeta.IsNoMatchError(err):
		return errNotInstalled
	case apierrors.IsNotFound(err) && name != "":
		return fmt.Errorf("%s %s/%s not found", kind, ns, name)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("no permission to %s %s %s (check with: kubectl auth can-i %s %s %s)", verb, resource, where, verb, resource, canI)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s rejected your credentials: log in again, or check --kubeconfig and --context", s.cfg.Host)
	case errors.As(err, &netErr):
		return fmt.Errorf("cannot reach the API server at %s: %v (check --kubeconfig and --context)", s.cfg.Host, netErr)
	case errors.As(err, &urlErr):
		return fmt.Errorf("cannot reach the API server at %s: %v (check --kubeconfig and --context)", s.cfg.Host, urlErr.Err)
	}
	return fmt.Errorf("%s %s %s: %v", verb, resource, where, err)
}

// object connects and reads the Terraform object name: what most commands
// do first.
func (a *app) object(ctx context.Context, name string) (*session, *v1alpha1.Terraform, error) {
	s, err := a.connect()
	if err != nil {
		return nil, nil, err
	}
	obj, err := s.terraform(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	return s, obj, nil
}

// terraform reads the Terraform object name in the session's namespace.
func (s *session) terraform(ctx context.Context, name string) (*v1alpha1.Terraform, error) {
	obj := &v1alpha1.Terraform{}
	err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, obj)
	return obj, s.explain(err, "get", resTerraforms, "Terraform", s.ns, name)
}

// mergePatch sends patch (a JSON merge patch) to obj: only the fields it
// names change, so nothing else the controller or a user wrote is touched.
func (s *session) mergePatch(ctx context.Context, obj *v1alpha1.Terraform, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	err = s.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data), client.FieldOwner("landform-cli"))
	return s.explain(err, "patch", resTerraforms, "Terraform", obj.Namespace, obj.Name)
}

// annotate sets one annotation with a merge patch.
func (s *session) annotate(ctx context.Context, obj *v1alpha1.Terraform, key, value string) error {
	return s.mergePatch(ctx, obj, map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
}
