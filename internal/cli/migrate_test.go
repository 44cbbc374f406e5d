package cli

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// The tofu-controller examples the migrate package converts.
var migrateExamples = []string{
	"auto-approve.yaml", "manual-approve.yaml", "outputs-to-secret.yaml", "vars-from.yaml",
	"backend-secret-suffix.yaml", "destroy-on-deletion.yaml", "depends-on.yaml", "runner-pod-template.yaml", "everything.yaml",
	"runner-env.yaml", "upgrade-on-init.yaml", "engine.yaml",
}

func exampleFile(name string) string { return filepath.Join("..", "migrate", "testdata", name) }

// migrated decodes the YAML stream `migrate` prints, strictly: a field
// Landform's API does not have fails.
func migrated(t *testing.T, stream string) []*v1alpha1.Terraform {
	t.Helper()
	var objs []*v1alpha1.Terraform
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "---" {
			continue
		}
		obj := &v1alpha1.Terraform{}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("not a Landform Terraform: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

// Every example migrates into objects the real API server accepts under
// Landform's CRD (schema, patterns, CEL rules), with the Orphan warning.
func TestMigrateExamplesAreAcceptedByTheAPIServer(t *testing.T) {
	ns := namespace(t, "migrate-files")
	args := []string{"migrate"}
	for _, f := range migrateExamples {
		args = append(args, "-f", exampleFile(f))
	}
	res := run(t, "", args...)
	if res.err != nil {
		t.Fatalf("migrate: %v\n%s", res.err, res.stderr)
	}
	objs := migrated(t, res.stdout)
	if len(objs) != 26 {
		t.Fatalf("migrated %d objects, want 26:\n%s", len(objs), res.stdout)
	}
	for _, obj := range objs {
		obj.Namespace = ns // the examples' flux-system is not this test's
		if obj.Spec.SourceRef.Namespace != "" {
			obj.Spec.SourceRef.Namespace = ns
		}
		// Dry run: validated and admitted in full, not stored (several
		// examples share a name).
		if err := env.Client.Create(context.Background(), obj, client.DryRunAll); err != nil {
			t.Errorf("the API server refuses migrated %s: %v", obj.Name, err)
		}
	}
	for _, want := range []string{
		"WARNING: tofu-controller KEEPS a Terraform object's resources",
		"    - spec.healthChecks: ",
		"adopts Secret tfstate-staging-hello-state in flux-system",
		"Migrated 26 tofu-controller Terraform object(s)",
		"skipped: " + exampleFile("auto-approve.yaml") + " GitRepository flux-system/helloworld",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stdout, "WARNING") {
		t.Errorf("the report went to stdout:\n%s", res.stdout)
	}
}

// -f - reads stdin; --deletion-policy applies to every object.
func TestMigrateStdinAndDeletionPolicy(t *testing.T) {
	in, err := os.ReadFile(exampleFile("auto-approve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, string(in), "migrate", "-f", "-", "--deletion-policy=Delete")
	if res.err != nil {
		t.Fatalf("migrate: %v\n%s", res.err, res.stderr)
	}
	objs := migrated(t, res.stdout)
	if len(objs) != 1 || objs[0].Spec.DeletionPolicy != v1alpha1.DeletionPolicyDelete {
		t.Fatalf("migrated %+v", objs)
	}
	if !strings.Contains(res.stderr, "WARNING: --deletion-policy=Delete: deleting these objects DESTROYS their resources") ||
		strings.Contains(res.stderr, "tofu-controller KEEPS") {
		t.Errorf("stderr:\n%s", res.stderr)
	}
}

func TestMigrateErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "-f", exampleFile("auto-approve.yaml"), "--deletion-policy=Keep"}, `--deletion-policy "Keep": use Delete or Orphan`},
		{[]string{"migrate", "-f", exampleFile("auto-approve.yaml"), "helloworld"}, "NAME and -A select objects in the cluster"},
		{[]string{"migrate", "-f", exampleFile("refused.yaml")}, "3 of 3 objects not migrated: the report says why"},
		{[]string{"migrate", "-f", "does-not-exist.yaml"}, "reading does-not-exist.yaml"},
	}
	for _, tt := range tests {
		res := run(t, "", tt.args...)
		if res.err == nil || !strings.Contains(res.err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, res.err, tt.want)
		}
	}
	res := run(t, "", "migrate", "-f", exampleFile("refused.yaml"))
	if res.stdout != "" {
		t.Errorf("refused objects were written:\n%s", res.stdout)
	}
	for _, want := range []string{"team-a/odd-suffix (" + exampleFile("refused.yaml") + "): NOT MIGRATED", "Copy that Secret to tfstate-default-odd-suffix"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, res.stderr)
		}
	}
}

// installTofuCRD serves tofu-controller's Terraform kind (its schema kept
// open: the test writes what tofu-controller's CRD accepts).
func installTofuCRD(t *testing.T) {
	t.Helper()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "terraforms.infra.contrib.fluxcd.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "infra.contrib.fluxcd.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Terraform", ListKind: "TerraformList", Plural: "terraforms", Singular: "terraform"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha2", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
			}},
		},
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}); err != nil {
		t.Fatalf("installing tofu-controller's CRD: %v", err)
	}
}

