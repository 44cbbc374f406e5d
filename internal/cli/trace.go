package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/outputs"
)

// Labels kustomize-controller puts on what a Kustomization applies.
const (
	kustomizationNameLabel      = "kustomize.toolkit.fluxcd.io/name"
	kustomizationNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
)

func (a *app) traceCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "trace KIND/NAME",
		Short: "Show which Terraform object, revision and plan produced the outputs an object uses",
		Long: "Show where the outputs an object uses come from, as `flux trace` does for\n" +
			"what a Kustomization applied: for an outputs Secret, or for an object whose\n" +
			"Pods read one (env, envFrom, volumes) or whose Kustomization substitutes from\n" +
			"one (postBuild.substituteFrom), the Terraform object that writes it, the\n" +
			"revision and plan applied, its Ready condition, and its source.",
		Example: a.examples("trace", "secret/app-infra-outputs", "deployment/app -n demo", "deployment/app -o yaml"),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || !strings.Contains(args[0], "/") {
				return fmt.Errorf("expected one object as KIND/NAME, such as deployment/app: %s", a.cmdName("trace KIND/NAME"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			kind, name, _ := strings.Cut(args[0], "/")
			return a.runTrace(cmd.Context(), kind, name, output)
		},
	}
	a.outputFlag(cmd, &output, "print the trace as json or yaml")
	return cmd
}

// traceResult is what trace found.
type traceResult struct {
	Object traceRef `json:"object"`
	// Outputs are the outputs Secrets the object is or uses, each with
	// how it uses it and the Terraform object that writes it.
	Outputs []traceOutputs `json:"outputs"`
}

type traceRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type traceOutputs struct {
	Secret string `json:"secret"`
	// Used says how the object uses it.
	Used      []string        `json:"used"`
	Terraform *traceTerraform `json:"terraform,omitempty"`
}

type traceTerraform struct {
	Name            string           `json:"name"`
	AppliedRevision string           `json:"appliedRevision,omitempty"`
	AppliedPlan     string           `json:"appliedPlan,omitempty"`
	Ready           *conditionResult `json:"ready,omitempty"`
	Source          sourceResult     `json:"source"`
}

func (a *app) runTrace(ctx context.Context, kind, name, output string) error {
	s, err := a.connect()
	if err != nil {
		return err
	}
	gr := schema.ParseGroupResource(strings.ToLower(kind))
	gvk, err := s.c.RESTMapper().KindFor(gr.WithVersion(""))
	if err != nil {
		return fmt.Errorf("the API server serves no kind %q: name one such as deployment, statefulset or secret (kubectl api-resources lists them)", kind)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, u); err != nil {
		return s.explain(err, "get", strings.ToLower(gvk.Kind), gvk.Kind, s.ns, name)
	}
	r := traceResult{Object: traceRef{Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}}
	used := map[string][]string{}
	if gvk.Group == "" && gvk.Kind == "Secret" {
		used[u.GetName()] = []string{"is the Secret"}
	} else {
		for secret, how := range secretsReadBy(u) {
			used[secret] = append(used[secret], how...)
		}
		if err := substitutedFrom(ctx, s, u, used); err != nil {
			return err
		}
	}
	var objs v1alpha1.TerraformList
	if err := s.c.List(ctx, &objs, client.InNamespace(u.GetNamespace())); err != nil {
		return s.explain(err, "list", resTerraforms, "Terraform", u.GetNamespace(), "")
	}
	for _, secret := range slices.Sorted(maps.Keys(used)) {
		o := traceOutputs{Secret: secret, Used: used[secret]}
		for _, tf := range objs.Items {
			if w := tf.Spec.WriteOutputsToSecret; w != nil && w.Name == secret {
				o.Terraform = traceOf(&tf)
			}
		}
		if o.Terraform != nil || gvk.Kind == "Secret" {
			r.Outputs = append(r.Outputs, o)
		}
	}
	if output != "" {
		return printData(a.Streams.Out, output, r)
	}
	return a.printTrace(a.Streams.Out, r)
}

