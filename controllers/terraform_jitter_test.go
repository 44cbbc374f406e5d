package controllers

import (
	"math/rand"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/jitter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// TestDriftChecksAreJittered: objects planned at the same moment get their
// next drift checks spread around the interval, within the percentage.
func TestDriftChecksAreJittered(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r := &TerraformReconciler{Now: func() time.Time { return now }, Jitter: jitter.Percent(0.05, rand.New(rand.NewSource(1)))}
	obj := &infrav1.Terraform{}
	obj.Spec.Interval = metav1.Duration{Duration: time.Hour}
	planned := metav1.NewTime(now)
	obj.Status.Plan = &infrav1.PlanStatus{PlannedAt: &planned}

	seen := map[time.Duration]bool{}
	for range 50 {
		d := r.nextCheck(obj).RequeueAfter
		if d < 57*time.Minute || d > 63*time.Minute {
			t.Fatalf("next check in %s: outside 1h ± 5%%", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 objects planned together check at only %d distinct moments", len(seen))
	}

	r.Jitter = nil
	if d := r.nextCheck(obj).RequeueAfter; d != time.Hour {
		t.Fatalf("without jitter the next check is in %s, want 1h", d)
	}
}
