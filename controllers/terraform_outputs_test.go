package controllers

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Only an outputs Secret the object wrote before its current generation,
// or whose last write failed, may still carry its owner reference: those
// alone are read to release it when deletionPolicy is Orphan.
func TestMayHoldReference(t *testing.T) {
	at := func(generation int64, mark func(*infrav1.Terraform)) *infrav1.Terraform {
		obj := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		if mark != nil {
			mark(obj)
		}
		obj.Generation = 2
		return obj
	}
	written := func(obj *infrav1.Terraform) {
		conditions.MarkTrue(obj, infrav1.OutputsWrittenCondition, infrav1.OutputsWrittenReason, "wrote 2 outputs to Secret db-outputs")
	}
	failed := func(obj *infrav1.Terraform) {
		conditions.MarkFalse(obj, infrav1.OutputsWrittenCondition, infrav1.OutputsFailedReason, "writing outputs: boom")
	}
	for _, c := range []struct {
		name string
		obj  *infrav1.Terraform
		want bool
	}{
		{"never written", at(2, nil), false},
		{"written at this generation", at(2, written), false},
		{"written before the switch", at(1, written), true},
		{"last write failed", at(2, failed), true},
	} {
		if got := mayHoldReference(c.obj); got != c.want {
			t.Errorf("%s: %t, want %t", c.name, got, c.want)
		}
	}
}
