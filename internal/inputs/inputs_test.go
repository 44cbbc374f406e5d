package inputs

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/engines"
	"github.com/landform-dev/landform/internal/outcome"
	"github.com/landform-dev/landform/internal/outcome/outcometest"
)

const ns = "team"

// resolver reads objs through a fake client and a REST mapper that
// serves what the API server would for the kinds used here.
func resolver(t *testing.T, objs ...client.Object) *Resolver {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := apimeta.NewDefaultRESTMapper(nil)
	for _, kind := range []string{"Secret", "ConfigMap", "Service"} {
		mapper.Add(corev1.SchemeGroupVersion.WithKind(kind), apimeta.RESTScopeNamespace)
	}
	mapper.Add(infrav1.GroupVersion.WithKind(infrav1.TerraformKind), apimeta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).Build()
	return &Resolver{Reader: c, Mapper: mapper}
}

func object(mutate func(*infrav1.Terraform)) *infrav1.Terraform {
	tf := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Generation: 1}}
	tf.Spec.Interval = metav1.Duration{Duration: time.Minute}
	mutate(tf)
	return tf
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func service(name, hostname string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if hostname != "" {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: hostname}}
	}
	return s
}

func lbFields(name string) []infrav1.FieldVariable {
	return []infrav1.FieldVariable{{Path: ".status.loadBalancer.ingress[0].hostname", Name: name}}
}

func jsonValue(v string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(v)} }

// varsFrom merges in order, then vars: a later source wins, varsKeys
// selects and renames, JSON objects stay structured; the Secret's values
// are what a log is redacted of, and all a redaction read reads.
func TestVarsMergeInOrder(t *testing.T) {
	g := NewWithT(t)
	r := resolver(t,
		secret("creds", map[string]string{"password": "hunter2", "region": "eu"}),
		configMap("settings", map[string]string{"region": "us", "tags": `{"team":"a"}`, "size": "3"}))
	tf := object(func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{
			{Kind: "Secret", Name: "creds"},
			{Kind: "ConfigMap", Name: "settings", VarsKeys: []string{"region", "tags", "size:instances"}},
		}
		tf.Spec.Vars = []infrav1.Variable{{Name: "instances", Value: jsonValue("5")}, {Name: "unset"}}
	})
	v, err := r.Vars(context.Background(), tf, Plan)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(v.JSON)).To(Equal(`{"instances":5,"password":"hunter2","region":"us","tags":{"team":"a"},"unset":null}`))
	g.Expect(v.Secrets).To(Equal([]string{"eu", "hunter2"}))
	g.Expect(v.Fields).To(BeEmpty())

	red, err := r.Vars(context.Background(), tf, Redaction)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(red.Secrets).To(Equal([]string{"eu", "hunter2"}))
	g.Expect(string(red.JSON)).NotTo(ContainSubstring("tags"), "a redaction read reads only Secrets")
}

// What is missing says what to create or fix; optional references are
// skipped.
func TestMissingVarsSources(t *testing.T) {
	g := NewWithT(t)
	r := resolver(t, configMap("settings", map[string]string{"a": "1"}))
	ctx := context.Background()

	_, err := r.Vars(ctx, object(func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "creds"}}
	}), Plan)
	outcometest.Expect(g, err, outcome.Retrying, infrav1.VarsNotFoundReason, "varsFrom Secret team/creds not found: create it, or mark the reference optional")

	_, err = r.Vars(ctx, object(func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "ConfigMap", Name: "settings", VarsKeys: []string{"b"}}}
	}), Plan)
	outcometest.Expect(g, err, outcome.Retrying, infrav1.VarsNotFoundReason, `has no key "b"`)

	v, err := r.Vars(ctx, object(func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "creds", Optional: true},
			{Kind: "ConfigMap", Name: "settings", VarsKeys: []string{"a", "b"}, Optional: true}}
	}), Plan)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(v.JSON)).To(Equal(`{"a":"1"}`))
}

