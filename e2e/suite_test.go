package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/testenv"
)

// What the scenarios need from the cluster, and where to find it.
const (
	// envKubeconfig names the cluster; without it every scenario skips.
	envKubeconfig = "LANDFORM_E2E_KUBECONFIG"
	// envNamespace is a runner namespace of the installation (the chart's
	// runner.namespaces). Default "e2e".
	envNamespace = "LANDFORM_E2E_NAMESPACE"
	// envControllerNamespace is where the controller runs. Default
	// "landform-system".
	envControllerNamespace = "LANDFORM_E2E_CONTROLLER_NAMESPACE"
	// envGitURL is a git URL, reachable from source-controller, of a
	// repository holding this repository's modules/ on branch main. When
	// unset, the suite runs the git server image (envGitServerImage) in
	// the runner namespace and uses it.
	envGitURL = "LANDFORM_E2E_GIT_URL"
	// envGitServerImage is the Dockerfile's e2e-gitserver target. Default
	// "landform-e2e-gitserver:e2e".
	envGitServerImage = "LANDFORM_E2E_GITSERVER_IMAGE"
	// envTimeout bounds each wait (a Go duration). Default 5m: a runner
	// Pod's first start may pull its image.
	envTimeout = "LANDFORM_E2E_TIMEOUT"
)

const (
	gitRepositoryName = "landform-e2e"
	gitServerName     = "landform-e2e-git"
	runnerSA          = "landform-runner"
)

// cluster is the shared state of the scenarios.
type cluster struct {
	client       client.Client
	ns           string // the runner namespace
	controllerNS string
	timeout      time.Duration
}

// suite finds the cluster, after checking once that Landform is installed
// and preparing the GitRepository every scenario uses.
var suite = testenv.InstallationSuite[*cluster]{
	Name:                   "e2e",
	KubeconfigEnv:          envKubeconfig,
	Hint:                   "the e2e scenarios need a cluster with Landform and source-controller installed (see e2e/README.md; `make e2e-kind` prepares one)",
	NamespaceEnv:           envNamespace,
	DefaultNamespace:       "e2e",
	ControllerNamespaceEnv: envControllerNamespace,
	TimeoutEnv:             envTimeout,
	Interval:               2 * time.Second,
	Setup:                  setup,
}

// connect returns the cluster; it skips the test when no cluster is given.
func connect(t *testing.T) *cluster { return suite.Connect(t) }

func setup(ctx context.Context, inst *testenv.Installation) (*cluster, error) {
	cl := &cluster{client: inst.Client, ns: inst.Namespace, controllerNS: inst.ControllerNamespace, timeout: inst.Timeout}
	url := os.Getenv(envGitURL)
	if url == "" {
		var err error
		if url, err = cl.startGitServer(ctx); err != nil {
			return nil, err
		}
	}
	return cl, cl.ensureGitRepository(ctx, url)
}

// startGitServer runs the e2e git server in the runner namespace and
// returns its URL. The URL uses the Service's cluster IP, so that it works
// without cluster DNS too.
func (cl *cluster) startGitServer(ctx context.Context) (string, error) {
	labels := map[string]string{"app.kubernetes.io/name": gitServerName}
	uid := int64(65532)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: gitServerName, Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "git",
				Image:           testenv.EnvOr(envGitServerImage, "landform-e2e-gitserver:e2e"),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: gitServerName},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	for _, o := range []client.Object{pod, svc} {
		if err := cl.client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating the git server %T: %w", o, err)
		}
	}
	if err := cl.poll(ctx, "the git server Pod to be ready", func() (bool, string, error) {
		var p corev1.Pod
		if err := cl.client.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			return false, "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("phase %s %+v", p.Status.Phase, p.Status.ContainerStatuses), nil
	}); err != nil {
		return "", err
	}
	if err := cl.client.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		return "", err
	}
	return "http://" + svc.Spec.ClusterIP + "/landform.git", nil
}

// ensureGitRepository creates the GitRepository the scenarios use and waits
// until the real source-controller has an artifact of it.
func (cl *cluster) ensureGitRepository(ctx context.Context, url string) error {
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: gitRepositoryName},
		Spec: sourcev1.GitRepositorySpec{
			URL:       url,
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
			Interval:  metav1.Duration{Duration: 10 * time.Minute},
		},
	}
	if err := cl.client.Create(ctx, repo); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating GitRepository %s: %w", gitRepositoryName, err)
	}
	return cl.poll(ctx, "GitRepository "+gitRepositoryName+" to have an artifact (is source-controller running?)", func() (bool, string, error) {
		if err := cl.client.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
			return false, "", err
		}
		ready := apimeta.FindStatusCondition(repo.Status.Conditions, meta.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionTrue && repo.Status.Artifact != nil, fmt.Sprintf("%+v", repo.Status.Conditions), nil
	})
}

// poll calls check every two seconds until it returns true, fails or the
// timeout passes (testenv.Poll).
func (cl *cluster) poll(ctx context.Context, what string, check func() (bool, string, error)) error {
	return testenv.Poll(ctx, cl.timeout, 2*time.Second, what, check)
}

// terraform creates a Terraform object on modules/file in the runner
// namespace, and deletes it (waiting for destroy) when the test ends.
func (cl *cluster) terraform(t *testing.T, name string, mutate func(*infrav1.Terraform)) *infrav1.Terraform {
	t.Helper()
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name},
		Spec: infrav1.TerraformSpec{
			SourceRef:     infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: gitRepositoryName},
			Path:          "./modules/file",
			Interval:      metav1.Duration{Duration: 10 * time.Minute},
			RetryInterval: &metav1.Duration{Duration: 10 * time.Second},
			ApprovePlan:   infrav1.ApprovePlanAuto,
		},
	}
	if mutate != nil {
		mutate(tf)
	}
	ctx := context.Background()
	// A leftover of an interrupted run goes first.
	cl.deleteAndWait(t, tf)
	if err := cl.client.Create(ctx, tf); err != nil {
		t.Fatalf("creating Terraform %s: %v", name, err)
	}
	t.Cleanup(func() { cl.deleteAndWait(t, tf) })
	return tf
}

func (cl *cluster) deleteAndWait(t *testing.T, tf *infrav1.Terraform) {
	t.Helper()
	if err := testenv.DeleteAndWait(context.Background(), cl.client, tf, cl.timeout, 2*time.Second); err != nil {
		t.Error(err)
	}
}

// waitForTerraform polls the object until check accepts it.
func (cl *cluster) waitForTerraform(t *testing.T, tf *infrav1.Terraform, what string, check func(*infrav1.Terraform) bool) *infrav1.Terraform {
	t.Helper()
	cur, err := testenv.WaitFor(context.Background(), cl.client, tf, cl.timeout, 2*time.Second, what, check)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// ready returns the Ready condition, if the object's status is current.
func ready(tf *infrav1.Terraform) *metav1.Condition {
	if tf.Status.ObservedGeneration != tf.Generation {
		return nil
	}
	return apimeta.FindStatusCondition(tf.Status.Conditions, meta.ReadyCondition)
}
