package migrate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// convertFile migrates every tofu-controller object of a testdata file.
func convertFile(t *testing.T, name string, o Options) ([]Result, []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srcs, skipped, err := Decode(f, name)
	if err != nil {
		t.Fatal(err)
	}
	var results []Result
	for _, s := range srcs {
		results = append(results, Convert(s, o))
	}
	return results, skipped
}

// landform decodes a manifest strictly into Landform's API types: a field
// the API does not have fails.
func landform(t *testing.T, manifest []byte) *v1alpha1.Terraform {
	t.Helper()
	var obj v1alpha1.Terraform
	if err := yaml.UnmarshalStrict(manifest, &obj); err != nil {
		t.Fatalf("the manifest is not a valid Landform Terraform: %v\n%s", err, manifest)
	}
	if obj.APIVersion != v1alpha1.GroupVersion.String() || obj.Kind != v1alpha1.TerraformKind {
		t.Errorf("apiVersion/kind = %s/%s", obj.APIVersion, obj.Kind)
	}
	return &obj
}

// The tofu-controller examples of testdata/, migrated: manifests and the
// report, compared with testdata/<example>.golden.
func TestGoldenConversions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("expected the examples under testdata/, found %v", files)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			results, skipped := convertFile(t, filepath.Base(file), Options{})
			var b bytes.Buffer
			for _, r := range results {
				if r.Object == nil {
					continue
				}
				m, err := Manifest(r.Object)
				if err != nil {
					t.Fatal(err)
				}
				obj := landform(t, m)
				if obj.Name != r.Source.Name || obj.Namespace != r.Source.Namespace {
					t.Errorf("migrated %s as %s/%s", r.Source.Key(), obj.Namespace, obj.Name)
				}
				b.WriteString("---\n")
				b.Write(m)
			}
			b.WriteString("[report]\n")
			for _, r := range results {
				r.WriteReport(&b)
			}
			WriteSummary(&b, results, skipped)
			golden(t, name, b.String())
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	testenv.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// Every field of the source is accounted for: carried into the Landform
// object, listed as not mapped (with a reason), or recognised as
// tofu-controller's default.
func TestEveryFieldIsMappedOrReported(t *testing.T) {
	results, _ := convertFile(t, "everything.yaml", Options{})
	if len(results) != 1 {
		t.Fatalf("got %d objects", len(results))
	}
	r := results[0]
	if r.Object == nil {
		t.Fatalf("refused: %v", r.Refused)
	}
	unmapped := map[string]string{}
	for _, u := range r.Unmapped {
		if u.Reason == "" {
			t.Errorf("%s is not mapped without a reason", u.Field)
		}
		unmapped[u.Field] = u.Reason
	}
	wantUnmapped := []string{
		"spec.alwaysCleanupRunnerPod", "spec.branchPlanner", "spec.breakTheGlass", "spec.cliConfigSecretRef",
		"spec.enableInventory", "spec.fileMappings", "spec.force", "spec.healthChecks", "spec.maxRetryInterval",
		"spec.parallelism", "spec.plan", "spec.readInputsFromSecrets", "spec.refreshBeforeApply", "spec.remediation",
		"spec.retryStrategy", "spec.runnerPodTemplate.spec.securityContext", "spec.runnerTerminationGracePeriodSeconds",
		"spec.storeReadablePlan", "spec.targets", "spec.tfVarsFiles", "spec.tfstate",
		"spec.vars[0].valueFrom", "spec.webhooks",
	}
	for _, f := range wantUnmapped {
		if _, ok := unmapped[f]; !ok {
			t.Errorf("%s is not reported as not mapped; report lists %v", f, r.Unmapped)
		}
	}
	for f := range unmapped {
		if !slices.Contains(wantUnmapped, f) {
			t.Errorf("%s reported as not mapped, but it has an equivalent", f)
		}
	}
	if !slices.Contains(r.Same, "spec.upgradeOnInit") {
		t.Errorf("upgradeOnInit: false (what Landform always does) is not reported as such: %v", r.Same)
	}
	var report bytes.Buffer
	r.WriteReport(&report)
	for _, f := range wantUnmapped {
		if !strings.Contains(report.String(), "    - "+f+": ") {
			t.Errorf("the printed report does not list %s:\n%s", f, report.String())
		}
	}

	spec := r.Object.Spec
	checks := []struct {
		field string
		ok    bool
	}{
		{"approvePlan disable → planOnly", spec.PlanOnly && spec.ApprovePlan == ""},
		{"disableDriftDetection", spec.DisableDriftDetection},
		{"interval", spec.Interval.Duration.String() == "10m0s"},
		{"retryInterval", spec.RetryInterval != nil && spec.RetryInterval.Duration.String() == "30s"},
		{"path", spec.Path == "./stacks/everything"},
		{"serviceAccountName", spec.ServiceAccountName == "terraform"},
		{"sourceRef", spec.SourceRef == v1alpha1.SourceReference{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "GitRepository", Name: "infra", Namespace: "flux-system"}},
		{"workspace default", spec.Workspace == ""},
		{"the valueFrom variable is not passed", len(spec.Vars) == 0},
		{"deletionPolicy", spec.DeletionPolicy == v1alpha1.DeletionPolicyOrphan},
		{"no runner template left", spec.RunnerPodTemplate == nil},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s not mapped: %+v", c.field, spec)
		}
	}
	md := r.Object.ObjectMeta
	if diff := cmp.Diff(map[string]string{"team": "a"}, md.Labels); diff != "" {
		t.Errorf("labels (-want +got; Flux's own are dropped):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"owner": "platform"}, md.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if len(md.Finalizers) > 0 || md.UID != "" || md.ResourceVersion != "" || md.Generation != 0 {
		t.Errorf("cluster metadata carried over: %+v", md)
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"plan plan-main-0123456789 pending", "state locked (lock f2ab685b", "namespace flux-system"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not say %q:\n%s", want, notes)
		}
	}
}

