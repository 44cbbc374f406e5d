package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/runner"
)

// StateKubeconfigFile is the kubeconfig, in the module dir, through which
// terraform's kubernetes backend reaches the state when the controller
// hands the runner a state token. The backend configuration names it by
// this relative path, which a saved plan keeps: the runner that applies
// the plan writes its own file there.
const StateKubeconfigFile = ".landform-state.kubeconfig"

// stateAccess is the runner's loopback door to the API server for the
// kubernetes backend. Terraform's requests go through it carrying the
// current run's state token, an identity that may read and write only the
// object's state Secret and Lease (RBAC resourceNames). Terraform lists
// state Secrets by label to find its workspaces, which such an identity
// may not do; the proxy narrows those lists to the state Secret by name,
// which it may. Terraform never holds the token.
type stateAccess struct {
	url      string
	upstream *rest.Config // no credentials: the token is added per request

	token  atomic.Pointer[string]
	secret atomic.Pointer[string] // the state Secret's name
}

// use has the proxy carry token and narrow lists to the state Secret
// secret; empty, it carries no credential (Recycle).
func (sa *stateAccess) use(token, secret string) {
	sa.token.Store(&token)
	sa.secret.Store(&secret)
}

var errNoUpstream = errors.New("the backend configuration names neither config_path nor in_cluster_config")

// useStateToken points ws's kubernetes backend at the state proxy with
// token, starting the proxy on first use. Without a token, or with a custom
// backend, the backend configuration is used as given.
func (s *Server) useStateToken(ws *workspace, token string) error {
	if ws.customBackend != "" || token == "" {
		return nil
	}
	if s.state == nil {
		base, err := restConfigFor(ws.backendConfig)
		if err != nil {
			return newError(codes.InvalidArgument, runner.ReasonInvalidConfiguration, "reaching the API server for the state: "+err.Error(), nil)
		}
		sa, err := startStateAccess(base, s.log.Error)
		if err != nil {
			return internalError("start the state proxy", err)
		}
		s.state = sa
	}
	s.state.use(token, statelock.StateSecretName(ws.workspace, ws.backendConfig["secret_suffix"]))
	if err := s.state.writeKubeconfig(filepath.Join(ws.moduleDir, StateKubeconfigFile), ws.backendConfig["namespace"]); err != nil {
		return internalError("write the state kubeconfig", err)
	}
	if ws.stateBackend == nil {
		ws.initialised = false
	}
	// Init reads the selected workspace's state: select ours before it,
	// the state identity may read no other. The controller created its
	// state Secret, so terraform finds the workspace.
	if err := selectWorkspaceFile(ws); err != nil {
		return internalError("select the workspace", err)
	}
	ws.stateBackend = map[string]string{
		"config_path":   StateKubeconfigFile,
		"namespace":     ws.backendConfig["namespace"],
		"secret_suffix": ws.backendConfig["secret_suffix"],
	}
	return nil
}

// terraformBackend is the backend configuration terraform is given.
func (ws *workspace) terraformBackend() map[string]string {
	if ws.stateBackend != nil {
		return ws.stateBackend
	}
	return ws.backendConfig
}

// stateConfig is how the runner itself reaches the state Lease: with the
// state token when there is one, else as the backend configuration says.
func (s *Server) stateConfig(ws *workspace) (*rest.Config, error) {
	if ws.stateBackend == nil || s.state == nil {
		return restConfigFor(ws.backendConfig)
	}
	c := rest.CopyConfig(s.state.upstream)
	c.BearerToken = *s.state.token.Load()
	return c, nil
}

// restConfigFor reaches the API server the way the kubernetes backend
// would with cfg: its kubeconfig, or the Pod's in-cluster identity.
func restConfigFor(cfg map[string]string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	switch {
	case cfg["config_path"] != "":
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg["config_path"]},
			&clientcmd.ConfigOverrides{CurrentContext: cfg["config_context"]},
		).ClientConfig()
	case cfg["in_cluster_config"] == "true":
		rc, err = rest.InClusterConfig()
	default:
		return nil, errNoUpstream
	}
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "landform-runner"
	return rc, nil
}

// startStateAccess serves the proxy on a loopback port for the runner's
// life.
func startStateAccess(base *rest.Config, logError func(string, ...any)) (*stateAccess, error) {
	upstream := rest.AnonymousClientConfig(base)
	target, err := url.Parse(upstream.Host)
	if err != nil || target.Host == "" {
		target, err = url.Parse("https://" + upstream.Host)
		if err != nil {
			return nil, fmt.Errorf("API server address %q: %w", upstream.Host, err)
		}
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sa := &stateAccess{url: "http://" + l.Addr().String(), upstream: upstream}
	proxy := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set("Authorization", "Bearer "+*sa.token.Load())
			r.Out.URL.RawQuery = sa.narrow(r.In.Method, r.Out.URL.Path, r.Out.URL.Query()).Encode()
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			logError("state proxy: reaching the API server", "error", err.Error())
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	go func() { _ = http.Serve(l, proxy) }()
	return sa, nil
}

// narrow turns a list of the namespace's Secrets into a list of the state
// Secret alone: the state identity may list only that name.
func (sa *stateAccess) narrow(method, path string, q url.Values) url.Values {
	if method == http.MethodGet && strings.HasSuffix(path, "/secrets") && q.Get("fieldSelector") == "" {
		q.Set("fieldSelector", "metadata.name="+*sa.secret.Load())
	}
	return q
}

// writeKubeconfig writes the kubeconfig that sends terraform to the proxy.
func (sa *stateAccess) writeKubeconfig(path, namespace string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["state"] = &clientcmdapi.Cluster{Server: sa.url}
	cfg.AuthInfos["state"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["state"] = &clientcmdapi.Context{Cluster: "state", AuthInfo: "state", Namespace: namespace}
	cfg.CurrentContext = "state"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := writePrivate(path, b); err != nil {
		return err
	}
	return nil
}

// selectWorkspaceFile records ws's terraform workspace as the selected one,
// where terraform keeps it (.terraform/environment).
func selectWorkspaceFile(ws *workspace) error {
	name := ws.workspace
	if name == "" {
		name = "default"
	}
	dir := filepath.Join(ws.moduleDir, ".terraform")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "environment"), []byte(name), 0o600)
}
