package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/placement"
)

// lockdownPolicy is what the suite's Pod placer runs with, as the
// controller would with --enforce-default-service-account and
// --allowed-runner-images=registry.test/allowed/ (newPodPlacer).
var lockdownPolicy = placement.PodPolicy{
	EnforceDefaultServiceAccount: true,
	AllowedImages:                []string{"registry.test/allowed/"},
}

// TestLockdownRefusesRunnerPods: a runner Pod the policy does not allow is
// refused before anything exists: Ready=False and Stalled with the
// refusal's reason and a message that says what to change, no run
// recorded, no Pod, no certificate Secret, no state identity. Changing the
// spec as the message says lets the run start (the Pod never runs: envtest
// has no kubelet).
func TestLockdownRefusesRunnerPods(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*infrav1.Terraform)
		reason string
		says   []string
		fix    string // a merge patch of the object
		check  func(g Gomega, pod *corev1.Pod)
	}{
		{
			name: "hostPath",
			mutate: func(tf *infrav1.Terraform) {
				tf.Spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{
					Volumes:      []corev1.Volume{{Name: "node", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "node", MountPath: "/node"}},
				}}
			},
			reason: infrav1.RunnerPodTemplateNotAllowedReason,
			says:   []string{"spec.runnerPodTemplate is not allowed", `volume "node" is a hostPath volume, which reaches the node`, "remove these from spec.runnerPodTemplate"},
			fix:    `{"spec":{"runnerPodTemplate":{"spec":{"volumes":[{"name":"node","emptyDir":{}}]}}}}`,
			check: func(g Gomega, pod *corev1.Pod) {
				for _, v := range pod.Spec.Volumes {
					g.Expect(v.HostPath).To(BeNil(), "volume %s", v.Name)
				}
			},
		},
		{
			name: "image",
			mutate: func(tf *infrav1.Terraform) {
				tf.Spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{Image: "registry.test/allowedevil/runner:v1"}}
			},
			reason: infrav1.RunnerImageNotAllowedReason,
			says:   []string{`spec.runnerPodTemplate.spec.image "registry.test/allowedevil/runner:v1" is not allowed`, `"registry.test/allowed/" (--allowed-runner-images)`, `"landform-runner:test"`},
			fix:    `{"spec":{"runnerPodTemplate":{"spec":{"image":"registry.test/allowed/runner:v1"}}}}`,
			check: func(g Gomega, pod *corev1.Pod) {
				g.Expect(pod.Spec.Containers[0].Image).To(Equal("registry.test/allowed/runner:v1"))
			},
		},
		{
			name:   "service account",
			mutate: func(tf *infrav1.Terraform) { tf.Spec.ServiceAccountName = "deployer" },
			reason: infrav1.RunnerServiceAccountNotAllowedReason,
			says:   []string{`spec.serviceAccountName "deployer" is not allowed`, "ServiceAccount landform-runner", "--enforce-default-service-account", "remove spec.serviceAccountName"},
			fix:    `{"spec":{"serviceAccountName":null}}`,
			check: func(g Gomega, pod *corev1.Pod) {
				g.Expect(pod.Spec.ServiceAccountName).To(Equal("landform-runner"))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			for _, sa := range []string{"landform-runner", "deployer"} {
				g.Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
			}
			newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))
			tf := newTerraform(t, ns, "locked", func(tf *infrav1.Terraform) {
				tf.Labels = map[string]string{podPlacementLabel: "pod"}
				tf.Spec.Vars = fileVars(effectPath(t), "x")
				tt.mutate(tf)
			})

			obj := waitFor(t, tf, func(g Gomega, obj *infrav1.Terraform) {
				g.Expect(readyReasonOf(obj)).To(Equal(tt.reason))
				g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
			})
			g.Expect(conditions.IsFalse(obj, meta.ReadyCondition)).To(BeTrue())
			g.Expect(conditions.IsStalled(obj)).To(BeTrue(), "Stalled: retrying cannot help")
			g.Expect(conditions.GetReason(obj, meta.StalledCondition)).To(Equal(tt.reason))
			g.Expect(conditions.Has(obj, meta.ReconcilingCondition)).To(BeFalse())
			msg := readyMessageOf(obj)
			for _, want := range tt.says {
				g.Expect(msg).To(ContainSubstring(want))
			}
			// No run was recorded, so none failed: a refusal is not a
			// failed plan.
			g.Expect(obj.Status.Run).To(BeNil(), "no run recorded")
			g.Expect(conditions.Get(obj, infrav1.PlannedCondition)).To(BeNil(), "no plan run")
			g.Expect(obj.Status.LastPlannedRevision).To(BeEmpty())

			// Nothing was created for the refused runner, and nothing
			// retries it.
			g.Consistently(func(g Gomega) { g.Expect(runnerPods(g, ns)).To(BeEmpty()) }).WithTimeout(2 * time.Second).WithPolling(pollEvery).Should(Succeed())
			for _, o := range []client.Object{
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: certs.RunnerSecretName}},
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.StateIdentity(tf)}},
			} {
				err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s: %v, want NotFound", o, o.GetName(), err)
			}

			// As the message says: the run starts, with the Pod as fixed.
			g.Expect(k8sClient.Patch(ctx, get(g, tf), rawMergePatch([]byte(tt.fix)))).To(Succeed())
			g.Eventually(func(g Gomega) {
				pods := &corev1.PodList{}
				g.Expect(k8sClient.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
				g.Expect(pods.Items).NotTo(BeEmpty())
				tt.check(g, &pods.Items[0])
			}).WithTimeout(waitTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
			obj = waitNotReady(t, tf, infrav1.RunnerStartTimeoutReason)
			g.Expect(conditions.IsStalled(obj)).To(BeFalse())
		})
	}
}

