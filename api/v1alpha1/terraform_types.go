package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TerraformSpec is the desired state of a Terraform object: which module to
// run, with which inputs, how plans are approved and where outputs go.
// +kubebuilder:validation:XValidation:rule="!has(self.writeOutputsToSecret) || !has(self.writeOutputsToSecret.outputs) || self.writeOutputsToSecret.outputs.all(o, o.size() > 0)",message="writeOutputsToSecret.outputs entries must not be empty"
// +kubebuilder:validation:XValidation:rule="!has(self.workspace) || (has(self.backendConfig) && has(self.backendConfig.customConfiguration)) || self.workspace.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="with the default kubernetes backend the workspace is part of the state Secret's name tfstate-<workspace>-<secretSuffix>: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
// +kubebuilder:validation:XValidation:rule="!has(self.preview) || ((!has(self.approvePlan) || size(self.approvePlan) == 0) && !has(self.writeOutputsToSecret) && !(has(self.destroy) && self.destroy) && !(has(self.autoApproveDestructive) && self.autoApproveDestructive) && !has(self.destroyApproval) && !has(self.backendConfig))",message="a preview is never applied, writes no outputs, has no backend of its own and is never destroyed: remove approvePlan, writeOutputsToSecret, destroy, autoApproveDestructive, destroyApproval and backendConfig"
type TerraformSpec struct {
	// SourceRef is the Flux source (GitRepository, OCIRepository or Bucket)
	// whose artifact holds the module.
	// +required
	SourceRef SourceReference `json:"sourceRef"`

	// Path is the module's directory inside the source artifact, relative to
	// its root. It may not escape the artifact.
	// +kubebuilder:default="./"
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Path string `json:"path,omitempty"`

	// Interval is how often the module is planned again to detect drift.
	// At least one second.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || duration(self) >= duration('1s')",message="interval must be at least 1s (0 means the default)"
	// +kubebuilder:default="10m"
	// +optional
	Interval metav1.Duration `json:"interval,omitempty"`

	// RetryInterval is how long to wait before retrying after a failure.
	// Defaults to Interval, capped at five minutes. At least one second.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || duration(self) >= duration('1s')",message="retryInterval must be at least 1s (0 means the default)"
	// +optional
	RetryInterval *metav1.Duration `json:"retryInterval,omitempty"`

	// Timeout bounds each terraform phase on its own: init plus plan, the
	// apply (counted from the apply's start) and the destroy. On expiry
	// terraform is interrupted gracefully, so that it saves its state and
	// releases its lock. Starting the runner has its own deadline
	// (the controller's --runner-start-timeout).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:default="20m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Suspend stops all reconciliation, including deletion's destroy, until
	// set back to false.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// ApprovePlan is "auto" to apply every plan, empty to wait for manual
	// approval (the infra.landform.dev/approve annotation), or a plan id to
	// approve exactly that plan (approval committed to Git).
	// +kubebuilder:validation:Pattern="^(auto|plan-[a-z0-9]+-[a-f0-9]+)?$"
	// +optional
	ApprovePlan string `json:"approvePlan,omitempty"`

	// AutoApproveDestructive lets approvePlan "auto" apply plans that
	// destroy or replace resources too. Without it such a plan, a new
	// revision's as well as a drift repair's, waits for the approval of its
	// id like a manual plan (reason DestructivePlanPending), so that a
	// resource is destroyed without a person only when its object is
	// deleted. spec.destroy and deletion are not gated by this (see
	// destroyApproval); without approvePlan "auto" it changes nothing.
	// +optional
	AutoApproveDestructive bool `json:"autoApproveDestructive,omitempty"`

	// DeletionPolicy says what happens to the cloud resources when the object
	// is deleted: Delete destroys them, then deletes the state and the
	// outputs Secret; Orphan keeps the resources, the state and the outputs
	// Secret (which then carries no owner reference, so that no garbage
	// collection takes it).
	// +kubebuilder:validation:Enum=Delete;Orphan
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// DestroyApproval gates deletion (deletionPolicy Delete): "manual" makes
	// deletion plan the destroy and wait until that plan is approved like
	// any other (the infra.landform.dev/approve annotation or approvePlan
	// naming its id) before destroying. Empty or "auto" destroys at once.
	// +kubebuilder:validation:Enum=auto;manual
	// +optional
	DestroyApproval string `json:"destroyApproval,omitempty"`

	// Vars are input variables; a value may be any JSON value.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=500
	// +optional
	Vars []Variable `json:"vars,omitempty"`

	// VarsFrom reads input variables from Secrets and ConfigMaps in the
	// object's namespace, and from fields of any other object (a Service's
	// load-balancer hostname, say): while a required field is absent or
	// empty the module is not planned (reason InputNotReady), and it is
	// planned as soon as the field is set. Later entries override earlier
	// ones; Vars override all of them.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	VarsFrom []VarsReference `json:"varsFrom,omitempty"`

	// Imports bring existing resources under this module's management
	// instead of creating them: each becomes an import block in the root
	// module before planning (OpenTofu and Terraform 1.5 or later). The
	// plan counts them, and approval works as for any plan. Once a
	// resource is in the state, its entry is a no-op and may stay.
	// +listType=map
	// +listMapKey=to
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Imports []Import `json:"imports,omitempty"`

	// WriteOutputsToSecret writes the module's outputs into a Secret owned by
	// this object.
	// +optional
	WriteOutputsToSecret *WriteOutputsToSecretSpec `json:"writeOutputsToSecret,omitempty"`

	// DependsOn lists objects that must be Ready at their current generation
	// before this module is planned: other Terraform objects, Flux
	// Kustomizations and HelmReleases. Another kind with a Ready condition
	// works when apiVersion names it and the controller's ClusterRole is
	// granted get on it (it grants only these three).
	// +kubebuilder:validation:MaxItems=50
	// +optional
	DependsOn []DependencyReference `json:"dependsOn,omitempty"`

	// BackendConfig configures where state is kept. The default is
	// Terraform's kubernetes backend with the state in Secret
	// tfstate-<workspace>-<secretSuffix> in the object's namespace.
	// +optional
	BackendConfig *BackendConfig `json:"backendConfig,omitempty"`

	// Workspace is the Terraform workspace, at most 63 characters (the
	// kubernetes backend labels the state Secret with it). With the default
	// backend it is part of the state Secret's name, so lowercase letters,
	// digits, '-' and '.' only.
	// +kubebuilder:default=default
	// +kubebuilder:validation:Pattern="^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$"
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Workspace string `json:"workspace,omitempty"`

	// Engine chooses the engine and its version for this module, installed
	// and verified on demand from the controller's release sources. Empty:
	// the controller's default engine (the runner image's, or
	// --engine for local runners).
	// +optional
	Engine *EngineSpec `json:"engine,omitempty"`

	// RunnerPodTemplate customises the runner Pod (pod placement only).
	// +optional
	RunnerPodTemplate *RunnerPodTemplate `json:"runnerPodTemplate,omitempty"`

	// ServiceAccountName is the runner Pod's ServiceAccount (pod placement
	// only). Defaults to the controller's --default-service-account
	// (landform-runner unless the operator set another). It may not be a
	// state identity (landform-state-...): those reach one object's state
	// alone, and only through the runner's state proxy.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('landform-state-')",message="serviceAccountName may not name a state identity (landform-state-...): runners reach the state through the controller's token, not a mounted one"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// DisableDriftDetection turns off the periodic drift-check plan.
	// +optional
	DisableDriftDetection bool `json:"disableDriftDetection,omitempty"`

	// PlanOnly plans but never applies, whatever ApprovePlan says.
	// +optional
	PlanOnly bool `json:"planOnly,omitempty"`

	// Destroy plans the destruction of every resource of the module; the plan
	// is approved like any other.
	// +optional
	Destroy bool `json:"destroy,omitempty"`

	// Preview makes the object the preview of a change (a pull request):
	// it plans against a snapshot of another object's state, and is never
	// applied nor destroyed, whatever deletionPolicy says
	// (docs/previews.md).
	// +optional
	Preview *PreviewSpec `json:"preview,omitempty"`
}