// tofu-controller keeps resources on deletion by default: the migrated
// object is Orphan and the summary warns, unless the source destroyed on
// deletion or the user asks for Delete.
func TestDeletionPolicy(t *testing.T) {
	tests := []struct {
		file        string
		opts        Options
		want        v1alpha1.DeletionPolicy
		warnOrphan  bool
		warnDestroy bool
	}{
		{file: "auto-approve.yaml", want: v1alpha1.DeletionPolicyOrphan, warnOrphan: true},
		{file: "destroy-on-deletion.yaml", want: v1alpha1.DeletionPolicyDelete},
		{file: "auto-approve.yaml", opts: Options{DeletionPolicy: v1alpha1.DeletionPolicyDelete}, want: v1alpha1.DeletionPolicyDelete, warnDestroy: true},
		{file: "destroy-on-deletion.yaml", opts: Options{DeletionPolicy: v1alpha1.DeletionPolicyOrphan}, want: v1alpha1.DeletionPolicyOrphan},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+string(tt.opts.DeletionPolicy), func(t *testing.T) {
			results, skipped := convertFile(t, tt.file, tt.opts)
			m, err := Manifest(results[0].Object)
			if err != nil {
				t.Fatal(err)
			}
			if got := landform(t, m).Spec.DeletionPolicy; got != tt.want {
				t.Errorf("deletionPolicy = %q, want %q", got, tt.want)
			}
			var summary bytes.Buffer
			WriteSummary(&summary, results, skipped)
			s := summary.String()
			if got := strings.Contains(s, "WARNING: tofu-controller KEEPS") && strings.Contains(s, "deletionPolicy: Orphan: flux-system/helloworld"); got != tt.warnOrphan {
				t.Errorf("Orphan warning printed = %t, want %t:\n%s", got, tt.warnOrphan, s)
			}
			if got := strings.Contains(s, "WARNING: --deletion-policy=Delete: deleting these objects DESTROYS"); got != tt.warnDestroy {
				t.Errorf("destroy warning printed = %t, want %t:\n%s", got, tt.warnDestroy, s)
			}
		})
	}
}

