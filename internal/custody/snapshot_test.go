package custody

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/tfstate"
)

func previewOf(name, uid, targetNS, target string) *v1alpha1.Terraform {
	p := object(name, uid, 0, "")
	p.Spec.Preview = &v1alpha1.PreviewSpec{StateFrom: &v1alpha1.PreviewTarget{Name: target, Namespace: targetNS}}
	return p
}

// TestSnapshotCopiesTheTargetsStateOnlyWhenItChanged: the target's state
// is read, never written; the preview's own Secret gets a copy, once per
// state.
func TestSnapshotCopiesTheTargetsStateOnlyWhenItChanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	target := object("app", "uid-app", time.Hour, "")
	target.Status.LastAppliedPlan = "plan-1-abc"
	preview := previewOf("app-pr-7", "uid-pr", "", "app")
	state := tfstate.Compress([]byte(`{"version":4,"serial":42,"lineage":"lin-1","resources":[]}`))
	k, c := keeper(t, target, preview,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tfstate-default-app"}, Data: map[string][]byte{tfstate.DataKey: state}})
	g.Expect(k.Claim(ctx, preview)).To(Succeed())

	st, err := k.Snapshot(ctx, preview, nil, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Target).To(Equal("team/app"))
	g.Expect(st.StateSerial).To(Equal(int64(42)))
	g.Expect(st.StateLineage).To(Equal("lin-1"))
	g.Expect(st.TargetAppliedPlan).To(Equal("plan-1-abc"))
	g.Expect(st.SnapshotAt.Time).To(Equal(now))
	mine := stateSecret(t, c, "tfstate-default-app-pr-7")
	g.Expect(mine.Data[tfstate.DataKey]).To(Equal(state))
	targetRV := stateSecret(t, c, "tfstate-default-app").ResourceVersion

	again, err := k.Snapshot(ctx, preview, st, now.Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(st), "the same state: nothing written")
	g.Expect(stateSecret(t, c, "tfstate-default-app-pr-7").ResourceVersion).To(Equal(mine.ResourceVersion))
	g.Expect(stateSecret(t, c, "tfstate-default-app").ResourceVersion).To(Equal(targetRV))
}

func TestSnapshotRefusals(t *testing.T) {
	ctx := context.Background()
	custom := object("vault", "uid-v", time.Hour, "")
	custom.Spec.BackendConfig = &v1alpha1.BackendConfig{CustomConfiguration: `backend "s3" {}`}
	elsewhere := object("app", "uid-e", time.Hour, "")
	elsewhere.Namespace = "prod"
	for name, tc := range map[string]struct {
		preview *v1alpha1.Terraform
		reason  string
		says    string
	}{
		"missing":         {previewOf("p1", "u1", "", "nothing"), v1alpha1.PreviewTargetNotFoundReason, "does not exist"},
		"custom backend":  {previewOf("p2", "u2", "", "vault"), v1alpha1.PreviewBackendUnsupportedReason, "custom backend"},
		"another ns":      {previewOf("p3", "u3", "prod", "app"), v1alpha1.CrossNamespaceRefDeniedReason, "kubectl label namespace prod infra.landform.dev/previews-from=team"},
		"ungranted label": {previewOf("p4", "u4", "other", "app"), v1alpha1.CrossNamespaceRefDeniedReason, "does not grant"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			k, _ := keeper(t, custom, elsewhere, tc.preview,
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{v1alpha1.PreviewsFromLabel: "somebody-else"}}})
			_, err := k.Snapshot(ctx, tc.preview, nil, time.Now())
			var refused *SnapshotRefusedError
			g.Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
			g.Expect(refused.Reason).To(Equal(tc.reason))
			g.Expect(refused.Message).To(ContainSubstring(tc.says))
		})
	}
}

// TestPreviewOnly reads the namespace's label; a namespace gone admits
// nothing of its own anyway.
func TestPreviewOnly(t *testing.T) {
	g := NewWithT(t)
	k, _ := keeper(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prs", Labels: map[string]string{v1alpha1.PreviewOnlyLabel: "true"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}})
	for ns, want := range map[string]bool{"prs": true, "infra": false, "gone": false} {
		only, err := k.PreviewOnly(context.Background(), ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(only).To(Equal(want), ns)
	}
}