func tofuObject(t *testing.T, ns, manifest string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating tofu-controller's %s: %v", u.GetName(), err)
	}
}

// From the cluster: the objects of the namespace (or those named), the
// state Secret looked for without its data ever being printed, a held
// state lock reported, files with --output-dir.
func TestMigrateFromTheCluster(t *testing.T) {
	installTofuCRD(t)
	ns := namespace(t, "migrate-cluster")
	ctx := context.Background()
	tofuObject(t, ns, `
apiVersion: infra.contrib.fluxcd.io/v1alpha2
kind: Terraform
metadata: {name: database, finalizers: [finalizers.tf.contrib.fluxcd.io]}
spec:
  interval: 5m
  approvePlan: auto
  path: ./database
  sourceRef: {kind: GitRepository, name: infra}
  serviceAccountName: tf-runner
  writeOutputsToSecret: {name: database-outputs}
  workspace: default
`)
	tofuObject(t, ns, `
apiVersion: infra.contrib.fluxcd.io/v1alpha2
kind: Terraform
metadata: {name: network}
spec:
  interval: 5m
  path: ./network
  sourceRef: {kind: GitRepository, name: infra}
  backendConfig: {secretSuffix: net}
  destroyResourcesOnDeletion: true
`)
	const stateValue = "H4sIAAAAAAAA-state-bytes-never-printed"
	if err := env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tfstate-default-database", Labels: map[string]string{"tfstate": "true"}},
		Data:       map[string][]byte{"tfstate": []byte(stateValue)},
	}); err != nil {
		t.Fatal(err)
	}
	holder := "3a1b2c3d-0000-4000-8000-000000000000"
	if err := env.Client.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lock-tfstate-default-database", Annotations: map[string]string{
			"app.terraform.io/lock-info": `{"ID":"` + holder + `","Operation":"OperationTypeApply","Who":"runner@database-tf-runner"}`}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}); err != nil {
		t.Fatal(err)
	}

	res := run(t, "", "-n", ns, "migrate")
	if res.err != nil {
		t.Fatalf("migrate: %v\n%s", res.err, res.stderr)
	}
	objs := migrated(t, res.stdout)
	if len(objs) != 2 || objs[0].Name != "database" || objs[1].Name != "network" {
		t.Fatalf("migrated %d objects:\n%s", len(objs), res.stdout)
	}
	if objs[0].Spec.DeletionPolicy != v1alpha1.DeletionPolicyOrphan || objs[1].Spec.DeletionPolicy != v1alpha1.DeletionPolicyDelete {
		t.Errorf("deletion policies %q, %q", objs[0].Spec.DeletionPolicy, objs[1].Spec.DeletionPolicy)
	}
	if len(objs[0].Finalizers) > 0 || objs[0].Spec.ServiceAccountName != "" {
		t.Errorf("tofu-controller's finalizer or runner account carried over: %+v", objs[0])
	}
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Errorf("the API server refuses migrated %s: %v", obj.Name, err)
		}
	}
	for _, want := range []string{
		"adopts Secret tfstate-default-database in " + ns + " (and its Lease lock-tfstate-default-database): found; the state is LOCKED by runner@database-tf-runner (lock " + holder + ", OperationTypeApply)",
		"adopts Secret tfstate-default-net in " + ns + " (and its Lease lock-tfstate-default-net): NOT FOUND, so Landform would start from an empty state",
		"deletionPolicy: Orphan: " + ns + "/database.",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stdout+res.stderr, stateValue) {
		t.Errorf("the state Secret's data was printed")
	}

	dir := t.TempDir()
	res = run(t, "", "-n", ns, "migrate", "network", "--output-dir", dir)
	if res.err != nil || res.stdout != "" {
		t.Fatalf("migrate network --output-dir: %v\nstdout: %s\n%s", res.err, res.stdout, res.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, ns+"-network.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := migrated(t, string(b)); len(got) != 1 || got[0].Spec.BackendConfig == nil || got[0].Spec.BackendConfig.SecretSuffix != "net" {
		t.Errorf("%s-network.yaml:\n%s", ns, b)
	}

	res = run(t, "", "-n", ns, "migrate", "missing")
	if res.err == nil || !strings.Contains(res.err.Error(), "tofu-controller Terraform "+ns+"/missing not found") {
		t.Errorf("migrate missing: %v", res.err)
	}
}

// The report a user reads, as docs/cli.md shows it: tofu-controller's
// manifest in a checkout of the Git repository, Landform's on stdout.
func TestMigrateReport(t *testing.T) {
	in, err := os.ReadFile(exampleFile("auto-approve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "infra"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "infra", "helloworld.yaml"), in, 0o600); err != nil {
		t.Fatal(err)
	}
	golden(t, "migrate/helloworld", runIn(t, repo, "", "migrate", "-f", "infra/helloworld.yaml").transcript())
}
