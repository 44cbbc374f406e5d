package demo

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// previewName is the pull request's preview of the infrastructure, and
// its GitRepository's name.
const previewName = "app-infra-pr-1"

// previewPullRequest opens a pull request (branch pr-1: 40 GB) and makes
// what docs/previews.md's ResourceSet makes for it: a GitRepository on
// the branch and a preview of demo/app-infra. The preview plans against a
// snapshot of app-infra's state and is never applied; deleting it, as a
// closed pull request does, destroys nothing.
func previewPullRequest(ctx context.Context, w *walk) error {
	head, err := w.repo.CommitAndPushTo("refs/heads/pr-1", "demo: grow the database to 40 GB", map[string]string{infraPath: terraformManifest(40, w.opts.Node, w.opts.Env.CloudURL)})
	if err != nil {
		return err
	}
	w.say("pushed branch pr-1 with db_size_gb: 20 → 40 (commit %.10s)", head)
	c := w.opts.Env.Client
	gr := w.gitRepository(previewName, "pr-1")
	tf := previewObject(w, 40)
	for _, o := range []client.Object{gr, tf} {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
	}
	w.say("created GitRepository and Terraform demo/%s (spec.preview.stateFrom: app-infra), as a ResourceSet would", previewName)
	if err := w.poll(ctx, "the preview planned the pull request", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(tf), tf); err != nil {
			return false, err
		}
		p := tf.Status.Plan
		return p != nil && tf.Status.Preview != nil && bytes.Contains([]byte(p.Revision), []byte(head)), nil
	}); err != nil {
		return err
	}
	st := tf.Status.Preview
	w.say("preview plan %s against %s (state serial %d): +%d ~%d -%d, never applied",
		tf.Status.Plan.ID, st.Target, st.StateSerial, tf.Status.Plan.Add, tf.Status.Plan.Change, tf.Status.Plan.Destroy)
	summary, err := w.planPreviewEvent(ctx)
	if err != nil {
		return err
	}
	w.say("what a pull request comment shows (event PlanPreview):")
	for _, line := range strings.Split(strings.TrimSpace(summary), "\n") {
		w.say("| %s", line)
	}

	for _, o := range []client.Object{tf, gr} {
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if err := w.poll(ctx, "the closed pull request's preview is gone", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(tf), &infrav1.Terraform{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	dbs, err := w.cloud.ListDatabases(ctx)
	if err != nil {
		return err
	}
	if len(dbs) != 1 || dbs[0].SizeGB != 20 {
		return fmt.Errorf("the cloud's databases changed under a preview: %+v", dbs)
	}
	w.say("deleted the preview: nothing destroyed, the database still has 20 GB")
	return nil
}

// previewObject is the preview of the infrastructure with dbSizeGB.
func previewObject(w *walk, dbSizeGB int) *infrav1.Terraform {
	tf := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: previewName,
			Annotations: map[string]string{"event.toolkit.fluxcd.io/change_request": "1"}},
		Spec: infrav1.TerraformSpec{
			SourceRef:     infrav1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: previewName},
			Path:          "./modules/app-infra",
			Interval:      metav1.Duration{Duration: 10 * time.Minute},
			RetryInterval: &metav1.Duration{Duration: 10 * time.Second},
			Vars: []infrav1.Variable{
				{Name: "name", Value: jsonValue(`"demo"`)},
				{Name: "db_size_gb", Value: jsonValue(fmt.Sprint(dbSizeGB))},
			},
			Preview: &infrav1.PreviewSpec{StateFrom: &infrav1.PreviewTarget{Name: terraformName}},
		},
	}
	if w.opts.Node != nil {
		tf.Spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{
			Env: []corev1.EnvVar{{Name: "LANDFORM_CLOUD_ENDPOINT", Value: w.opts.Env.CloudURL}},
		}}
	}
	return tf
}

// planPreviewEvent is the message of the preview's PlanPreview event.
func (w *walk) planPreviewEvent(ctx context.Context) (string, error) {
	var msg string
	err := w.poll(ctx, "the PlanPreview event", func() (bool, error) {
		var list corev1.EventList
		if err := w.opts.Env.Client.List(ctx, &list, client.InNamespace(Namespace)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == previewName && e.Reason == infrav1.PlanPreviewReason {
				msg = e.Message
			}
		}
		return msg != "", nil
	})
	return msg, err
}

func jsonValue(raw string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(raw)} }
