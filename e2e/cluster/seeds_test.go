package cluster

import (
	"context"
	"fmt"
	neturl "net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/gitops"
)

// The seeds' chart: a Terraform object (the app's database and security
// group in the stand-in cloud, outputs written to a Secret) and the
// Deployment that mounts that Secret and takes the security group id from
// it, installed together as one HelmRelease. Plans wait for approval, so
// the test sees the app wait for its infrastructure.
var seedsChart = map[string]string{
	"charts/app/Chart.yaml": `apiVersion: v2
name: app
version: 0.1.0
description: An application and its database, one lifecycle.
`,
	"charts/app/values.yaml": `# The database's name.
name: app
image: localhost/landform-e2e-app:e2e
# The stand-in cloud's API, for the runner's provider and the app.
cloudEndpoint: ""
# "auto", or "" to approve each plan with landform approve.
approvePlan: ""
`,
	"charts/app/templates/infra.yaml": `apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: {{ .Release.Name }}-infra
spec:
  sourceRef:
    kind: GitRepository
    name: seeds
  path: ./modules/app-infra
  interval: 1h
  approvePlan: {{ .Values.approvePlan | quote }}
  vars:
    - name: name
      value: {{ .Values.name | quote }}
  writeOutputsToSecret:
    name: {{ .Release.Name }}-infra
    outputs: [security_group_id, dsn]
  runnerPodTemplate:
    spec:
      env:
        - name: LANDFORM_CLOUD_ENDPOINT
          value: {{ .Values.cloudEndpoint | quote }}
`,
	"charts/app/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-app
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Release.Name }}-app}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}-app}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 2
      securityContext:
        runAsNonRoot: true
      containers:
        - name: app
          image: {{ .Values.image }}
          imagePullPolicy: Never
          env:
            - name: SECURITY_GROUP_ID
              valueFrom:
                secretKeyRef: {name: {{ .Release.Name }}-infra, key: security_group_id}
            - name: DSN_FILE
              value: /etc/infra/dsn
            - name: CLOUD_ENDPOINT
              value: {{ .Values.cloudEndpoint | quote }}
          volumeMounts:
            - {name: infra, mountPath: /etc/infra, readOnly: true}
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
      volumes:
        # The Pod waits (ContainerCreating) until Landform writes it.
        - name: infra
          secret: {secretName: {{ .Release.Name }}-infra}
