package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PreviewSpec makes a Terraform object the preview of a change (a pull
// request, say): it plans its own source against a snapshot of another
// object's state. A preview never takes that object's lock nor writes its
// state, never applies, writes no outputs and is never destroyed:
// deleting it deletes only what Landform made for it (the snapshot, its
// plans, its state identity).
type PreviewSpec struct {
	// StateFrom is the object whose current state the plan starts from.
	// Before each plan the controller copies that state (the default
	// kubernetes backend only) into this object's own state Secret when it
	// changed. Unset: the plan starts from an empty state.
	// +optional
	StateFrom *PreviewTarget `json:"stateFrom,omitempty"`

	// Summary bounds what the preview's events say. Defaulted whole, so
	// that its fields' defaults hold when it is left out.
	// +kubebuilder:default={}
	// +optional
	Summary PreviewSummary `json:"summary,omitempty"`
}

// PreviewTarget names the Terraform object a preview plans against.
type PreviewTarget struct {
	// Name of the Terraform object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Terraform object; defaults to the preview's. Another
	// namespace only where that namespace grants it with the label
	// infra.landform.dev/previews-from=<the preview's namespace>: reading a
	// snapshot of a state is reading that state.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// Summary error modes (PreviewSummary.Errors).
const (
	// PreviewErrorsRedacted says which step of a failed plan failed, never
	// the engine's text: a pull request comment is read by whoever reads
	// the pull request, and error text is a channel the module controls.
	PreviewErrorsRedacted = "Redacted"
	// PreviewErrorsFull says the engine's error text (secret values
	// masked, as in every event).
	PreviewErrorsFull = "Full"
)

// PreviewSummary bounds what a preview's events say.
type PreviewSummary struct {
	// MaxAddresses is how many resource addresses the PlanPreview event
	// lists; the rest are counted.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxAddresses int32 `json:"maxAddresses,omitempty"`

	// Errors is Redacted (the step that failed only) or Full (the engine's
	// error text, secret values masked).
	// +kubebuilder:validation:Enum=Redacted;Full
	// +kubebuilder:default=Redacted
	// +optional
	Errors string `json:"errors,omitempty"`
}

// PreviewStatus is the snapshot a preview's last plan started from.
type PreviewStatus struct {
	// Target is the StateFrom object, <namespace>/<name>.
	// +optional
	Target string `json:"target,omitempty"`
	// TargetAppliedPlan is the target's status.lastAppliedPlan when the
	// snapshot was taken.
	// +optional
	TargetAppliedPlan string `json:"targetAppliedPlan,omitempty"`
	// StateSerial and StateLineage identify the snapshot's state (serial
	// 0 and no lineage: an empty state).
	// +optional
	StateSerial int64 `json:"stateSerial,omitempty"`
	// +optional
	StateLineage string `json:"stateLineage,omitempty"`
	// StateDigest is the digest of the snapshot's bytes.
	// +optional
	StateDigest string `json:"stateDigest,omitempty"`
	// SnapshotAt is when the snapshot was taken.
	// +optional
	SnapshotAt *metav1.Time `json:"snapshotAt,omitempty"`
}

// IsPreview reports whether the object is a preview (spec.preview).
func (in *Terraform) IsPreview() bool { return in.Spec.Preview != nil }

// PlansOnly reports whether the object's plans are never applied:
// spec.planOnly, or a preview.
func (in *Terraform) PlansOnly() bool { return in.Spec.PlanOnly || in.IsPreview() }

// PreviewTargetKey is the <namespace>/<name> of the object a preview plans
// against; empty for none.
func (in *Terraform) PreviewTargetKey() string {
	if in.Spec.Preview == nil || in.Spec.Preview.StateFrom == nil {
		return ""
	}
	ns := in.Spec.Preview.StateFrom.Namespace
	if ns == "" {
		ns = in.Namespace
	}
	return ns + "/" + in.Spec.Preview.StateFrom.Name
}

// Reasons of previews (docs/previews.md).
const (
	// PreviewTargetNotFoundReason: spec.preview.stateFrom names no
	// Terraform object (yet).
	PreviewTargetNotFoundReason = "PreviewTargetNotFound"
	// PreviewBackendUnsupportedReason: the target keeps its state in a
	// custom backend, which the controller cannot snapshot.
	PreviewBackendUnsupportedReason = "PreviewBackendUnsupported"
	// PreviewOnlyNamespaceReason: an object that is no preview in a
	// namespace labelled PreviewOnlyLabel; it never runs there.
	PreviewOnlyNamespaceReason = "PreviewOnlyNamespace"
	// PlanPreviewReason: the event whose message is a preview plan's
	// Markdown summary, for pull request comments.
	PlanPreviewReason = "PlanPreview"
	// ChangesPlannedReason and NoChangesReason end a preview's reconcile
	// that planned, for commit statuses ("changes planned", "no changes").
	ChangesPlannedReason = "ChangesPlanned"
	NoChangesReason      = "NoChanges"
	// PreviewStateStaleReason: the target's state changed since the last
	// preview plan (it applied a plan); the preview plans again.
	PreviewStateStaleReason = "PreviewStateStale"
)

// Namespace labels of previews.
const (
	// PreviewsFromLabel on a namespace lets previews in the namespace it
	// names take snapshots of the states of its Terraform objects.
	PreviewsFromLabel = "infra.landform.dev/previews-from"
	// PreviewOnlyLabel ("true") on a namespace admits only previews there:
	// any other Terraform object stalls with PreviewOnlyNamespace before
	// it runs anything.
	PreviewOnlyLabel = "infra.landform.dev/preview-only"
)
