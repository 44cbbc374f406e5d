package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/cli"
	"github.com/landform-dev/landform/internal/cloud"
	"github.com/landform-dev/landform/internal/gitops"
)

func pushManifests(ctx context.Context, w *walk) error {
	repo, err := gitops.Clone(w.opts.Env.GitURL)
	if err != nil {
		return err
	}
	w.repo = repo
	app := appManifest
	if n := w.opts.Node; n != nil {
		app = nodeAppManifest(n.AppImage, w.opts.Env.CloudURL)
	}
	head, err := repo.CommitAndPush("demo: infrastructure and app", map[string]string{
		infraPath: terraformManifest(10, w.opts.Node, w.opts.Env.CloudURL),
		appPath:   app,
	})
	if err != nil {
		return err
	}
	w.say("pushed %s and %s to %s (commit %.10s)", infraPath, appPath, w.opts.Env.GitURL, head)

	c := w.opts.Env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	gr := w.gitRepository(repoName, "main")
	if err := c.Create(ctx, gr); err != nil {
		return fmt.Errorf("creating GitRepository: %w", err)
	}
	return w.poll(ctx, "GitRepository demo/landform has the pushed commit", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gr), gr); err != nil {
			return false, err
		}
		return gr.Status.Artifact != nil && bytes.Contains([]byte(gr.Status.Artifact.Revision), []byte(head)), nil
	})
}

func createInfra(ctx context.Context, w *walk) error {
	if err := w.createKustomization(ctx, "infra", "./demo/infra", map[string]any{
		"healthChecks": []any{map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.TerraformKind,
			"name": terraformName, "namespace": Namespace,
		}},
	}); err != nil {
		return err
	}
	w.say("Kustomization demo/infra applies %s and health-checks Terraform demo/%s", infraPath, terraformName)
	tf, err := w.waitPlan(ctx, "")
	if err != nil {
		return err
	}
	p := tf.Status.Plan
	w.say("plan %s waits for approval: +%d ~%d -%d (%v)", p.Pending, p.Add, p.Change, p.Destroy, p.Resources)
	return nil
}

func createApp(ctx context.Context, w *walk) error {
	if w.opts.Node != nil {
		return createNodeApp(ctx, w)
	}
	if err := w.createKustomization(ctx, "app", "./demo/app", map[string]any{
		"dependsOn": []any{map[string]any{"name": "infra"}},
		"postBuild": map[string]any{"substituteFrom": []any{map[string]any{"kind": "Secret", "name": outputsSecret}}},
	}); err != nil {
		return err
	}
	w.say("Kustomization demo/app dependsOn demo/infra and substitutes the outputs from Secret %s", outputsSecret)
	ks, err := w.kustomization(ctx, "app")
	if err != nil {
		return err
	}
	w.say("it waits: %s", gitops.ReadyMessage(ks))
	return nil
}

func approveFirstPlan(ctx context.Context, w *walk) error {
	if err := w.approve(ctx); err != nil {
		return err
	}
	tf, err := w.waitApplied(ctx)
	if err != nil {
		return err
	}
	w.say("applied %s; Terraform demo/%s is Ready", tf.Status.LastAppliedPlan, terraformName)
	sgs, dbs, err := w.inCloud(ctx)
	if err != nil {
		return err
	}
	if len(sgs) != 1 || len(dbs) != 1 {
		return fmt.Errorf("the cloud holds %d security groups and %d databases, want 1 and 1", len(sgs), len(dbs))
	}
	w.sgID = sgs[0].ID
	w.say("the cloud holds security group %s and database %s (%d GB)", sgs[0].ID, dbs[0].ID, dbs[0].SizeGB)
	if err := w.checkSecret(ctx, "10"); err != nil {
		return err
	}
	return w.checkApp(ctx, "10")
}

