package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// repoRoot is found from this file's location, so the test works from any
// directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// toolsDir is LANDFORM_TOOLS_DIR or the checkout's bin/, as `landform dev`
// finds it.
func toolsDir() string {
	if d := os.Getenv(ToolsDirEnv); d != "" {
		return d
	}
	return filepath.Join(repoRoot(), "bin")
}

// TestDevEnvironment starts the whole environment from the real binaries
// in bin/ (a missing one fails the test and says to run `make tools`),
// sees its garbage collector collect, drives the real source-controller
// and the in-process Landform controller with it, refuses a second
// instance on the same state directory, and checks that a restart keeps
// the objects and the URLs.
func TestDevEnvironment(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	state := t.TempDir()
	opts := Options{StateDir: state, RepoDir: repoRoot(), ToolsDir: toolsDir(), Progress: &lineLogger{t: t}}

	env, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the environment: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = env.Stop()
		}
	}()

	// The API server answers through the written kubeconfig, and every CRD
	// is established.
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	crds, err := apiextensionsclient.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{
		"terraforms.infra.landform.dev",
		"gitrepositories.source.toolkit.fluxcd.io",
		"kustomizations.kustomize.toolkit.fluxcd.io",
		"alerts.notification.toolkit.fluxcd.io",
	} {
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "CRD %s", name)
		g.Expect(established(crd)).To(BeTrue(), "CRD %s is not established: %+v", name, crd.Status.Conditions)
	}
	g.Expect(env.Samples).To(BeAnExistingFile())
	samples, err := os.ReadFile(env.Samples)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(samples)).To(ContainSubstring("url: " + env.GitURL))

	// The garbage collector runs: a ConfigMap goes when its owner goes.
	c := env.Client
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gc-owner"}}
	g.Expect(c.Create(ctx, owner)).To(Succeed())
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gc-dependent", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
	}}}}
	g.Expect(c.Create(ctx, dependent)).To(Succeed())
	g.Expect(c.Delete(ctx, owner)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{}))
	}, time.Minute, 250*time.Millisecond).Should(BeTrue(),
		"collected by kube-controller-manager (see %s)", filepath.Join(env.StateDir, "logs", "kube-controller-manager.log"))

	// source-controller clones the dev git server and serves the artifact.
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "landform"},
		Spec: sourcev1.GitRepositorySpec{
			URL:       env.GitURL,
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
			Interval:  metav1.Duration{Duration: time.Minute},
		},
	}
	g.Expect(c.Create(ctx, repo)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(repo), repo)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(repo.Status.Conditions, meta.ReadyCondition)).To(BeTrue(), "%+v", repo.Status.Conditions)
		g.Expect(repo.Status.Artifact).NotTo(BeNil())
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	g.Expect(repo.Status.Artifact.URL).To(HavePrefix("http://127.0.0.1:"))

	// alerts.yaml's Provider and Alert (on kind Terraform, which the
	// environment's Alert CRD accepts) deliver to logs/alerts.log.
	alerts, err := os.ReadFile(env.Alerts)
	g.Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(alerts), "\n---\n") {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		g.Expect(c.Create(ctx, u)).To(Succeed(), "%s from %s", u.GetKind(), env.Alerts)
	}

	// The in-process controller applies modules/file from that artifact
	// with a local runner, the engine and provider from the mirror.
	target := filepath.Join(t.TempDir(), "hello.txt")
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"},
		Spec: infrav1.TerraformSpec{
			SourceRef:   infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: repo.Name},
			Path:        "./modules/file",
			ApprovePlan: "auto",
			Vars: []infrav1.Variable{
				variable(t, "path", target),
				variable(t, "content", "hello from landform dev"),
			},
			WriteOutputsToSecret: &infrav1.WriteOutputsToSecretSpec{Name: "hello-outputs"},
		},
	}
	g.Expect(c.Create(ctx, tf)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tf), tf)).To(Succeed())
		ready := apimeta.FindStatusCondition(tf.Status.Conditions, meta.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
		g.Expect(ready.ObservedGeneration).To(Equal(tf.Generation))
		// Conditions are written a moment before the other status fields.
		g.Expect(tf.Status.LastAppliedRevision).NotTo(BeEmpty())
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Expect(os.ReadFile(target)).To(Equal([]byte("hello from landform dev")))
	var outputs corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "hello-outputs"}, &outputs)).To(Succeed())
	g.Expect(string(outputs.Data["path"])).To(Equal(target))

	// The web view `landform dev` serves shows the applied object.
	g.Expect(env.serveUI(ctx, "127.0.0.1:0")).To(Succeed())
	jar, err := cookiejar.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(env.UIURL)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	page, err := browser.Get(strings.SplitN(env.UIURL, "?", 2)[0] + "t/default/hello")
	g.Expect(err).NotTo(HaveOccurred())
	body, err := io.ReadAll(page.Body)
	page.Body.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.StatusCode).To(Equal(http.StatusOK), "%s", body)
	g.Expect(string(body)).To(ContainSubstring(`class="badge ready-true"`))
	g.Expect(string(body)).To(ContainSubstring("hello-outputs"))
	g.Eventually(func(g Gomega) {
		b, err := os.ReadFile(filepath.Join(state, "logs", "alerts.log"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(ContainSubstring(`"reason":"Applied"`))
		g.Expect(string(b)).To(ContainSubstring(`"name":"hello"`))
	}, time.Minute, 500*time.Millisecond).Should(Succeed(), "notification-controller delivered the apply to the alert receiver")

	// A second environment on the same state directory is refused, and
	// says by whom.
	_, err = Start(ctx, opts)
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("another landform dev (pid %d) is using %s", os.Getpid(), state))))

	// A restart keeps the objects, the ports and therefore every URL.
	first := struct{ APIServerURL, GitURL, CloudURL string }{env.APIServerURL, env.GitURL, env.CloudURL}
	g.Expect(env.Stop()).To(Succeed())
	stopped = true
	g.Expect(portFree(port(t, first.APIServerURL))).To(Succeed(), "the API server still listens after Stop")

	env, err = Start(ctx, opts)
	if err != nil {
		t.Fatalf("restarting the environment: %v", err)
	}
	stopped = false
	g.Expect(env.APIServerURL).To(Equal(first.APIServerURL))
	g.Expect(env.GitURL).To(Equal(first.GitURL))
	g.Expect(env.CloudURL).To(Equal(first.CloudURL))
	c = env.Client
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(repo), &sourcev1.GitRepository{})).To(Succeed())
	var again infrav1.Terraform
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tf), &again)).To(Succeed())
	g.Expect(again.Status.LastAppliedRevision).To(Equal(tf.Status.LastAppliedRevision))
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "hello-outputs"}, &corev1.Secret{})).To(Succeed())

	g.Expect(env.Stop()).To(Succeed())
	stopped = true
}

