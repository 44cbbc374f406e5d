package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/keptartifact"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/owned"
	"github.com/landform-dev/landform/internal/planstore"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/internal/statehistory"
	"github.com/landform-dev/landform/internal/unsavedstate"
)

// runnerPodValue is nameLabel's value on runner Pods (internal/placement),
// which also carry the owned labels.
const runnerPodValue = "landform-runner"

func (a *app) treeCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "tree NAME",
		Short: "Show what a Terraform object owns and uses, as a tree like flux tree",
		Long: "Show what a Terraform object owns and uses: its runner Pods, the state identity\n" +
			"(ServiceAccount, Role, RoleBinding), the state Secret and its lock Lease, and the\n" +
			"Secrets Landform writes for it: plans, kept artifacts, unsaved states, state\n" +
			"history, run logs and outputs. Only what exists is shown. -o json|yaml prints\n" +
			"the tree as `flux tree` does: the object as resource, what it holds as resources.",
		Example:           a.examples("tree", "database", "database -o json"),
		Args:              a.oneName("tree NAME"),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runTree(cmd.Context(), args[0], output)
		},
	}
	a.outputFlag(cmd, &output, "print the tree as json or yaml")
	return cmd
}

// treeNode is one object of the tree, Kind/namespace/name.
type treeNode struct{ kind, name string }

// treeResult is the tree as -o prints it, in flux tree's shape.
type treeResult struct {
	Resource  treeRef      `json:"resource"`
	Resources []treeResult `json:"resources,omitempty"`
}

type treeRef struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// treeGroups are the API groups of the kinds a tree holds.
var treeGroups = map[string]string{
	"Role": rbacv1.GroupName, "RoleBinding": rbacv1.GroupName, "Lease": coordinationv1.GroupName,
}

func (a *app) runTree(ctx context.Context, name, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	ns := obj.Namespace
	var nodes []treeNode

	var pods corev1.PodList
	podLabels := owned.Labels(obj)
	podLabels[nameLabel] = runnerPodValue
	if err := s.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(podLabels)); err != nil {
		return s.explain(err, "list", resPods, "Pod", ns, "")
	}
	slices.SortFunc(pods.Items, func(x, y corev1.Pod) int { return x.CreationTimestamp.Compare(y.CreationTimestamp.Time) })
	for _, p := range pods.Items {
		nodes = append(nodes, treeNode{"Pod", p.Name})
	}

	// The state identity, then the state and its lock, by name.
	identity := names.StateIdentity(obj)
	for _, o := range []struct {
		obj      client.Object
		kind     string
		resource string
		name     string
	}{
		{&corev1.ServiceAccount{}, "ServiceAccount", "serviceaccounts", identity},
		{&rbacv1.Role{}, "Role", "roles.rbac.authorization.k8s.io", identity},
		{&rbacv1.RoleBinding{}, "RoleBinding", "rolebindings.rbac.authorization.k8s.io", identity},
		{&corev1.Secret{}, "Secret", resSecrets, names.StateSecret(obj)},
		{&coordinationv1.Lease{}, "Lease", resLeases, names.StateLease(obj)},
	} {
		err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.name}, o.obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return s.explain(err, "get", o.resource, o.kind, ns, "")
		default:
			nodes = append(nodes, treeNode{o.kind, o.name})
		}
	}

	var secrets corev1.SecretList
	if err := s.c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels(owned.Labels(obj))); err != nil {
		return s.explain(err, "list", resSecrets, "Secret", ns, "")
	}
	slices.SortFunc(secrets.Items, func(x, y corev1.Secret) int {
		return cmp.Or(cmp.Compare(secretRank(obj, &x), secretRank(obj, &y)), compareNames(x.Name, y.Name))
	})
	for _, sec := range secrets.Items {
		nodes = append(nodes, treeNode{"Secret", sec.Name})
	}

	if output != "" {
		tree := treeResult{Resource: treeRef{Group: v1alpha1.GroupVersion.Group, Kind: v1alpha1.TerraformKind, Namespace: ns, Name: obj.Name}}
		for _, n := range nodes {
			tree.Resources = append(tree.Resources, treeResult{Resource: treeRef{Group: treeGroups[n.kind], Kind: n.kind, Namespace: ns, Name: n.name}})
		}
		return printData(a.Streams.Out, output, tree)
	}
	w := a.Streams.Out
	fmt.Fprintf(w, "%s/%s/%s\n", v1alpha1.TerraformKind, ns, obj.Name)
	for i, n := range nodes {
		branch := "├── "
		if i == len(nodes)-1 {
			branch = "└── "
		}
		fmt.Fprintf(w, "%s%s/%s/%s\n", branch, n.kind, ns, n.name)
	}
	return nil
}

// secretRank orders the Secrets Landform writes for obj by what they
// hold: plans, kept artifacts, unsaved states, state history, run log,
// outputs.
func secretRank(obj *v1alpha1.Terraform, s *corev1.Secret) int {
	switch {
	case s.Labels[planstore.PlanLabel] != "":
		return 0
	case s.Labels[keptartifact.ArtifactLabel] != "":
		return 1
	case s.Labels[unsavedstate.Label] != "":
		return 2
	case s.Labels[statehistory.Label] != "":
		return 3
	case s.Name == runlog.SecretName(obj.Name):
		return 4
	case obj.Spec.WriteOutputsToSecret != nil && s.Name == obj.Spec.WriteOutputsToSecret.Name:
		return 5
	}
	return 6
}

// compareNames sorts chunk names by their number: tfplan-db-2 before
// tfplan-db-10.
func compareNames(x, y string) int {
	return cmp.Or(cmp.Compare(len(x), len(y)), strings.Compare(x, y))
}
