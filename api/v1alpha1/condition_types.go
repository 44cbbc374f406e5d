package v1alpha1

// Condition types beside kstatus' Ready, Reconciling and Stalled.
const (
	// PlannedCondition is True while a plan waits for approval or was made.
	PlannedCondition = "Planned"
	// AppliedCondition is True when the last approved plan was applied.
	AppliedCondition = "Applied"
	// DriftedCondition is True when a drift-check plan found changes.
	DriftedCondition = "Drifted"
	// StateLockedCondition is True while the state lock blocks a run.
	StateLockedCondition = "StateLocked"
	// OutputsWrittenCondition is True when the outputs Secret is up to date.
	OutputsWrittenCondition = "OutputsWritten"
)

// Condition reasons.
const (
	// ReconciliationSucceededReason: everything applied and written.
	ReconciliationSucceededReason = "ReconciliationSucceeded"
	// ProgressingReason: a step is under way.
	ProgressingReason = "Progressing"
	// ProgressingWithRetryReason: Reconciling while a failure is retried
	// (Ready carries the failure's reason), as Flux's controllers say it.
	ProgressingWithRetryReason = "ProgressingWithRetry"
	// SuspendedReason: spec.suspend is true.
	SuspendedReason = "Suspended"
	// DependencyNotReadyReason: a dependsOn object is not Ready.
	DependencyNotReadyReason = "DependencyNotReady"
	// SourceNotFoundReason: the source object does not exist.
	SourceNotFoundReason = "SourceNotFound"
	// SourceKindNotServedReason: the API server does not serve the source's
	// kind (the Flux installed is too old, or lacks that kind).
	SourceKindNotServedReason = "SourceKindNotServed"
	// SourceNotReadyReason: the source has no artifact yet.
	SourceNotReadyReason = "SourceNotReady"
	// ArtifactFailedReason: the artifact could not be downloaded.
	ArtifactFailedReason = "ArtifactFailed"
	// DigestMismatchReason: the artifact's digest is not the advertised one.
	DigestMismatchReason = "ArtifactDigestMismatch"
	// InvalidPathReason: spec.path escapes the artifact or does not exist.
	InvalidPathReason = "InvalidPath"
	// VarsNotFoundReason: a varsFrom object or key is missing.
	VarsNotFoundReason = "VarsNotFound"
	// InputNotReadyReason: a field that varsFrom or an import's idFrom
	// reads from an object is absent or empty; the module is planned as
	// soon as it is set (the object is watched).
	InputNotReadyReason = "InputNotReady"
	// InputNotFoundReason: the object that varsFrom's fields or an
	// import's idFrom reads does not exist, or its kind is not served.
	InputNotFoundReason = "InputNotFound"
	// InvalidInputPathReason: a varsFrom field's or idFrom's path is not
	// valid JSONPath, or names a field of a Secret (by any spelling of its
	// kind), which is never read into status.inputs.
	InvalidInputPathReason = "InvalidInputPath"
	// InputForbiddenReason: the controller may not read (get, list and
	// watch) the kind an input names; grant it (the chart's inputKinds).
	InputForbiddenReason = "InputForbidden"
	// ImportUnsupportedReason: spec.imports needs an engine with import
	// blocks (OpenTofu or Terraform 1.5 or later).
	ImportUnsupportedReason = "ImportUnsupported"
	// EngineNotFoundReason: spec.engine's version constraint matches no
	// version the release source offers, or the source cannot be reached
	// to resolve it or to download the version.
	EngineNotFoundReason = "EngineNotFound"
	// EngineVerificationFailedReason: a downloaded engine did not match its
	// checksums, or their signature did not verify with the configured key;
	// nothing ran.
	EngineVerificationFailedReason = "EngineVerificationFailed"
	// InvalidConfigurationReason: the module does not parse or validate.
	InvalidConfigurationReason = "InvalidConfiguration"
	// MissingVariableReason: a required variable has no value.
	MissingVariableReason = "MissingVariable"
	// PlanFailedReason: terraform plan failed.
	PlanFailedReason = "PlanFailed"
	// PlanPendingReason: a plan waits for approval.
	PlanPendingReason = "PlanPending"
	// DestructivePlanPendingReason: a plan that destroys or replaces
	// resources waits for the approval of its id although approvePlan is
	// "auto" (spec.autoApproveDestructive is not set). The message names
	// the resources and how to approve.
	DestructivePlanPendingReason = "DestructivePlanPending"
	// PlannedNoChangesReason: the plan has nothing to do.
	PlannedNoChangesReason = "NoChanges"
	// PlannedWithChangesReason: the plan has changes.
	PlannedWithChangesReason = "ChangesPlanned"
	// ApprovalMismatchReason: an approval names a plan that is not pending.
	ApprovalMismatchReason = "ApprovalMismatch"
	// ApplyFailedReason: terraform apply failed.
	ApplyFailedReason = "ApplyFailed"
	// AppliedReason: the plan was applied.
	AppliedReason = "Applied"
	// DriftDetectedReason: a drift-check plan found changes.
	DriftDetectedReason = "DriftDetected"
	// NoDriftReason: the last drift check found nothing.
	NoDriftReason = "NoDrift"
	// StateLockedReason: the state is locked by another run.
	StateLockedReason = "StateLocked"
	// OutputsWrittenReason: outputs were written.
	OutputsWrittenReason = "OutputsWritten"
	// OutputSecretConflictReason: the outputs Secret belongs to someone else.
	OutputSecretConflictReason = "OutputSecretConflict"
	// OutputsFailedReason: outputs could not be read or written.
	OutputsFailedReason = "OutputsFailed"
	// RunnerFailedReason: the runner could not be started or reached.
	RunnerFailedReason = "RunnerFailed"
	// RunnerServiceAccountMissingReason: the runner Pod's ServiceAccount does
	// not exist in the object's namespace.
	RunnerServiceAccountMissingReason = "RunnerServiceAccountMissing"
	// RunnerStartTimeoutReason: the runner Pod did not run and answer in
	// time (unschedulable, image not pulled, ...).
	RunnerStartTimeoutReason = "RunnerStartTimeout"
	// DestroyFailedReason: destroying on deletion failed.
	DestroyFailedReason = "DestroyFailed"
	// CrossNamespaceRefDeniedReason: a reference to another namespace was
	// refused (the controller runs with --no-cross-namespace-refs, the default).
	CrossNamespaceRefDeniedReason = "CrossNamespaceRefDenied"
	// DeletingReason: the object is being deleted.
	DeletingReason = "Deleting"
	// RunInProgressReason: a run (plan, apply, destroy) is under way.
	RunInProgressReason = "RunInProgress"
	// RunQueuedReason: a run waits for a free run slot (--concurrent-runs).
	RunQueuedReason = "RunQueued"
	// RunLostReason: the runner of a run went away before reporting its
	// end; the lock it left is released when provably its and the object
	// plans again.
	RunLostReason = "RunLost"
	// PlanTimeoutReason: init and plan ran out of spec.timeout.
	PlanTimeoutReason = "PlanTimeout"
	// ApplyTimeoutReason: the apply ran out of spec.timeout.
	ApplyTimeoutReason = "ApplyTimeout"
	// DestroyTimeoutReason: the destroy ran out of spec.timeout.
	DestroyTimeoutReason = "DestroyTimeout"
	// StateLockReleasedReason: a lock left by a runner that is provably
	// gone was released.
	StateLockReleasedReason = "StateLockReleased"
	// PlanUnusableReason: the stored plan cannot be applied (stale, made by
	// another engine version, its dependency lock or its stored bytes do
	// not match); it is dropped and the module planned again.
	PlanUnusableReason = "PlanUnusable"
	// ShuttingDownReason: the controller is shutting down and starts no run.
	ShuttingDownReason = "ShuttingDown"
	// PlanDigestMismatchReason: the stored plan's bytes are not those the
	// controller stored (status.plan.digest): it was changed after it was
	// made. It is not applied; it is dropped and the module planned again.
	PlanDigestMismatchReason = "PlanDigestMismatch"
	// ArtifactNotKeptReason: the applied artifact could not be kept for
	// a destroy after its source is gone (too large, or not at hand).
	ArtifactNotKeptReason = "ArtifactNotKept"
	// RunnerImageNotAllowedReason: spec.runnerPodTemplate.spec.image is not
	// under the controller's allowed image prefixes
	// (--allowed-runner-images). Nothing runs until the spec changes.
	RunnerImageNotAllowedReason = "RunnerImageNotAllowed"
	// RunnerServiceAccountNotAllowedReason: spec.serviceAccountName names a
	// ServiceAccount other than the default, which the controller enforces
	// (--enforce-default-service-account).
	RunnerServiceAccountNotAllowedReason = "RunnerServiceAccountNotAllowed"
	// RunnerPodTemplateNotAllowedReason: spec.runnerPodTemplate reaches the
	// node (a hostPath volume, ...), sets a security profile or shadows the
	// runner's own mounts.
	RunnerPodTemplateNotAllowedReason = "RunnerPodTemplateNotAllowed"
	// StatePersistRetryingReason: an apply or destroy could not write the
	// state to the backend (the API server or the backend was away); its
	// runner keeps that state and retries writing it until the run's
	// deadline, and the run goes on meanwhile.
	StatePersistRetryingReason = "StatePersistRetrying"
	// StatePersistedReason: Landform wrote a state the engine could not
	// save to the backend (an event).
	StatePersistedReason = "StatePersisted"
	// StateUnsavedReason: a state the engine could not save is kept in
	// Secret tfunsaved-<name>-0 and not written yet: nothing plans
	// before it is written, which Landform does before the next run
	// unless the backend refuses it; then `landform state push` decides.
	StateUnsavedReason = "StateUnsaved"
	// StateOwnedElsewhereReason: the state this object's backend settings
	// resolve to (its state Secret or Lease) belongs to another live
	// Terraform object, or is a kept copy of another object's state.
	// Nothing runs, and deleting this object neither destroys nor deletes
	// that state; give it its own state (spec.backendConfig.secretSuffix
	// or spec.workspace), or delete the owner first.
	StateOwnedElsewhereReason = "StateOwnedElsewhere"
	// NamespaceTerminatingReason: the object's namespace is being deleted
	// and its deletion cannot destroy the resources there (no runner Pod
	// may start in it), or would lose the state the resources need
	// (deletionPolicy Orphan). The state Secret is kept (StateFinalizer)
	// until a person saves and releases it; the message says how.
	NamespaceTerminatingReason = "NamespaceTerminating"
)