// TestRunnerPodTemplateHasNoSecurityFields: spec.runnerPodTemplate has no
// field for host namespaces or privileges. A client asking for strict
// field validation is told so and nothing is created; any other client's
// object is stored without them (the CRD's structural schema prunes
// unknown fields), and the runner Pod made from it is admitted in a
// namespace that enforces the restricted Pod Security Standard.
func TestRunnerPodTemplateHasNoSecurityFields(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	nsObj := &corev1.Namespace{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	nsObj.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
	g.Expect(k8sClient.Update(ctx, nsObj)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-runner"}})).To(Succeed())
	newGitRepository(t, ns, "repo", artifacts.publish(fileModule()))

	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(),
		"kind":       infrav1.TerraformKind,
		"metadata":   map[string]any{"namespace": ns, "name": "privileged", "labels": map[string]any{podPlacementLabel: "pod"}},
		"spec": map[string]any{
			"sourceRef":     map[string]any{"kind": "GitRepository", "name": "repo"},
			"path":          "modules/file",
			"interval":      "1h",
			"retryInterval": "2s",
			"approvePlan":   "auto",
			"vars": []any{
				map[string]any{"name": "path", "value": effectPath(t)},
				map[string]any{"name": "content", "value": "x"},
			},
			"runnerPodTemplate": map[string]any{"spec": map[string]any{
				"image":           "landform-runner:test",
				"hostNetwork":     true,
				"hostPID":         true,
				"securityContext": map[string]any{"privileged": true},
			}},
		},
	}}

	strict := client.WithFieldValidation(k8sClient, metav1.FieldValidationStrict)
	err := strict.Create(ctx, u.DeepCopy())
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "strict create: %v", err)
	for _, field := range []string{"spec.runnerPodTemplate.spec.hostNetwork", "spec.runnerPodTemplate.spec.hostPID", "spec.runnerPodTemplate.spec.securityContext"} {
		g.Expect(err.Error()).To(ContainSubstring(`unknown field "` + field + `"`))
	}
	g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(ns, "privileged"), &infrav1.Terraform{}))).To(BeTrue(), "nothing created")

	g.Expect(k8sClient.Create(ctx, u)).To(Succeed())
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(infrav1.GroupVersion.WithKind(infrav1.TerraformKind))
	g.Expect(k8sClient.Get(ctx, keyOf(ns, "privileged"), stored)).To(Succeed())
	spec, found, err := unstructured.NestedMap(stored.Object, "spec", "runnerPodTemplate", "spec")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(spec).To(Equal(map[string]any{"image": "landform-runner:test"}), "pruned to the known fields")

	var pod corev1.Pod
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8sClient.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		pod = pods.Items[0]
	}).WithTimeout(waitTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(pod.Spec.HostNetwork).To(BeFalse())
	g.Expect(pod.Spec.HostPID).To(BeFalse())
	g.Expect(pod.Spec.HostIPC).To(BeFalse())
	g.Expect(pod.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	c := pod.Spec.Containers[0]
	g.Expect(c.SecurityContext.Privileged).To(Or(BeNil(), HaveValue(BeFalse())))
	g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))

	// The Pod was admitted under restricted and only never ran (no
	// kubelet), rather than refused.
	obj := waitNotReady(t, &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "privileged"}}, infrav1.RunnerStartTimeoutReason)
	g.Expect(strings.Contains(readyMessageOf(obj), "forbidden")).To(BeFalse())
}