`,
}

// TestSeedsHelmRelease is the seeds' pattern end to end: Flux's real
// helm-controller installs the chart above from the git server through
// source-controller; the app's Pod waits in ContainerCreating for the
// outputs Secret; once the plan is approved and applied in a runner Pod,
// the Pod starts, prints the security group id and connects to the
// database with the DSN's credentials (the cloud refuses wrong ones).
// Uninstalling the HelmRelease destroys the database and the security
// group, and the Secret goes.
func TestSeedsHelmRelease(t *testing.T) {
	e := connect(t)
	p := e.platform
	ctx := context.Background()
	const release = "seeds"
	e.deleteLeftovers(t, release+"-infra", "tfstate-default-"+release+"-infra", release+"-infra")
	dbs0, sgs0 := p.cloudCounts(t)

	url := p.seedRepository(t, "seeds", seedsChart)
	e.fluxGitRepository(t, e.ns, "seeds", url)

	hr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2",
		"kind":       "HelmRelease",
		"metadata":   map[string]any{"name": release, "namespace": e.ns},
		"spec": map[string]any{
			"interval": "1h",
			"timeout":  e.timeout.String(),
			"chart": map[string]any{"spec": map[string]any{
				"chart":             "./charts/app",
				"reconcileStrategy": "Revision",
				"sourceRef":         map[string]any{"kind": "GitRepository", "name": "seeds"},
			}},
			"values": map[string]any{"name": "seeds", "cloudEndpoint": p.cloud.URL},
		},
	}}
	e.deleteAndWait(t, hr.DeepCopy())
	if err := e.client.Create(ctx, hr); err != nil {
		t.Fatalf("creating the HelmRelease: %v", err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, hr.DeepCopy()) })

	// The app waits for its infrastructure: ContainerCreating, the kubelet
	// unable to mount the Secret, which does not exist.
	secretName := release + "-infra"
	pod := e.appPod(t, release+"-app", "waiting for the outputs Secret", func(pod *corev1.Pod) (bool, string) {
		if gitops.WaitingReason(pod) != "ContainerCreating" {
			return false, podState(pod)
		}
		msg, err := gitops.SecretMountFailure(ctx, e.client, pod, secretName)
		if err != nil {
			return false, err.Error()
		}
		return msg != "", "no FailedMount event naming the Secret yet"
	})
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: secretName}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the outputs Secret while the app waits: %v, want NotFound", err)
	}
	t.Logf("the app Pod %s waits: %s", pod.Name, podState(pod))

	// The plan waits for approval; approve exactly it.
	tf := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: release + "-infra"}}
	cur := e.waitForTerraform(t, tf, "a plan waiting for approval", func(tf *infrav1.Terraform) bool {
		return tf.Status.Plan != nil && tf.Status.Plan.Pending != ""
	})
	if cur.Status.Plan.Add != 2 {
		t.Errorf("the plan adds %d resources, want 2 (database and security group)", cur.Status.Plan.Add)
	}
	e.approve(t, cur)
	cur = e.waitForTerraform(t, tf, "applied and Ready", readyTrue)

	// The app starts with the Secret.
	pod = e.appPod(t, release+"-app", "running and ready", func(pod *corev1.Pod) (bool, string) {
		return gitops.PodReady(pod), podState(pod)
	})
	var out corev1.Secret
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: secretName}, &out); err != nil {
		t.Fatal(err)
	}
	sg := string(out.Data["security_group_id"])
	if !strings.HasPrefix(sg, "sg-") {
		t.Fatalf("security_group_id = %q, want sg-...", sg)
	}
	log := e.podLog(t, pod)
	t.Logf("the app Pod %s runs; its log:\n%s", pod.Name, log)
	if got := logLine(log, "security group:"); got != "security group: "+sg {
		t.Errorf("the app printed %q, want the security group %s from the Secret", got, sg)
	}
	if got := logLine(log, "database:"); !strings.HasPrefix(got, "database: connected to seeds") {
		t.Errorf("the app's database line is %q, want a connection to seeds with the DSN's credentials", got)
	}
	dsn, err := neturl.Parse(string(out.Data["dsn"]))
	if err != nil || dsn.User == nil {
		t.Fatalf("the Secret's dsn is not a URL with credentials")
	}
	if password, _ := dsn.User.Password(); password == "" || strings.Contains(log, password) {
		t.Errorf("the DSN's password is empty or in the app's log")
	}
	if dbs, sgs := p.cloudCounts(t); dbs != dbs0+1 || sgs != sgs0+1 {
		t.Errorf("the cloud holds %d databases and %d security groups, want %d and %d (created once)", dbs, sgs, dbs0+1, sgs0+1)
	}

	// Uninstalling destroys the infrastructure with the app.
	e.deleteAndWait(t, hr.DeepCopy())
	e.waitGone(t, tf)
	if dbs, sgs := p.cloudCounts(t); dbs != dbs0 || sgs != sgs0 {
		t.Errorf("after uninstalling, the cloud holds %d databases and %d security groups, want %d and %d", dbs, sgs, dbs0, sgs0)
	}
	e.waitGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: secretName}})
}

// approve approves the object's pending plan with its annotation, as
// `landform approve` does.
func (e *env) approve(t *testing.T, tf *infrav1.Terraform) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1.ApproveAnnotation, tf.Status.Plan.Pending)
	if err := e.client.Patch(context.Background(), tf, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatalf("approving %s: %v", tf.Status.Plan.Pending, err)
	}
}