func traceOf(tf *v1alpha1.Terraform) *traceTerraform {
	src := tf.Spec.SourceRef
	return &traceTerraform{
		Name:            tf.Name,
		AppliedRevision: tf.Status.LastAppliedRevision,
		AppliedPlan:     tf.Status.LastAppliedPlan,
		Ready:           readyResult(tf),
		Source:          sourceResult{Kind: src.Kind, Namespace: cmp.Or(src.Namespace, tf.Namespace), Name: src.Name},
	}
}

func (a *app) printTrace(w io.Writer, r traceResult) error {
	kv := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-16s"+format+"\n", append([]any{k + ":"}, args...)...)
	}
	kv("Object", "%s/%s", r.Object.Kind, r.Object.Name)
	kv("Namespace", "%s", r.Object.Namespace)
	if len(r.Outputs) == 0 {
		fmt.Fprintln(w, "---")
		fmt.Fprintln(w, "It uses no Secret a Terraform object writes its outputs to (spec.writeOutputsToSecret).")
		return nil
	}
	for _, o := range r.Outputs {
		fmt.Fprintln(w, "---")
		kv("Outputs Secret", "%s (%s)", o.Secret, strings.Join(o.Used, "; "))
		t := o.Terraform
		if t == nil {
			fmt.Fprintln(w, "No Terraform object of this namespace writes its outputs to it.")
			continue
		}
		kv("Terraform", "%s", t.Name)
		kv("Revision", "%s", orDash(t.AppliedRevision))
		kv("Applied plan", "%s", orDash(t.AppliedPlan))
		if t.Ready != nil {
			kv("Status", "%s (%s): %s", t.Ready.Status, t.Ready.Reason, oneLine(t.Ready.Message))
		} else {
			kv("Status", "Unknown: waiting for the controller")
		}
		kv("Source", "%s/%s/%s", t.Source.Kind, t.Source.Namespace, t.Source.Name)
	}
	return nil
}

// secretsReadBy are the Secrets the Pods of u read, with how: u a Pod, or
// an object with a Pod template (Deployment, StatefulSet, DaemonSet,
// ReplicaSet, Job, CronJob).
func secretsReadBy(u *unstructured.Unstructured) map[string][]string {
	var podSpec map[string]any
	for _, path := range [][]string{{"spec", "template", "spec"}, {"spec", "jobTemplate", "spec", "template", "spec"}} {
		if m, ok, _ := unstructured.NestedMap(u.Object, path...); ok {
			podSpec = m
			break
		}
	}
	if podSpec == nil && u.GetKind() == "Pod" {
		podSpec, _, _ = unstructured.NestedMap(u.Object, "spec")
	}
	var spec corev1.PodSpec
	if podSpec == nil || runtime.DefaultUnstructuredConverter.FromUnstructured(podSpec, &spec) != nil {
		return nil
	}
	return outputs.SecretReads(spec)
}

// substitutedFrom adds the Secrets the Kustomization that applied u
// substitutes from (postBuild.substituteFrom): Flux put their values into
// u.
func substitutedFrom(ctx context.Context, s *session, u *unstructured.Unstructured, used map[string][]string) error {
	name, ns := u.GetLabels()[kustomizationNameLabel], u.GetLabels()[kustomizationNamespaceLabel]
	if name == "" || ns != u.GetNamespace() {
		return nil
	}
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"})
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ks); err != nil {
		// Gone, or not readable: the object's own references still tell.
		return nil
	}
	from, _, _ := unstructured.NestedSlice(ks.Object, "spec", "postBuild", "substituteFrom")
	for _, f := range from {
		m, _ := f.(map[string]any)
		if m["kind"] == "Secret" {
			if secret, _ := m["name"].(string); secret != "" {
				used[secret] = append(used[secret], "substituted by Kustomization "+name)
			}
		}
	}
	return nil
}
