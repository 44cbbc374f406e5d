package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/gitops"
)

// The demo's layout: infra/ holds the Terraform object, app/ the
// Deployment whose values Flux substitutes from the outputs Secret.
func kustomizeRepo(ns string) map[string]string {
	return map[string]string{
		"infra/terraform.yaml": fmt.Sprintf(`apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: kapp-infra
  namespace: %[1]s
spec:
  sourceRef:
    kind: GitRepository
    name: kustomize
  path: ./modules/app-infra
  interval: 1h
  # Manual approval: the app waits for its infrastructure.
  approvePlan: ""
  vars:
    - name: name
      value: kapp
    - name: db_size_gb
      value: 20
  writeOutputsToSecret:
    name: kapp-infra-outputs
    outputs: [security_group_id, db_size_gb, dsn]
  runnerPodTemplate:
    spec:
      env:
        - name: LANDFORM_CLOUD_ENDPOINT
          value: "${cloud_endpoint}"
`, ns),
		"app/deployment.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: kapp
  namespace: %[1]s
  annotations:
    landform.dev/db-size: "${db_size_gb}GB"
spec:
  replicas: 1
  selector:
    matchLabels: {app: kapp}
  template:
    metadata:
      labels: {app: kapp}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 2
      containers:
        - name: app
          image: %[2]s
          imagePullPolicy: Never
          env:
            # Substituted by Flux from the outputs Secret.
            - name: SECURITY_GROUP_ID
              value: "${security_group_id}"
            - name: DSN_FILE
              value: /etc/infra/dsn
            - name: CLOUD_ENDPOINT
              value: "${cloud_endpoint}"
          volumeMounts:
            - {name: infra, mountPath: /etc/infra, readOnly: true}
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
      volumes:
        - name: infra
          secret: {secretName: kapp-infra-outputs}
`, ns, appImage),
	}
}

// TestKustomizationPattern is the demo's infra/app Kustomizations on the
// real node with Flux's real kustomize-controller: the app Kustomization
// dependsOn the infra one, whose health check waits for the Terraform
// object; once the plan is approved and applied, Flux substitutes the
// outputs Secret's values into the app (postBuild.substituteFrom) and the
// app's Pod runs with them. Deleting the Kustomizations prunes the app and
// destroys the infrastructure.
func TestKustomizationPattern(t *testing.T) {
	e := connect(t)
	p := e.platform
	ctx := context.Background()
	e.deleteLeftovers(t, "kapp-infra", "tfstate-default-kapp-infra", "kapp-infra-outputs")
	dbs0, sgs0 := p.cloudCounts(t)

	url := p.seedRepository(t, "kustomize", kustomizeRepo(e.ns))
	e.fluxGitRepository(t, e.ns, "kustomize", url)
	substitute := map[string]any{"cloud_endpoint": p.cloud.URL}
	infra := e.kustomization(t, "kapp-infra", map[string]any{
		"path": "./infra",
		"healthChecks": []any{map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.TerraformKind, "name": "kapp-infra", "namespace": e.ns,
		}},
		"postBuild": map[string]any{"substitute": substitute},
	})
	app := e.kustomization(t, "kapp", map[string]any{
		"path":      "./app",
		"dependsOn": []any{map[string]any{"name": "kapp-infra"}},
		"postBuild": map[string]any{
			"substitute":     substitute,
			"substituteFrom": []any{map[string]any{"kind": "Secret", "name": "kapp-infra-outputs"}},
		},
	})

	// While the plan waits, the app waits for its dependency.
	e.waitKustomization(t, app, "waiting for kapp-infra", func(c *metav1.Condition) bool {
		return c != nil && c.Reason == meta.DependencyNotReadyReason
	})
	tf := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "kapp-infra"}}
	cur := e.waitForTerraform(t, tf, "a plan waiting for approval", func(tf *infrav1.Terraform) bool {
		return tf.Status.Plan != nil && tf.Status.Plan.Pending != ""
	})
	e.approve(t, cur)
	e.waitKustomization(t, infra, "Ready (its health check passed)", isTrue)
	e.waitKustomization(t, app, "Ready", isTrue)

	var out corev1.Secret
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "kapp-infra-outputs"}, &out); err != nil {
		t.Fatal(err)
	}
	sg := string(out.Data["security_group_id"])
	var dep appsv1.Deployment
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "kapp"}, &dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Annotations["landform.dev/db-size"]; got != "20GB" {
		t.Errorf("the Deployment's db-size annotation is %q, want 20GB substituted from the outputs", got)
	}
	pod := e.appPod(t, "kapp", "running and ready", func(pod *corev1.Pod) (bool, string) {
		return gitops.PodReady(pod), podState(pod)
	})
	log := e.podLog(t, pod)
	t.Logf("the app Pod %s runs; its log:\n%s", pod.Name, log)
	if !strings.HasPrefix(sg, "sg-") || logLine(log, "security group:") != "security group: "+sg {
		t.Errorf("the app printed %q, want the security group %q substituted from the Secret", logLine(log, "security group:"), sg)
	}
	if got := logLine(log, "database:"); !strings.HasPrefix(got, "database: connected to kapp") {
		t.Errorf("the app's database line is %q, want a connection to kapp", got)
	}
	if dbs, sgs := p.cloudCounts(t); dbs != dbs0+1 || sgs != sgs0+1 {
		t.Errorf("the cloud holds %d databases and %d security groups, want %d and %d", dbs, sgs, dbs0+1, sgs0+1)
	}

	// Deleting the Kustomizations prunes the app and destroys the infra.
	e.deleteAndWait(t, app)
	e.deleteAndWait(t, infra)
	e.waitGone(t, tf)
	if dbs, sgs := p.cloudCounts(t); dbs != dbs0 || sgs != sgs0 {
		t.Errorf("after deletion the cloud holds %d databases and %d security groups, want %d and %d", dbs, sgs, dbs0, sgs0)
	}
}

func isTrue(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionTrue }

// kustomization creates a Kustomization of the GitRepository "kustomize"
// with prune on, plus spec, deleted when the test ends.
func (e *env) kustomization(t *testing.T, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	full := map[string]any{
		"interval":      "1h",
		"retryInterval": "5s",
		"timeout":       e.timeout.String(),
		"prune":         true,
		"sourceRef":     map[string]any{"kind": "GitRepository", "name": "kustomize"},
	}
	for k, v := range spec {
		full[k] = v
	}
	k := gitops.NewKustomization(e.ns, name, full)
	e.deleteAndWait(t, k.DeepCopy())
	if err := e.client.Create(context.Background(), k); err != nil {
		t.Fatalf("creating Kustomization %s: %v", name, err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, k.DeepCopy()) })
	return k
}

// waitKustomization waits until the Kustomization's Ready condition passes
// check.
func (e *env) waitKustomization(t *testing.T, k *unstructured.Unstructured, what string, check func(*metav1.Condition) bool) {
	t.Helper()
	ctx := context.Background()
	cur := gitops.Kustomization(k.GetNamespace(), k.GetName())
	if err := e.poll(ctx, "Kustomization "+k.GetName()+": "+what, func() (bool, string, error) {
		if err := e.client.Get(ctx, client.ObjectKeyFromObject(cur), cur); err != nil {
			return false, "", err
		}
		c := gitops.Condition(cur, meta.ReadyCondition)
		return check(c), gitops.ReadyMessage(cur), nil
	}); err != nil {
		t.Fatal(err)
	}
}