// Annotations and labels.
const (
	// ApproveAnnotation approves the pending plan whose id is its value.
	ApproveAnnotation = "infra.landform.dev/approve"
	// Finalizer guards destroy on deletion.
	Finalizer = "infra.landform.dev/finalizer"
	// StateFinalizer keeps an object's state Secret while the object
	// lives: deleting the namespace would otherwise sweep the state before
	// the destroy ran. Removed when deletion destroyed or released the
	// state, or by a person who saved it.
	StateFinalizer = "infra.landform.dev/state"
	// ManagedByLabel marks Secrets Landform owns.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedByLabel's value.
	ManagedByValue = "landform"
	// OwnerNameLabel names the Terraform object owning a Secret.
	OwnerNameLabel = "infra.landform.dev/terraform"
	// OwnerUIDLabel holds the UID of the Terraform object that owns a
	// state Secret, its Lease or a kept state version: what is deleted or
	// written for an object is found by it, never by a name alone.
	OwnerUIDLabel = "infra.landform.dev/owner-uid"
	// OwnerAnnotation holds the full name of the object OwnerUIDLabel
	// names (a label value may be cut), so a second claimant can say who
	// owns the state and whether that owner still lives.
	OwnerAnnotation = "infra.landform.dev/owner"
	// RunLabel holds the run id on a runner Pod, so that a restarted
	// controller finds the Pod serving the run recorded in status.run.
	RunLabel = "infra.landform.dev/run"
	// ApprovePlanAuto is spec.approvePlan's value for automatic approval.
	ApprovePlanAuto = "auto"
)
