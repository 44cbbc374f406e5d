package migrate

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
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