// A field not set yet is waited for, naming the object and the path; set,
// it is a variable and what status.inputs records; at a destroy, a field
// whose object is gone takes the value recorded.
func TestFieldInputs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tf := object(func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: "v1", Kind: "Service", Name: "web", Fields: lbFields("lb")}}
	})
	_, err := resolver(t, service("web", "")).Vars(ctx, tf, Plan)
	outcometest.Expect(g, err, outcome.Waiting, infrav1.InputNotReadyReason,
		"waiting for Service team/web to set .status.loadBalancer.ingress[0].hostname (lb)")

	_, err = resolver(t).Vars(ctx, tf, Plan)
	outcometest.Expect(g, err, outcome.Waiting, infrav1.InputNotFoundReason, "input Service team/web not found")

	v, err := resolver(t, service("web", "lb.example")).Vars(ctx, tf, Plan)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(v.JSON)).To(Equal(`{"lb":"lb.example"}`))
	Record(tf, v.Fields)
	g.Expect(tf.Status.Inputs).To(Equal([]infrav1.Variable{{Name: "lb", Value: jsonValue(`"lb.example"`)}}))

	gone, err := resolver(t).Vars(ctx, tf, Destroy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(gone.JSON)).To(Equal(`{"lb":"lb.example"}`), "the recorded value destroys")

	_, err = resolver(t, service("web", "x")).Vars(ctx, object(func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: "v1", Kind: "Service", Name: "web",
			Fields: []infrav1.FieldVariable{{Path: ".status[", Name: "bad"}}}}
	}), Plan)
	outcometest.Expect(g, err, outcome.Stalled, infrav1.InvalidInputPathReason, `path ".status[" of bad`, "fix the path")
}

// A Secret is refused as a field input however its kind is spelled (kind:
// Secret with fields the CRD refuses), before it is read; what a controller without the refusal recorded of it
// leaves status, and its value is in no message.
func TestSecretFieldsAreRefusedByAnySpelling(t *testing.T) {
	for _, tc := range []struct{ apiVersion, kind string }{{"v1", "secret"}, {"v1", "Secrets"}, {"/v1", "sEcReTs"}} {
		t.Run(tc.apiVersion+" "+tc.kind, func(t *testing.T) {
			g := NewWithT(t)
			r := resolver(t, secret("creds", map[string]string{"password": "hunter2"}))
			tf := object(func(tf *infrav1.Terraform) {
				tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "creds",
					Fields: []infrav1.FieldVariable{{Path: ".data.password", Name: "p"}}}}
				tf.Status.Inputs = []infrav1.Variable{{Name: "p", Value: jsonValue(`"aHVudGVyMg=="`)}}
			})
			_, err := r.Vars(context.Background(), tf, Plan)
			g.Expect(err).To(MatchError(ErrSecretInput))
			outcometest.Expect(g, err, outcome.Stalled, infrav1.InvalidInputPathReason, "use kind: Secret with varsKeys instead")
			g.Expect(err.Error()).NotTo(Or(ContainSubstring("hunter2"), ContainSubstring("aHVudGVyMg")))
			g.Expect(tf.Status.Inputs).To(BeNil())
		})
	}
}

// Imports read their ids from a literal, a ConfigMap, a Secret (redacted)
// or a field; a destroy imports nothing; an address that is no resource
// address stalls.
func TestImports(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := resolver(t, configMap("ids", map[string]string{"vpc": "vpc-1"}), secret("ids", map[string]string{"key": "k-secret"}),
		service("web", "lb.example"))
	tf := object(func(tf *infrav1.Terraform) {
		tf.Spec.Imports = []infrav1.Import{
			{To: "aws_instance.a", ID: "i-1"},
			{To: "aws_vpc.main", IDFrom: &infrav1.ImportIDReference{Kind: "ConfigMap", Name: "ids", Key: "vpc"}},
			{To: `module.k.aws_kms_key.this["x"]`, IDFrom: &infrav1.ImportIDReference{Kind: "Secret", Name: "ids", Key: "key"}},
			{To: "aws_lb.web", IDFrom: &infrav1.ImportIDReference{APIVersion: "v1", Kind: "Service", Name: "web", Path: ".status.loadBalancer.ingress[0].hostname"}},
		}
	})
	v, err := r.Vars(ctx, tf, Plan)
	g.Expect(err).NotTo(HaveOccurred())
	var got []string
	for _, im := range v.Imports {
		got = append(got, im.To+"="+im.Id)
	}
	g.Expect(got).To(Equal([]string{"aws_instance.a=i-1", "aws_vpc.main=vpc-1", `module.k.aws_kms_key.this["x"]=k-secret`, "aws_lb.web=lb.example"}))
	g.Expect(v.Secrets).To(Equal([]string{"k-secret"}))

	d, err := r.Vars(ctx, tf, Destroy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Imports).To(BeEmpty())

	tf.Spec.Imports = []infrav1.Import{{To: "aws_instance.a\n}\nresource", ID: "x"}}
	_, err = r.Vars(ctx, tf, Plan)
	outcometest.Expect(g, err, outcome.Stalled, infrav1.InvalidConfigurationReason, "is not a resource address")
}