func pushChange(ctx context.Context, w *walk) error {
	head, err := w.repo.CommitAndPush("demo: grow the database to 20 GB", map[string]string{infraPath: terraformManifest(20, w.opts.Node, w.opts.Env.CloudURL)})
	if err != nil {
		return err
	}
	w.say("pushed db_size_gb: 10 → 20 (commit %.10s)", head)
	tf, err := w.waitPlan(ctx, head)
	if err != nil {
		return err
	}
	p := tf.Status.Plan
	w.say("new plan %s for the new revision: +%d ~%d -%d (%v)", p.Pending, p.Add, p.Change, p.Destroy, p.Resources)
	if err := w.approve(ctx); err != nil {
		return err
	}
	if _, err := w.waitApplied(ctx); err != nil {
		return err
	}
	if err := w.poll(ctx, "the cloud's database has 20 GB", func() (bool, error) {
		dbs, err := w.cloud.ListDatabases(ctx)
		return err == nil && len(dbs) == 1 && dbs[0].SizeGB == 20, err
	}); err != nil {
		return err
	}
	if err := w.checkSecret(ctx, "20"); err != nil {
		return err
	}
	if err := w.checkApp(ctx, "20"); err != nil {
		return err
	}
	w.say("where the app's values come from, with `landform trace deployment/app`:")
	return w.landform(ctx, "trace", "deployment/app")
}

func deleteAll(ctx context.Context, w *walk) error {
	for _, name := range []string{"app", "infra"} {
		ks := gitops.Kustomization(Namespace, name)
		if err := w.opts.Env.Client.Delete(ctx, ks); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	w.say("deleted the Kustomizations: Flux prunes the Deployment and the Terraform object; Landform destroys under its finalizer")
	tf := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: terraformName}}
	if err := w.poll(ctx, "Terraform demo/app-infra is gone", func() (bool, error) {
		err := w.opts.Env.Client.Get(ctx, client.ObjectKeyFromObject(tf), tf)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	sgs, dbs, err := w.inCloud(ctx)
	if err != nil {
		return err
	}
	if len(sgs)+len(dbs) != 0 {
		return fmt.Errorf("the cloud still holds %d security groups and %d databases", len(sgs), len(dbs))
	}
	w.say("the cloud is empty again")
	return nil
}

// gitRepository is a GitRepository named name of the dev git server's
// repository at branch.
func (w *walk) gitRepository(name, branch string) *sourcev1.GitRepository {
	return &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
		Spec: sourcev1.GitRepositorySpec{
			URL:       w.opts.Env.GitURL,
			Interval:  metav1.Duration{Duration: 5 * time.Second},
			Reference: &sourcev1.GitRepositoryRef{Branch: branch},
		},
	}
}

// approve runs `landform approve` on the pending plan, as a user would.
func (w *walk) approve(ctx context.Context) error {
	return w.landform(ctx, "approve", terraformName, "--yes")
}

// landform runs the landform CLI in the demo's namespace, as a user
// would, and shows what it prints.
func (w *walk) landform(ctx context.Context, args ...string) error {
	var out bytes.Buffer
	err := cli.Execute(ctx, cli.Options{
		Streams:     genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out},
		DisplayName: "landform",
	}, append(args, "-n", Namespace, "--kubeconfig", w.opts.Env.Kubeconfig))
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		w.say("| %s", line)
	}
	if err != nil {
		return fmt.Errorf("landform %s: %w", args[0], err)
	}
	return nil
}

// waitPlan waits for a pending plan made from a revision containing commit.
func (w *walk) waitPlan(ctx context.Context, commit string) (*infrav1.Terraform, error) {
	tf := &infrav1.Terraform{}
	err := w.poll(ctx, "a plan waits for approval", func() (bool, error) {
		if err := w.opts.Env.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: terraformName}, tf); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		p := tf.Status.Plan
		return p != nil && p.Pending != "" && bytes.Contains([]byte(p.Revision), []byte(commit)), nil
	})
	return tf, err
}

// waitApplied waits until the pending plan is applied and the object Ready.
func (w *walk) waitApplied(ctx context.Context) (*infrav1.Terraform, error) {
	tf := &infrav1.Terraform{}
	err := w.poll(ctx, "the plan is applied", func() (bool, error) {
		if err := w.opts.Env.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: terraformName}, tf); err != nil {
			return false, err
		}
		if conditions.IsStalled(tf) {
			return false, errors.New(conditions.GetMessage(tf, meta.ReadyCondition))
		}
		return conditions.IsReady(tf) && tf.PendingPlan() == "" && tf.Status.LastAppliedRevision == tf.Status.LastAttemptedRevision, nil
	})
	return tf, err
}