// The state Secret both controllers use: tfstate-<workspace>-<secretSuffix>,
// the suffix defaulting to the name.
func TestStateSecretIsKept(t *testing.T) {
	results, _ := convertFile(t, "backend-secret-suffix.yaml", Options{})
	r := results[0]
	if r.StateSecret != "tfstate-staging-hello-state" {
		t.Errorf("state Secret = %q", r.StateSecret)
	}
	obj := r.Object
	if names.StateSecret(obj) != r.StateSecret {
		t.Errorf("Landform would use %s, tofu-controller used %s", names.StateSecret(obj), r.StateSecret)
	}
	s3 := results[1]
	if s3.StateSecret != "" || s3.Object.Spec.BackendConfig == nil || !strings.HasPrefix(s3.Object.Spec.BackendConfig.CustomConfiguration, "terraform {\n  backend \"s3\" {") {
		t.Errorf("custom backend not carried over as a terraform block: %+v", s3.Object.Spec.BackendConfig)
	}
	results, _ = convertFile(t, "auto-approve.yaml", Options{})
	if r := results[0]; r.StateSecret != "tfstate-default-helloworld" || names.StateSecret(r.Object) != r.StateSecret {
		t.Errorf("state Secret = %q, Landform's %q", r.StateSecret, names.StateSecret(r.Object))
	}
}

// Names longer than the kubernetes backend's labels allow never held a
// state with tofu-controller: the migrated object gets Landform's shortened
// default, and a workspace that cannot name a Secret is refused unless the
// backend is the module's own.
func TestLongNames(t *testing.T) {
	long := strings.Repeat("n", 70)
	manifest := func(spec string) Source {
		t.Helper()
		srcs, _, err := Decode(strings.NewReader("apiVersion: infra.contrib.fluxcd.io/v1alpha2\nkind: Terraform\nmetadata:\n  name: "+long+"\n  namespace: ns\nspec:\n  sourceRef: {kind: GitRepository, name: repo}\n"+spec), "test")
		if err != nil || len(srcs) != 1 {
			t.Fatalf("decoding: %v", err)
		}
		return srcs[0]
	}
	for _, spec := range []string{"", "  backendConfig:\n    secretSuffix: " + strings.Repeat("s", 64) + "\n"} {
		r := Convert(manifest(spec), Options{})
		if r.Object == nil {
			t.Fatalf("%q refused: %v", spec, r.Refused)
		}
		if want := "tfstate-default-" + names.Label(long); r.StateSecret != want || names.StateSecret(r.Object) != want {
			t.Errorf("%q: state Secret %q, Landform's %q, want %q", spec, r.StateSecret, names.StateSecret(r.Object), want)
		}
		if b := r.Object.Spec.BackendConfig; b != nil {
			t.Errorf("%q: backendConfig %+v kept", spec, b)
		}
	}
	r := Convert(manifest("  writeOutputsToSecret: {name: outputs}\n"), Options{})
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, v1alpha1.OwnerNameLabel+"="+names.Label(long)+" (a label value has at most 63 characters: the name is cut and hashed)") {
		t.Errorf("the outputs Secret's hand-over label is not the name cut and hashed:\n%s", notes)
	}
	if r := Convert(manifest("  workspace: Prod_1\n"), Options{}); r.Object != nil || !strings.Contains(strings.Join(r.Refused, " "), "state Secret's name") {
		t.Errorf("workspace Prod_1 with the kubernetes backend: refused %v", r.Refused)
	}
	custom := "  workspace: Prod_1\n  backendConfig:\n    customConfiguration: |\n      backend \"local\" {}\n"
	if r := Convert(manifest(custom), Options{}); r.Object == nil || r.Object.Spec.Workspace != "Prod_1" {
		t.Errorf("workspace Prod_1 with a custom backend refused: %v", r.Refused)
	}
}