// TestStartRefusesWhatItCannotRun: missing tools and a port in use stop
// the start before anything runs, with a one-line message that says what
// to do.
func TestStartRefusesWhatItCannotRun(t *testing.T) {
	ctx := context.Background()
	_, err := Start(ctx, Options{StateDir: t.TempDir(), RepoDir: repoRoot(), ToolsDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "run `make tools`") || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Errorf("Start with an empty tools dir: %v; want it to name kube-apiserver and say to run `make tools`", err)
	}
	if err != nil && strings.Contains(err.Error(), "\n") {
		t.Errorf("the message spans lines: %q", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	state := t.TempDir()
	_, err = Start(ctx, Options{StateDir: state, RepoDir: repoRoot(), ToolsDir: toolsDir(), GitPort: busy})
	if want := fmt.Sprintf("port %d for the git server (asked for) is in use: stop what uses it, or choose another with --git-port", busy); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Start with a busy git port: %v; want %q", err, want)
	}
	// The failed start released the state directory.
	lock, err := acquireLock(filepath.Join(state, "lock"))
	if err != nil {
		t.Fatalf("the state dir is still locked after a failed start: %v", err)
	}
	_ = lock.release()
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func variable(t *testing.T, name string, value any) infrav1.Variable {
	t.Helper()
	raw, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	return infrav1.Variable{Name: name, Value: &apiextensionsv1.JSON{Raw: raw}}
}

func port(t *testing.T, rawURL string) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lineLogger logs the progress lines, whole.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}