// A dependency is awaited until it is Ready at its current generation.
func TestDependencies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dep := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "network", Generation: 2}}
	dep.Status.ObservedGeneration = 1
	r := resolver(t, dep)
	tf := object(func(tf *infrav1.Terraform) {
		tf.Spec.DependsOn = []infrav1.DependencyReference{{Name: "network"}, {Name: "missing"}}
	})
	err := r.Dependencies(ctx, tf)
	outcometest.Expect(g, err, outcome.Waiting, infrav1.DependencyNotReadyReason,
		"Terraform team/network (not reconciled at its current generation yet)", "Terraform team/missing (not found)")

	dep = dep.DeepCopy()
	dep.ResourceVersion = ""
	dep.Status.ObservedGeneration = 2
	dep.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.Now()}}
	tf.Spec.DependsOn = tf.Spec.DependsOn[:1]
	g.Expect(resolver(t, dep).Dependencies(ctx, tf)).To(Succeed())
}

// References to other namespaces are refused, each named, unless allowed.
func TestCheckNamespaces(t *testing.T) {
	g := NewWithT(t)
	tf := object(func(tf *infrav1.Terraform) {
		tf.Spec.SourceRef = infrav1.SourceReference{Kind: "GitRepository", Name: "repo", Namespace: "flux-system"}
		tf.Spec.VarsFrom = []infrav1.VarsReference{{APIVersion: "v1", Kind: "Service", Name: "web", Namespace: "apps", Fields: lbFields("lb")}}
		tf.Spec.DependsOn = []infrav1.DependencyReference{{Name: "net", Namespace: "infra"}}
	})
	r := resolver(t)
	outcometest.Expect(g, r.CheckNamespaces(tf), outcome.Stalled, infrav1.CrossNamespaceRefDeniedReason,
		"sourceRef GitRepository flux-system/repo", "varsFrom Service apps/web", "dependsOn Terraform infra/net", "--no-cross-namespace-refs=false")
	r.AllowCrossNamespaceRefs = true
	g.Expect(r.CheckNamespaces(tf)).To(Succeed())
}

// An exact version needs no listing; a destroy whose engine's source is
// down destroys with the engine of the last plan.
func TestEngine(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := resolver(t)
	r.Engines = EngineSources{Resolver: &engines.Resolver{Timeout: time.Second},
		OpenTofu: EngineSource{ReleasesURL: "http://127.0.0.1:1/opentofu", SigningKey: "key"}}

	e, err := r.Engine(ctx, object(func(*infrav1.Terraform) {}), Plan)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e).To(BeNil(), "the runner's own engine")

	tf := object(func(tf *infrav1.Terraform) {
		tf.Spec.Engine = &infrav1.EngineSpec{Name: engines.OpenTofu, Version: "1.8.2"}
	})
	e, err = r.Engine(ctx, tf, Plan)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e).To(Equal(&infrav1.EngineStatus{Name: engines.OpenTofu, Version: "1.8.2"}))
	spec := r.EngineSpec(e)
	g.Expect(spec.ReleasesUrl).To(Equal("http://127.0.0.1:1/opentofu"))
	g.Expect(spec.SigningKey).To(Equal("key"))

	tf.Spec.Engine.Version = "~> 1.9"
	_, err = r.Engine(ctx, tf, Plan)
	outcometest.Expect(g, err, outcome.Retrying, infrav1.EngineNotFoundReason, "spec.engine")
	tf.Status.Plan = &infrav1.PlanStatus{Engine: &infrav1.EngineStatus{Name: engines.OpenTofu, Version: "1.9.0"}}
	e, err = r.Engine(ctx, tf, Destroy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Version).To(Equal("1.9.0"))
}

