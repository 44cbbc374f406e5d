package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	defaultInterval      = 10 * time.Minute
	defaultTimeout       = 20 * time.Minute
	maxDefaultRetry      = 5 * time.Minute
	defaultWorkspace     = "default"
	defaultRunnerAccount = "landform-runner"
)

// GetConditions returns the status conditions.
func (in *Terraform) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions.
func (in *Terraform) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetRequeueAfter is the drift-check interval.
func (in *Terraform) GetRequeueAfter() time.Duration { return in.GetInterval() }

// GetInterval is spec.interval, defaulted.
func (in *Terraform) GetInterval() time.Duration {
	if in.Spec.Interval.Duration > 0 {
		return in.Spec.Interval.Duration
	}
	return defaultInterval
}

// GetRetryInterval is spec.retryInterval, or the interval capped at five minutes.
func (in *Terraform) GetRetryInterval() time.Duration {
	if in.Spec.RetryInterval != nil && in.Spec.RetryInterval.Duration > 0 {
		return in.Spec.RetryInterval.Duration
	}
	return min(in.GetInterval(), maxDefaultRetry)
}

// GetTimeout is spec.timeout, defaulted.
func (in *Terraform) GetTimeout() time.Duration {
	if in.Spec.Timeout != nil && in.Spec.Timeout.Duration > 0 {
		return in.Spec.Timeout.Duration
	}
	return defaultTimeout
}

// GetWorkspace is spec.workspace, defaulted.
func (in *Terraform) GetWorkspace() string {
	if in.Spec.Workspace != "" {
		return in.Spec.Workspace
	}
	return defaultWorkspace
}

// GetDeletionPolicy is spec.deletionPolicy, defaulted; Orphan for a
// preview, which is never destroyed: it planned against another object's
// resources.
func (in *Terraform) GetDeletionPolicy() DeletionPolicy {
	if in.IsPreview() {
		return DeletionPolicyOrphan
	}
	if in.Spec.DeletionPolicy != "" {
		return in.Spec.DeletionPolicy
	}
	return DeletionPolicyDelete
}

// GetServiceAccountName is the runner Pod's ServiceAccount, defaulted.
func (in *Terraform) GetServiceAccountName() string {
	if in.Spec.ServiceAccountName != "" {
		return in.Spec.ServiceAccountName
	}
	return defaultRunnerAccount
}

// GetSourceNamespace is the source's namespace, defaulted to the object's.
func (in *Terraform) GetSourceNamespace() string {
	if in.Spec.SourceRef.Namespace != "" {
		return in.Spec.SourceRef.Namespace
	}
	return in.Namespace
}

// ApprovesPlan reports a person's approval of exactly plan id: the
// approve annotation, or spec.approvePlan committed to Git.
func (in *Terraform) ApprovesPlan(id string) bool {
	return id != "" && (in.Spec.ApprovePlan == id || in.GetAnnotations()[ApproveAnnotation] == id)
}

// IsAutoApprove reports whether every plan is applied without approval.
func (in *Terraform) IsAutoApprove() bool { return in.Spec.ApprovePlan == ApprovePlanAuto }

// PendingPlan is the id of the plan waiting for approval, if any.
func (in *Terraform) PendingPlan() string {
	if in.Status.Plan == nil {
		return ""
	}
	return in.Status.Plan.Pending
}

// DestroyApprovalManual is spec.destroyApproval's value for gated deletion.
const DestroyApprovalManual = "manual"

// IsDestroyGated reports whether deletion waits for an approved destroy
// plan.
func (in *Terraform) IsDestroyGated() bool { return in.Spec.DestroyApproval == DestroyApprovalManual }