// checkSecret checks the outputs Secret without printing the DSN.
func (w *walk) checkSecret(ctx context.Context, sizeGB string) error {
	return w.poll(ctx, "Secret app-infra-outputs holds the outputs", func() (bool, error) {
		s := &corev1.Secret{}
		if err := w.opts.Env.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: outputsSecret}, s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		ok := string(s.Data["security_group_id"]) == w.sgID && string(s.Data["db_size_gb"]) == sizeGB &&
			bytes.HasPrefix(s.Data["dsn"], []byte("postgres://"))
		if ok {
			w.say("Secret %s: security_group_id=%s db_size_gb=%s dsn=(sensitive, %d bytes)", outputsSecret, w.sgID, sizeGB, len(s.Data["dsn"]))
		}
		return ok, nil
	})
}

// checkApp checks that the app's Deployment carries the substituted outputs.
func (w *walk) checkApp(ctx context.Context, sizeGB string) error {
	err := w.poll(ctx, "the app's Deployment carries the outputs", func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := w.opts.Env.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: "app"}, d); err != nil {
			if apierrors.IsNotFound(err) {
				if err := w.requestReconcile(ctx, "app"); err != nil {
					return false, err
				}
			}
			return false, client.IgnoreNotFound(err)
		}
		ok := d.Annotations["landform.dev/security-group"] == w.sgID && d.Annotations["landform.dev/db-size"] == sizeGB+"GB"
		if !ok {
			return false, w.requestReconcile(ctx, "app")
		}
		if w.opts.Node == nil {
			w.say("Deployment demo/app: security group %s, db size %s GB, DSN from Secret %s (no kubelet here: the Deployment runs no Pods)", w.sgID, sizeGB, outputsSecret)
			return true, nil
		}
		w.say("Deployment demo/app: security group %s, db size %s GB (substituted by Flux)", w.sgID, sizeGB)
		return true, nil
	})
	if err != nil || w.opts.Node == nil {
		return err
	}
	return w.checkAppPod(ctx)
}

// poll checks cond every second until it holds, fails, or ctx ends.
func (w *walk) poll(ctx context.Context, what string, cond func() (bool, error)) error {
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		return fmt.Errorf("waiting until %s: %w", what, err)
	}
	return nil
}

func (w *walk) createKustomization(ctx context.Context, name, path string, extra map[string]any) error {
	spec := map[string]any{
		"interval":      "1m",
		"retryInterval": "5s",
		"timeout":       "3m",
		"path":          path,
		"prune":         true,
		"sourceRef":     map[string]any{"kind": "GitRepository", "name": repoName},
	}
	for k, v := range extra {
		spec[k] = v
	}
	if err := w.opts.Env.Client.Create(ctx, gitops.NewKustomization(Namespace, name, spec)); err != nil {
		return fmt.Errorf("creating Kustomization %s: %w", name, err)
	}
	return nil
}

func (w *walk) kustomization(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	ks := gitops.Kustomization(Namespace, name)
	err := w.opts.Env.Client.Get(ctx, client.ObjectKeyFromObject(ks), ks)
	return ks, err
}

// requestReconcile asks kustomize-controller to reconcile now instead of at
// its retry interval.
func (w *walk) requestReconcile(ctx context.Context, name string) error {
	return gitops.RequestReconcile(ctx, w.opts.Env.Client, gitops.Kustomization(Namespace, name))
}

// inCloud is what the stand-in cloud holds.
func (w *walk) inCloud(ctx context.Context) ([]cloud.SecurityGroup, []cloud.Database, error) {
	sgs, err := w.cloud.ListSecurityGroups(ctx)
	if err != nil {
		return nil, nil, err
	}
	dbs, err := w.cloud.ListDatabases(ctx)
	return sgs, dbs, err
}
