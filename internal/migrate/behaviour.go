package migrate

import (
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/placement"
)

// What behaves differently without any field saying so: the report names
// it, and the object is set to keep tofu-controller's behaviour where that
// is safe.

// migratedTimeout is the migrated object's spec.timeout. tofu-controller
// never interrupted a plan or an apply, so Landform's default (20m) could
// cut short an apply that always ended there (a database often takes
// longer); nothing in tofu-controller's object says how long its applies
// take, so the bound is generous, and the report asks for the right one.
const migratedTimeout = 2 * time.Hour

// tofuRetryInterval is tofu-controller's default retryInterval
// (Terraform.GetRetryInterval).
const tofuRetryInterval = 15 * time.Second

// upgradedOnInit reports tofu-controller's init -upgrade.
func (c *converter) upgradedOnInit(what string) {
	c.note("%s: tofu-controller ran init -upgrade, taking at every run the newest providers the module's constraints allow; Landform's init never upgrades, so the module's committed .terraform.lock.hcl now pins them, "+
		"and a provider older than the one that last wrote the state can refuse to read it: bring the lock file up to date (terraform init -upgrade, commit it) before migrating. Without a committed lock file nothing changes", what)
}

// finishTimeouts bounds the phases and says how retries are paced.
func (c *converter) finishTimeouts() {
	spec := &c.out.Spec
	spec.Timeout = &metav1.Duration{Duration: migratedTimeout}
	c.note("spec.timeout is set to %s: tofu-controller never interrupted a plan or an apply, Landform interrupts each at spec.timeout (20m by default): set what the module's longest apply needs", migratedTimeout)
	if spec.RetryInterval == nil {
		landform := (&v1alpha1.Terraform{Spec: *spec}).GetRetryInterval()
		if landform != tofuRetryInterval {
			c.note("spec.retryInterval is not set: tofu-controller retried failures and waiting dependencies every %s, Landform every %s (spec.interval, at most 5m): set spec.retryInterval: %s to keep that pace", tofuRetryInterval, landform, tofuRetryInterval)
		}
	}
}

// finishApproval decides the migrated object's approval. approvePlan
// auto becomes manual unless kept: the first plan after a migration shows
// every difference the report states, and is read before it is applied.
func (c *converter) finishApproval(o Options) {
	if !c.autoApprove {
		return
	}
	if o.KeepAuto {
		c.out.Spec.ApprovePlan = v1alpha1.ApprovePlanAuto
		c.note("approvePlan auto is kept (--keep-auto): tofu-controller applied every plan; Landform holds one that destroys or replaces resources for approval (reason DestructivePlanPending, landform approve %s): set spec.autoApproveDestructive: true to apply those too", c.src.Name)
		return
	}
	c.note("approvePlan auto became manual approval for the first apply: its plan shows whatever the migration changed, read it (landform plan show %[1]s) and approve it (landform approve %[1]s), then set approvePlan: auto again once a plan has no changes you did not expect (--keep-auto keeps auto)", c.src.Name)
}

// checkRunnerPolicy runs the controller's own check of the runner Pod
// template (placement.Pod.Check with the default policy), so that a
// template the controller would refuse (RunnerPodTemplateNotAllowed) is
// reported here rather than found stalled after the apply.
func (c *converter) checkRunnerPolicy() {
	if c.out.Spec.RunnerPodTemplate == nil {
		return
	}
	err := (&placement.Pod{}).Check(c.out)
	var refused *placement.Error
	if errors.As(err, &refused) {
		c.note("the controller refuses this object's runner Pod with --runner=pod (%s), so it would stall before its first run: %s", refused.Reason, refused.Message)
	}
}

// finishVarsPrecedence says where variables now win differently against
// the module's own *.auto.tfvars files.
func (c *converter) finishVarsPrecedence() {
	if len(c.out.Spec.Vars) == 0 && len(c.out.Spec.VarsFrom) == 0 {
		return
	}
	c.note("spec.vars and varsFrom reach terraform as landform.auto.tfvars.json (tofu-controller: generated.auto.tfvars.json), and terraform lets the *.auto.tfvars file loaded last win: a module file named between the two (from generated.auto.tfvars.json to landform.auto.tfvars.json: h… to l…, say infra.auto.tfvars or k8s.auto.tfvars) won over these variables and now loses to them; check the module for such files")
}