// What cannot be migrated safely is refused with what to do, and nothing
// is written for it; other API versions and kinds are skipped with a note.
func TestRefused(t *testing.T) {
	results, skipped := convertFile(t, "refused.yaml", Options{})
	want := map[string]string{
		"no-backend": "put the module's backend block in backendConfig.customConfiguration",
		"in-cloud":   "Terraform Cloud",
		"odd-suffix": "Copy that Secret to tfstate-default-odd-suffix",
	}
	if len(results) != len(want) {
		t.Fatalf("got %d objects, want %d", len(results), len(want))
	}
	for _, r := range results {
		if r.Object != nil {
			t.Errorf("%s migrated, want refused", r.Source.Name)
		}
		if got := strings.Join(r.Refused, "\n"); !strings.Contains(got, want[r.Source.Name]) {
			t.Errorf("%s refused with %q, want it to say %q", r.Source.Name, got, want[r.Source.Name])
		}
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "infra.contrib.fluxcd.io/v1alpha1 is not read") {
		t.Errorf("skipped = %q", skipped)
	}
	var b bytes.Buffer
	for _, r := range results {
		r.WriteReport(&b)
	}
	WriteSummary(&b, results, skipped)
	if strings.Contains(b.String(), "not-printed-anywhere") {
		t.Errorf("the report prints the Terraform Cloud token:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "3 NOT migrated") {
		t.Errorf("summary:\n%s", b.String())
	}
}

// The engine a runner image holds, from its name, only where that is
// certain: tofu-controller's own images by release (runner.Dockerfile's
// and runner-azure.Dockerfile's defaults at each tag), its release-runners
// and the community's Terraform images by the version their tag names.
func TestEngineFromRunnerImage(t *testing.T) {
	tests := []struct {
		image   string
		want    string // "engine version", or "" when not known
		tools   string
		unknown string
	}{
		{image: "ghcr.io/flux-iac/tf-runner:v0.16.0-rc.5", want: "terraform 1.5.7"},
		{image: "ghcr.io/flux-iac/tf-runner-azure:v0.16.0-rc.5", want: "terraform 1.3.9", tools: "the Azure CLI"},
		{image: "ghcr.io/weaveworks/tf-runner:v0.9.5-rc.3", want: "terraform 1.2.0"},
		{image: "ghcr.io/weaveworks/tf-runner:v0.9.5", want: "terraform 1.1.9"},
		{image: "ghcr.io/flux-iac/tf-runner:v0.16.0", want: "opentofu 1.11.3"},
		{image: "ghcr.io/flux-iac/tf-runner:v0.16.5@sha256:00", want: "opentofu 1.12.1"},
		{image: "ghcr.io/flux-iac/tf-runner:v0.16.0-rc.7-tf-1.4.6", want: "terraform 1.4.6"},
		{image: "ghcr.io/tf-controller/tf-runner:v0.15.1-base-tf-1.5.7-mpl", want: "terraform 1.5.7"},
		{image: "ghcr.io/tf-controller/tf-runner:v0.15.1-aws-tf-1.5.7-mpl", want: "terraform 1.5.7", tools: "the AWS CLI"},
		{image: "ghcr.io/flux-iac/tf-runner:v0.16.2-tf-1.5.5", unknown: "builds OpenTofu"},
		{image: "ghcr.io/flux-iac/tf-runner-azure:v0.15.1-tf-1.4.6", tools: "the Azure CLI", unknown: "not a tofu-controller release"},
		{image: "ghcr.io/flux-iac/tf-runner:v0.17.0", unknown: "not a tofu-controller release"},
		{image: "ghcr.io/flux-iac/tf-runner:latest", unknown: "tag latest"},
		{image: "ghcr.io/flux-iac/tf-runner", unknown: "tag latest"},
		{image: "ghcr.io/flux-iac/tf-runner@sha256:00", unknown: "no tag"},
		{image: "ghcr.io/flux-iac/tf-runner:v0.16.0-base", unknown: "no engine"},
		{image: "registry.example.com/tf-runner:v0.16.0-rc.5", unknown: "a custom image"},
		{image: "ghcr.io/flux-iac/tf-runner-custom:v0.16.0", unknown: "a custom image"},
	}
	for _, tt := range tests {
		img := inspectRunnerImage(tt.image)
		got := ""
		if img.engine != nil {
			got = img.engine.Name + " " + img.engine.Version
		}
		if got != tt.want || img.tools != tt.tools || !strings.Contains(img.unknown, tt.unknown) || (got == "") == (img.unknown == "") {
			t.Errorf("%s: engine %q, tools %q, unknown %q; want %q, %q, %q", tt.image, got, img.tools, img.unknown, tt.want, tt.tools, tt.unknown)
		}
	}
}
