package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The raw engine's Pod keeping its state: what the local section's raw
// engine runs (bench.raw), in a Pod. The bare raw Pod (rawPod) keeps its
// state on a disk that goes with the Pod and runs init and apply alone,
// which is not a way to run infrastructure; this one keeps its state
// where Landform keeps it, in a Secret of the namespace (the kubernetes
// backend, in-cluster, with a ServiceAccount of its own), and runs init,
// plan, the apply of that plan and `output -json`, as the local raw
// engine does. Its figures are published beside the bare Pod's, which the
// targets of issue 36 were written against.
const (
	rawStatePrefix         = "rawstate-"
	rawStateServiceAccount = "bench-raw-engine"
	rawStateScript         = `set -e
echo start
cp /module/main.tf /module/backend.tf /work/
cd /work
tofu init -input=false -no-color -backend-config="secret_suffix=$STATE_SUFFIX" >/tmp/init.log 2>&1 || { cat /tmp/init.log; exit 1; }
echo init-done
tofu plan -input=false -no-color -out=plan.out >/tmp/plan.log 2>&1 || { cat /tmp/plan.log; exit 1; }
echo plan-done
tofu apply -input=false -no-color plan.out >/tmp/apply.log 2>&1 || { cat /tmp/apply.log; exit 1; }
echo apply-done
tofu output -json >/tmp/output.json 2>&1 || { cat /tmp/output.json; exit 1; }
echo output-done
`
)

// rawStateBackend is the module's backend for the Pod keeping its state:
// the secret suffix comes at init, the Pod's name.
func (cb *clusterBench) rawStateBackend() string {
	return fmt.Sprintf("terraform {\n  backend \"kubernetes\" {\n    in_cluster_config = true\n    namespace         = %q\n  }\n}\n", cb.co.ns)
}

// rawStateIdentity gives the Pod keeping its state a ServiceAccount that
// may keep it: the Secrets and Leases of the namespace (made once per
// run, outside every sample).
func (cb *clusterBench) rawStateIdentity(ctx context.Context) error {
	meta := metav1.ObjectMeta{Namespace: cb.co.ns, Name: rawStateServiceAccount}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: rawStateServiceAccount},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: rawStateServiceAccount, Namespace: cb.co.ns}}}
	for _, o := range []client.Object{&corev1.ServiceAccount{ObjectMeta: meta}, role, binding} {
		if err := cb.c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return err
		}
		o.SetResourceVersion("")
		if err := cb.c.Create(ctx, o); err != nil {
			return fmt.Errorf("the raw engine's identity: %w", err)
		}
	}
	return nil
}

// rawStatePod is the raw engine's Pod keeping its state: rawPod with a
// ServiceAccount token for the backend and rawStateScript.
func (cb *clusterBench) rawStatePod(name string) *corev1.Pod {
	pod := cb.rawPod(name)
	pod.Spec.ServiceAccountName = rawStateServiceAccount
	pod.Spec.AutomountServiceAccountToken = ptr.To(true)
	c := &pod.Spec.Containers[0]
	c.Command = []string{"/bin/sh", "-c", rawStateScript}
	c.Env = append(c.Env, corev1.EnvVar{Name: "STATE_SUFFIX", Value: name})
	return pod
}

// rawStateSample runs the raw engine's Pod keeping its state: create →
// Succeeded; its engine ends with `output -json`.
func (cb *clusterBench) rawStateSample(ctx context.Context, name string) (measured, error) {
	return cb.podSample(ctx, cb.rawStatePod(name), "output-done")
}
