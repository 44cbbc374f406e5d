package cluster

import (
	"bufio"
	"context"
	"fmt"

	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/internal/devenv/gitserver"
	"github.com/landform-dev/landform/internal/gitops"
	"github.com/landform-dev/landform/internal/testenv"
)

// What e2e/cluster/platform.sh started, as e2e/cluster/e2e.sh passes it.
const (
	envGitURL   = "LANDFORM_CLUSTER_GIT_URL"   // the git server, on the node's address
	envCloudURL = "LANDFORM_CLUSTER_CLOUD_URL" // the stand-in cloud, on the node's address
	envGitRoot  = "LANDFORM_CLUSTER_GIT_ROOT"  // the git server's repositories, to seed them
)

// appImage is e2e/cluster/app, built and imported by `make images`.
const appImage = "localhost/landform-e2e-app:e2e"

// platform is the git server, the cloud and Flux's controllers.
type platform struct {
	gitURL, gitRoot string
	cloud           *cloud.Client
}

func newPlatform() (*platform, error) {
	p := &platform{gitURL: os.Getenv(envGitURL), gitRoot: os.Getenv(envGitRoot)}
	if p.gitURL == "" || p.gitRoot == "" || os.Getenv(envCloudURL) == "" {
		return nil, fmt.Errorf("%s, %s and %s are not set: run the suite with `make e2e-cluster`, which starts the platform (e2e/cluster/platform.sh)", envGitURL, envGitRoot, envCloudURL)
	}
	p.cloud = &cloud.Client{URL: os.Getenv(envCloudURL)}
	return p, nil
}

// repoRoot is this checkout, whose modules the scenarios push.
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

// seedRepository creates the git repository name (replacing one an earlier
// run left) holding files and the checkout's modules/, and returns its URL.
func (p *platform) seedRepository(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for path, content := range files {
		testenv.WriteFile(t, filepath.Join(dir, path), content)
	}
	modules := filepath.Join(repoRoot(), "modules")
	err := filepath.WalkDir(modules, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(repoRoot(), path)
		if strings.Contains(rel, ".terraform") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		testenv.WriteFile(t, filepath.Join(dir, rel), string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(p.gitRoot, name+".git")); err != nil {
		t.Fatal(err)
	}
	if err := gitserver.Seed(p.gitRoot, name, dir); err != nil {
		t.Fatalf("seeding %s: %v", name, err)
	}
	return p.gitURL + "/" + name + ".git"
}

// fluxGitRepository creates a GitRepository that the real source-controller
// clones, and waits until it has an artifact.
func (e *env) fluxGitRepository(t *testing.T, ns, name, url string) *sourcev1.GitRepository {
	t.Helper()
	ctx := context.Background()
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sourcev1.GitRepositorySpec{
			URL:       url,
			Interval:  metav1.Duration{Duration: 10 * time.Second},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
		},
	}
	e.deleteAndWait(t, repo)
	if err := e.client.Create(ctx, repo); err != nil {
		t.Fatalf("creating GitRepository %s: %v", name, err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, repo) })
	if err := e.poll(ctx, "GitRepository "+name+" to have an artifact (source-controller)", func() (bool, string, error) {
		if err := e.client.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
			return false, "", err
		}
		c := apimeta.FindStatusCondition(repo.Status.Conditions, meta.ReadyCondition)
		return repo.Status.Artifact != nil && c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", c), nil
	}); err != nil {
		t.Fatal(err)
	}
	return repo
}

// appPod returns the one Pod labelled app=name, once there is one.
func (e *env) appPod(t *testing.T, name, what string, check func(*corev1.Pod) (bool, string)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	if err := e.poll(ctx, "the app Pod "+name+": "+what, func() (bool, string, error) {
		var pods corev1.PodList
		if err := e.client.List(ctx, &pods, client.InNamespace(e.ns), client.MatchingLabels{"app": name}); err != nil {
			return false, "", err
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d Pods", len(pods.Items)), nil
		}
		pod = &pods.Items[0]
		ok, desc := check(pod)
		return ok, desc, nil
	}); err != nil {
		t.Fatal(err)
	}
	return pod
}

func podState(pod *corev1.Pod) string {
	return fmt.Sprintf("phase %s, waiting %q, ready %v", pod.Status.Phase, gitops.WaitingReason(pod), gitops.PodReady(pod))
}

// podLog returns the log of the Pod's container (the controller-runtime
// client has no log subresource).
func (e *env) podLog(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	out, err := e.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("the log of %s: %v", pod.Name, err)
	}
	return string(out)
}

// logLine returns the first line of log starting with prefix.
func logLine(log, prefix string) string {
	s := bufio.NewScanner(strings.NewReader(log))
	for s.Scan() {
		if strings.HasPrefix(s.Text(), prefix) {
			return s.Text()
		}
	}
	return ""
}

// cloudCounts counts the cloud's databases and security groups.
func (p *platform) cloudCounts(t *testing.T) (databases, securityGroups int) {
	t.Helper()
	ctx := context.Background()
	dbs, err := p.cloud.ListDatabases(ctx)
	if err != nil {
		t.Fatalf("listing the cloud's databases: %v", err)
	}
	sgs, err := p.cloud.ListSecurityGroups(ctx)
	if err != nil {
		t.Fatalf("listing the cloud's security groups: %v", err)
	}
	return len(dbs), len(sgs)
}