// FieldValue reads one value as it is, several as a list, and calls
// absent, null and empty values not set.
func TestFieldValue(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"example.com/id": "sg-1"}},
		"status": map[string]any{
			"loadBalancer": map[string]any{"ingress": []any{}},
			"replicas":     int64(3),
			"ready":        true,
			"empty":        "",
			"null":         nil,
			"hosts":        []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}},
		},
	}
	for _, tc := range []struct {
		path, want string
		notSet     bool
		invalid    bool
	}{
		{path: ".status.replicas", want: "3"},
		{path: "{.status.ready}", want: "true"},
		{path: ".metadata.annotations['example\\.com/id']", want: `"sg-1"`},
		{path: ".status.hosts[*].name", want: `["a","b"]`},
		{path: ".status.hosts[1]", want: `{"name":"b"}`},
		{path: ".status.loadBalancer.ingress[0].hostname", notSet: true},
		{path: ".status.missing.deeper", notSet: true},
		{path: ".status.empty", notSet: true},
		{path: ".status.null", notSet: true},
		{path: ".status.hosts[", invalid: true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			got, err := FieldValue(&unstructured.Unstructured{Object: obj}, tc.path)
			switch {
			case tc.notSet:
				g.Expect(err).To(MatchError(errFieldNotSet))
			case tc.invalid:
				g.Expect(err).To(HaveOccurred())
				g.Expect(err).NotTo(MatchError(errFieldNotSet))
			default:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(got)).To(Equal(tc.want))
			}
		})
	}
}

// IndexKeys names each input object once, Secrets and ConfigMaps by kind
// and name, other objects by group, kind, namespace and name.
func TestIndexKeys(t *testing.T) {
	g := NewWithT(t)
	tf := object(func(tf *infrav1.Terraform) {
		tf.Spec.VarsFrom = []infrav1.VarsReference{{Kind: "Secret", Name: "creds"},
			{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "web", Fields: lbFields("lb")}}
		tf.Spec.Imports = []infrav1.Import{{To: "a.b", IDFrom: &infrav1.ImportIDReference{APIVersion: "v1", Kind: "Service", Name: "svc", Namespace: "apps", Path: ".spec.clusterIP"}}}
	})
	g.Expect(IndexKeys(tf)).To(Equal([]string{"Secret/creds", "networking.k8s.io/Ingress/team/web", "/Service/apps/svc"}))
}

// dependsOn names Kustomizations and HelmReleases without an apiVersion:
// the kinds the controller's ClusterRole may read get their Flux version.
func TestDependencyKeyDefaults(t *testing.T) {
	obj := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"}}
	for _, tc := range []struct {
		dep  infrav1.DependencyReference
		want string
	}{
		{infrav1.DependencyReference{Name: "db"}, "infra.landform.dev/v1alpha1, Kind=Terraform team-a/db"},
		{infrav1.DependencyReference{Kind: "Kustomization", Name: "crds"}, "kustomize.toolkit.fluxcd.io/v1, Kind=Kustomization team-a/crds"},
		{infrav1.DependencyReference{Kind: "HelmRelease", Name: "ingress", Namespace: "infra"}, "helm.toolkit.fluxcd.io/v2, Kind=HelmRelease infra/ingress"},
		{infrav1.DependencyReference{APIVersion: "kustomize.toolkit.fluxcd.io/v1beta2", Kind: "Kustomization", Name: "old"}, "kustomize.toolkit.fluxcd.io/v1beta2, Kind=Kustomization team-a/old"},
		{infrav1.DependencyReference{APIVersion: "example.com/v1", Kind: "Database", Name: "pg"}, "example.com/v1, Kind=Database team-a/pg"},
	} {
		gvk, key := DependencyKey(obj, tc.dep)
		if got := gvk.String() + " " + key.String(); got != tc.want {
			t.Errorf("DependencyKey(%+v) = %s, want %s", tc.dep, got, tc.want)
		}
	}
}