// SourceReference names a Flux source.
type SourceReference struct {
	// APIVersion is accepted for compatibility with tofu-controller
	// manifests and ignored: the controller reads the source through
	// source.toolkit.fluxcd.io/v1, or v1beta2 where the cluster serves the
	// kind only at v1beta2 (Flux v2.0 to v2.5).
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the source. ExternalArtifact (Flux v2.7 and later) is what an
	// ArtifactGenerator publishes for one path of a repository.
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket;ExternalArtifact
	// +required
	Kind string `json:"kind"`

	// Name of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Namespace of the source; defaults to the object's namespace.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// DeletionPolicy says what happens to cloud resources on deletion.
type DeletionPolicy string

const (
	// DeletionPolicyDelete destroys the resources and the state.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan keeps the resources and the state.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// Variable is one input variable.
type Variable struct {
	// Name of the variable.
	// +kubebuilder:validation:Pattern="^[a-zA-Z_][a-zA-Z0-9_-]*$"
	// +required
	Name string `json:"name"`

	// Value is any JSON value: string, number, bool, list or map.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=""
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
}

// EngineSpec names an engine and a version or version constraint.
type EngineSpec struct {
	// Name is opentofu or terraform.
	// +kubebuilder:validation:Enum=opentofu;terraform
	// +required
	Name string `json:"name"`

	// Version is an exact version ("1.9.8") or a constraint ("~> 1.9",
	// ">= 1.5, < 2.0"), which resolves to the newest stable version the
	// release source offers that matches. The version that made a plan is
	// the one that applies it; a different version is a new plan, with a
	// new approval.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Version string `json:"version"`
}

// EngineStatus is an engine resolved to one exact version.
type EngineStatus struct {
	// Name is opentofu or terraform.
	// +required
	Name string `json:"name"`

	// Version is the exact version.
	// +required
	Version string `json:"version"`
}

// VarsReference reads variables from a Secret or ConfigMap (all keys, or
// those varsKeys selects), or from fields of any other namespaced object
// (those fields selects).
// +kubebuilder:validation:XValidation:rule="self.kind in ['Secret', 'ConfigMap'] ? !has(self.fields) && !has(self.namespace) : has(self.fields) && has(self.apiVersion) && !has(self.varsKeys)",message="a Secret or ConfigMap takes varsKeys (in this object's namespace); any other kind takes apiVersion and fields"
// +kubebuilder:validation:XValidation:rule="!has(self.fields) || !has(self.apiVersion) || self.apiVersion != 'v1' || !(self.kind.lowerAscii() in ['secret', 'secrets'])",message="a Secret's fields are never read (status.inputs would keep them in plain text); use kind: Secret with varsKeys"
type VarsReference struct {
	// APIVersion of the object, e.g. v1 or networking.k8s.io/v1. Required
	// for kinds other than Secret and ConfigMap.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind is Secret, ConfigMap, or the kind of any namespaced object
	// whose fields to read (Service, Ingress, a custom resource). The
	// controller's ClusterRole reads Secrets, ConfigMaps, Services and
	// Ingresses; other kinds need read access granted (the chart's
	// inputKinds value).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Kind string `json:"kind"`

	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Namespace of an object read by fields; defaults to this object's
	// namespace. Another namespace is refused unless the controller runs
	// with --no-cross-namespace-refs=false. Secrets and ConfigMaps are
	// always read from this object's namespace.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// VarsKeys selects a Secret's or ConfigMap's keys; "key:name" reads key
	// into variable name. All keys when empty. A value that is a JSON object
	// or list is passed as that structured value; anything else (numbers
	// and booleans included) as a string, which terraform converts for
	// number and bool variables.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	VarsKeys []string `json:"varsKeys,omitempty"`

	// Fields map fields of an object other than a Secret or ConfigMap to
	// variables. Their values are kept in status.inputs, so a Secret, by
	// whatever spelling of its kind (secret, Secrets), is refused: read it
	// with kind: Secret and varsKeys.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Fields []FieldVariable `json:"fields,omitempty"`

	// Optional tolerates a missing object, key or field: the variables it
	// would set keep the module's defaults.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// FieldVariable reads one field of an object into a variable.
type FieldVariable struct {
	// Path selects the field with kubectl's JSONPath syntax, braces
	// optional: .status.loadBalancer.ingress[0].hostname, or
	// .metadata.annotations['example\.com/id']. A string is passed as a
	// string, a number or boolean as that value, an object or list as that
	// structured value; a path that selects several values passes them as
	// a list. Absent, null and empty values are not ready.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Path string `json:"path"`

	// Name of the variable.
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=128
	// +required
	Name string `json:"name"`
}

// Import names an existing resource to bring under management.
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.idFrom)",message="set exactly one of id and idFrom"
type Import struct {
	// To is the resource's address in the module:
	// aws_db_instance.main, module.db.aws_db_instance.this["a"].
	// +kubebuilder:validation:Pattern=`^(module\.[a-zA-Z_][a-zA-Z0-9_-]*(\[("[^"\\${}%]*"|[0-9]+)\])?\.)*[a-zA-Z_][a-zA-Z0-9_-]*\.[a-zA-Z_][a-zA-Z0-9_-]*(\[("[^"\\${}%]*"|[0-9]+)\])?$`
	// +kubebuilder:validation:MaxLength=512
	// +required
	To string `json:"to"`

	// ID is the provider's id of the existing resource, as its import
	// documentation names it (e.g. a database's identifier).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	ID string `json:"id,omitempty"`

	// IDFrom reads the id from a Secret's or ConfigMap's key, or from a
	// field of any other object (waiting for it as varsFrom does).
	// +optional
	IDFrom *ImportIDReference `json:"idFrom,omitempty"`
}

// ImportIDReference reads an import id from another object.
// +kubebuilder:validation:XValidation:rule="self.kind in ['Secret', 'ConfigMap'] ? has(self.key) && !has(self.path) && !has(self.namespace) : has(self.path) && has(self.apiVersion) && !has(self.key)",message="a Secret or ConfigMap takes key (in this object's namespace); any other kind takes apiVersion and path"
type ImportIDReference struct {
	// APIVersion of the object; required for kinds other than Secret and
	// ConfigMap.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind is Secret, ConfigMap or any namespaced kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Kind string `json:"kind"`

	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Namespace of an object read by path, as in varsFrom.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Key of a Secret or ConfigMap.
	// +optional
	Key string `json:"key,omitempty"`

	// Path of the field of any other kind, as in varsFrom's fields.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Path string `json:"path,omitempty"`
}

// WriteOutputsToSecretSpec says which outputs to write where.
type WriteOutputsToSecretSpec struct {
	// Name of the Secret, in the object's namespace. Landform creates and
	// owns it, and refuses to take over a Secret it does not own.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Outputs to write; "name:alias" writes output name under key alias.
	// All outputs when empty.
	// +kubebuilder:validation:MaxItems=200
	// +optional
	Outputs []string `json:"outputs,omitempty"`

	// Labels added to the Secret.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to the Secret.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// DependencyReference names an object that must be Ready first.
// +kubebuilder:validation:XValidation:rule="has(self.apiVersion) || !has(self.kind) || self.kind in ['Terraform', 'Kustomization', 'HelmRelease']",message="dependsOn.apiVersion is required for kinds other than Terraform, Kustomization and HelmRelease"
type DependencyReference struct {
	// APIVersion of the object. Defaults by kind: infra.landform.dev/v1alpha1
	// for Terraform, kustomize.toolkit.fluxcd.io/v1 for Kustomization,
	// helm.toolkit.fluxcd.io/v2 for HelmRelease; required for other kinds.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the object; defaults to Terraform.
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`

	// Namespace of the object; defaults to this object's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// BackendConfig configures the state backend.
// +kubebuilder:validation:XValidation:rule="!(has(self.customConfiguration) && has(self.secretSuffix))",message="secretSuffix applies only to the default kubernetes backend, not with customConfiguration"
type BackendConfig struct {
	// SecretSuffix of the state Secret tfstate-<workspace>-<secretSuffix>,
	// at most 63 characters (the kubernetes backend labels the state Secret
	// with it). Defaults to the object's name; a name longer than 63
	// characters is cut to 54 and followed by '-' and 8 hex digits of its
	// SHA-256.
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=63
	// +optional
	SecretSuffix string `json:"secretSuffix,omitempty"`

	// CustomConfiguration replaces the default backend with this HCL
	// (a complete terraform { backend "..." { } } block).
	// +optional
	CustomConfiguration string `json:"customConfiguration,omitempty"`
}

// RunnerPodTemplate customises runner Pods.
type RunnerPodTemplate struct {
	// Metadata added to the runner Pod.
	// +optional
	Metadata RunnerPodMetadata `json:"metadata,omitempty"`

	// Spec of the runner Pod.
	// +optional
	Spec RunnerPodSpec `json:"spec,omitempty"`
}

// RunnerPodMetadata is the runner Pod's extra metadata.
type RunnerPodMetadata struct {
	// Labels added to the runner Pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to the runner Pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RunnerPodSpec is the part of the runner Pod's spec a user may set.
type RunnerPodSpec struct {
	// Image of the runner.
	// +optional
	Image string `json:"image,omitempty"`
	// Env of the runner container. The runner does not pass on to the
	// engine the variables it manages itself (TF_CLI_ARGS*, TF_VAR_*,
	// TF_LOG*, TF_WORKSPACE, TF_INPUT, TF_IN_AUTOMATION and the like) nor
	// TF_CLI_CONFIG_FILE, TF_DATA_DIR and TF_PLUGIN_CACHE_DIR; it logs
	// their names. Set module variables with vars or varsFrom.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// EnvFrom of the runner container.
	// +optional
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
	// Resources of the runner container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// NodeSelector of the runner Pod.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the runner Pod.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity of the runner Pod.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Volumes added to the runner Pod.
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// VolumeMounts added to the runner container.
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
}

// TerraformStatus is the observed state of a Terraform object.
type TerraformStatus struct {
	// ObservedGeneration is the last generation reconciled to completion.
	// +kubebuilder:default=-1
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`

	// Conditions: Ready, Reconciling, Stalled, Planned, Applied, Drifted,
	// StateLocked, OutputsWritten.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastAttemptedRevision is the source revision last tried.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`

	// LastPlannedRevision is the source revision of the last plan.
	// +optional
	LastPlannedRevision string `json:"lastPlannedRevision,omitempty"`

	// LastAppliedRevision is the source revision last applied.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`

	// LastAppliedPlan is the id of the plan last applied.
	// +optional
	LastAppliedPlan string `json:"lastAppliedPlan,omitempty"`

	// LastFailedApplyPlan is the id of the plan whose apply last failed
	// or was lost after it may have changed resources (not one refused
	// before it began: a stale plan, a held lock). Its approval is spent:
	// a plan made after it has another id, even for the same changes
	// from the same state, and waits for its own approval. Cleared by
	// the next apply that succeeds.
	// +optional
	LastFailedApplyPlan string `json:"lastFailedApplyPlan,omitempty"`

	// LastAppliedArtifact is the source artifact of the last successful
	// apply. The controller keeps a copy of it (Secrets owned by this
	// object), so that deletion can destroy the resources after the source
	// is gone.
	// +optional
	LastAppliedArtifact *AppliedArtifactStatus `json:"lastAppliedArtifact,omitempty"`

	// Plan summarises the last plan.
	// +optional
	Plan *PlanStatus `json:"plan,omitempty"`

	// Inputs are the values last read from other objects' fields
	// (varsFrom fields; never from Secrets or ConfigMaps). Deleting the
	// object destroys with them when those objects or fields are gone
	// already: an uninstall often deletes a Service with its Terraform
	// object, and the destroy still needs the module's variables.
	// +listType=map
	// +listMapKey=name
	// +optional
	Inputs []Variable `json:"inputs,omitempty"`

	// AvailableOutputs lists the module's output names (never values).
	// +optional
	AvailableOutputs []string `json:"availableOutputs,omitempty"`

	// Lock is the state lock holder while the state is locked.
	// +optional
	Lock *LockStatus `json:"lock,omitempty"`

	// Run is the run in flight (queued, starting or running), recorded
	// before it starts so that a restarted controller or a new leader
	// finds it and collects its result instead of running terraform again.
	// +optional
	Run *RunStatus `json:"run,omitempty"`

	// Preview is the snapshot a preview's last plan started from.
	// +optional
	Preview *PreviewStatus `json:"preview,omitempty"`

	// LastHandledReconcileAt is the last reconcile.fluxcd.io/requestedAt
	// value handled.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// PlanStatus summarises a plan.
type PlanStatus struct {
	// Pending is the id of the plan waiting to be applied; empty once
	// applied or when the plan had no changes.
	// +optional
	Pending string `json:"pending,omitempty"`

	// ID of the last plan: plan-<revision short>-<digest short>, the digest
	// covering the plan's inputs (artifact, path, variables, backend,
	// workspace, engine and version, dependency lock), the state it was
	// planned against and its changes.
	// +optional
	ID string `json:"id,omitempty"`

	// Revision the plan was made from.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Digest is "sha256:<hex>" of the plan as the controller stored it.
	// Status is written only by the controller: before an apply the stored
	// plan's bytes are checked against it, so a plan changed after it was
	// made (or approved) is refused (reason PlanDigestMismatch).
	// +optional
	Digest string `json:"digest,omitempty"`

	// Add counts the resources the plan creates (a replacement counts here
	// and in Destroy).
	// +optional
	Add int32 `json:"add"`
	// Change counts the resources the plan updates in place.
	// +optional
	Change int32 `json:"change"`
	// Destroy counts the resources the plan destroys (a replacement counts
	// here and in Add).
	// +optional
	Destroy int32 `json:"destroy"`
	// Replace counts the resources the plan destroys and creates again
	// (each is also counted in Add and Destroy).
	// +optional
	Replace int32 `json:"replace"`

	// Resources are the addresses of the resources the plan changes.
	// +optional
	Resources []string `json:"resources,omitempty"`

	// ResourcesToReplace are the addresses of the resources the plan
	// destroys and creates again, as many as Resources lists.
	// +optional
	ResourcesToReplace []string `json:"resourcesToReplace,omitempty"`

	// ResourcesToDestroy are the addresses of the resources the plan
	// destroys without creating them again, as many as Resources lists.
	// Replacements are in ResourcesToReplace; a resource only removed from
	// the state ("forget") is in neither.
	// +optional
	ResourcesToDestroy []string `json:"resourcesToDestroy,omitempty"`

	// Import counts the existing resources the plan imports.
	// +optional
	Import int32 `json:"import"`

	// ResourcesToImport are the addresses of the resources the plan
	// imports, as many as Resources lists.
	// +optional
	ResourcesToImport []string `json:"resourcesToImport,omitempty"`

	// Engine is the engine version that made the plan when spec.engine
	// chose one; its apply runs with exactly this version.
	// +optional
	Engine *EngineStatus `json:"engine,omitempty"`

	// IsDestroy is true for a plan that destroys everything.
	// +optional
	IsDestroy bool `json:"isDestroy,omitempty"`

	// IsDrift is true when the plan repairs drift rather than applying a new
	// revision or spec.
	// +optional
	IsDrift bool `json:"isDrift,omitempty"`

	// PlannedAt is when the plan was made.
	// +optional
	PlannedAt *metav1.Time `json:"plannedAt,omitempty"`
}

// RunStatus records one run (plan, apply or destroy) in flight.
type RunStatus struct {
	// ID identifies the run on its runner.
	// +required
	ID string `json:"id"`

	// Action is plan, apply or destroy.
	// +kubebuilder:validation:Enum=plan;apply;destroy
	// +required
	Action string `json:"action"`

	// Plan is the id of the plan an apply applies.
	// +optional
	Plan string `json:"plan,omitempty"`

	// Runner identifies the runner serving the run (a Pod, or a local
	// process); empty while the run waits for a runner.
	// +optional
	Runner string `json:"runner,omitempty"`

	// Started is when the run was recorded.
	// +optional
	Started *metav1.Time `json:"started,omitempty"`

	// Revision is the source revision the run works on.
	// +optional
	Revision string `json:"revision,omitempty"`

	// InputsDigest identifies the inputs a plan run was made from.
	// +optional
	InputsDigest string `json:"inputsDigest,omitempty"`

	// Engine is the engine version the run uses when spec.engine chose
	// one: for a plan the one spec.engine resolved to, for an apply the
	// one that made its plan.
	// +optional
	Engine *EngineStatus `json:"engine,omitempty"`

	// ArtifactDigest is the digest of the source artifact an apply run
	// applies: the artifact kept once it succeeds.
	// +optional
	ArtifactDigest string `json:"artifactDigest,omitempty"`

	// Drift is true for a plan that checks applied inputs for drift.
	// +optional
	Drift bool `json:"drift,omitempty"`

	// Destroy is true for a plan of the destruction of everything: for
	// spec.destroy, or for deletion behind spec.destroyApproval manual.
	// +optional
	Destroy bool `json:"destroy,omitempty"`
}

// AppliedArtifactStatus identifies an applied source artifact and says
// whether the controller keeps a copy of it.
type AppliedArtifactStatus struct {
	// Revision is the source revision of the artifact.
	// +required
	Revision string `json:"revision"`

	// Digest is the artifact's digest, "<algorithm>:<hex>"; the kept copy
	// is used only when its bytes match it.
	// +required
	Digest string `json:"digest"`

	// Size of the artifact in bytes, once the controller has read it.
	// +optional
	Size int64 `json:"size,omitempty"`

	// Kept is true while a copy of the artifact is kept in Secrets
	// tfartifact-<name>-<i>. It is false when the artifact is larger than
	// the controller keeps (--kept-artifact-max-size) or could not be kept
	// yet (an ArtifactNotKept event says why).
	// +optional
	Kept bool `json:"kept,omitempty"`
}

// LockStatus describes who holds the state lock.
type LockStatus struct {
	// ID of the lock.
	// +optional
	ID string `json:"id,omitempty"`
	// Holder of the lock (who and which operation).
	// +optional
	Holder string `json:"holder,omitempty"`
	// Since when the lock is held, as the lock records it.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// Terraform runs a Terraform/OpenTofu module from a Flux source.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tf
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message"
// +kubebuilder:printcolumn:name="Plan",type="string",JSONPath=".status.plan.pending"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Terraform struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TerraformSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status TerraformStatus `json:"status,omitempty"`
}

// TerraformList is a list of Terraform objects.
// +kubebuilder:object:root=true
type TerraformList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Terraform `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Terraform{}, &TerraformList{})
}
