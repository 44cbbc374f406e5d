package packaging

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const allFeatures = "hack/packaging/testdata/all-features.yaml"

// chartAppVersion is the default image tag.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, &chart, "charts", "landform", "Chart.yaml")
	return chart.AppVersion
}

// readYAML and readJSON decode the repository file at parts into v.
func readYAML(t testing.TB, v any, parts ...string) {
	t.Helper()
	decodeFile(t, utilyaml.Unmarshal, v, parts...)
}

func readJSON(t testing.TB, v any, parts ...string) {
	t.Helper()
	decodeFile(t, json.Unmarshal, v, parts...)
}

func decodeFile(t testing.TB, unmarshal func([]byte, any) error, v any, parts ...string) {
	t.Helper()
	b, err := os.ReadFile(path(parts...))
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", filepath.Join(parts...), err)
	}
}

func TestChartLint(t *testing.T) {
	helm := helmBin(t)
	for name, args := range map[string][]string{
		"defaults":     nil,
		"all features": {"--values", allFeatures},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runErr(helmEnv(t), helm, append([]string{"lint", "--strict", "charts/landform"}, args...)...)
			if err != nil {
				t.Fatalf("helm lint: %v", err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// TestChartRejectsBadValues: the values schema and the templates' checks
// catch typos and contradictions instead of rendering something else.
func TestChartRejectsBadValues(t *testing.T) {
	helm := helmBin(t)
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"unknown key":             {[]string{"--set", "serviceMonitor.enable=true"}, "additional properties 'enable' not allowed"},
		"bad duration":            {[]string{"--set", "runner.startTimeout=5 minutes"}, "startTimeout"},
		"bad reuse time":          {[]string{"--set", "runner.podReuse=a while"}, "podReuse"},
		"bad namespace":           {[]string{"--set", "runner.namespaces={Team_A}"}, "namespaces"},
		"comma in image prefix":   {[]string{"--set-json", `runner.allowedImages=["ghcr.io/a/,ghcr.io/b/"]`}, "allowedImages"},
		"wrong type":              {[]string{"--set-string", "concurrent=many"}, "concurrent"},
		"replicas without leader": {[]string{"--set", "replicaCount=2,leaderElection.enabled=false"}, "needs leaderElection.enabled"},
		"monitor without service": {[]string{"--set", "serviceMonitor.enabled=true,metrics.service.enabled=false"}, "needs metrics.service.enabled"},
		"bad shard name":          {[]string{"--set", "shards={Shard_1}"}, "shards"},
		"shard named twice":       {[]string{"--set", "shards={a,a}"}, "shards"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := runErr(helmEnv(t), helm, append([]string{"template", "landform", "charts/landform"}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("helm template %v: got %v, want an error mentioning %q", c.args, err, c.want)
			}
		})
	}
}

func TestChartDefaults(t *testing.T) {
	objs := helmTemplate(t)
	ns := releaseNamespace
	checkObjects(t, objs, ns)

	dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "landform-controller"))
	c := dep.Spec.Template.Spec.Containers[0]
	if got, want := c.Image, "ghcr.io/landform-dev/landform-controller:"+chartAppVersion(t); got != want {
		t.Errorf("image %q, want %q", got, want)
	}
	wantArgs := []string{
		"--metrics-addr=:8080",
		"--health-addr=:8081",
		"--enable-leader-election",
		"--concurrent=4",
		"--concurrent-runs=10",
		"--log-level=info",
		"--runner=pod",
		"--runner-image=ghcr.io/landform-dev/landform-runner:" + chartAppVersion(t),
		"--runner-pod-reuse=30s",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	checkControllerPod(t, dep, 8080, 8081)
	if *dep.Spec.Replicas != 1 {
		t.Errorf("replicas %d, want 1", *dep.Spec.Replicas)
	}

	ensureNamespace(t, ns, nil)
	dryRunApply(t, objs)
}

func TestChartAllFeatures(t *testing.T) {
	objs := helmTemplate(t, "--values", allFeatures)
	ns := releaseNamespace
	extra := []string{
		"Deployment/" + ns + "/landform-controller-shard1",
		"Deployment/" + ns + "/landform-controller-shard2",
		"ServiceMonitor/" + ns + "/landform-controller",
		"ConfigMap/monitoring/landform-kube-state-metrics",
		"ConfigMap/" + ns + "/landform-engine-keys",
	}
	for _, runnerNS := range []string{"team-a", "team-b"} {
		extra = append(extra, "ServiceAccount/"+runnerNS+"/landform-runner")
	}
	checkObjects(t, objs, ns, extra...)

	dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "landform-controller"))
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	wantArgs := []string{
		"--metrics-addr=:9090",
		"--health-addr=:9091",
		"--enable-leader-election",
		"--watch-label-selector=!sharding.fluxcd.io/key",
		"--concurrent=8",
		"--concurrent-runs=20",
		"--kept-artifact-max-size=8388608",
		"--log-level=debug",
		"--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
		"--runner=pod",
		"--runner-image=registry.example/landform-runner:v9.9.9-terraform",
		"--keep-runner-pods",
		"--runner-pod-reuse=30s",
		"--runner-start-timeout=5m",
		"--default-service-account=tenant-runner",
		"--enforce-default-service-account",
		"--allowed-runner-images=registry.example/,ghcr.io/acme/runner",
		"--no-cross-namespace-refs=false",
		"--opentofu-releases-url=https://tofu.mirror.example",
		"--terraform-releases-url=https://releases.mirror.example",
		"--terraform-signing-key-file=/etc/landform/engine-keys/terraform.asc",
		"--provider-mirror=/usr/local/share/landform/providers",
		"--provider-mirror=/opt/providers",
		"--work-dir=/tmp/cache",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	// The Pod template names a PriorityClass, which a Pod needs to exist.
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "landform-critical"}, Value: 1000}
	if err := env.Client.Create(context.Background(), pc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	checkControllerPod(t, dep, 9090, 9091)
	for name, c := range map[string]struct{ got, want any }{
		"replicas":          {*dep.Spec.Replicas, int32(2)},
		"image":             {c.Image, "registry.example/landform-controller:v9.9.9"},
		"pullPolicy":        {c.ImagePullPolicy, corev1.PullAlways},
		"imagePullSecrets":  {pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}},
		"env":               {c.Env[1:], []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy.example:3128"}}},
		"memory limit":      {c.Resources.Limits.Memory().String(), "1Gi"},
		"nodeSelector":      {pod.NodeSelector, map[string]string{"kubernetes.io/os": "linux"}},
		"tolerations":       {len(pod.Tolerations), 1},
		"affinity":          {pod.Affinity != nil && pod.Affinity.NodeAffinity != nil, true},
		"podAnnotations":    {dep.Spec.Template.Annotations, map[string]string{"example.com/owner": "platform"}},
		"podLabels":         {dep.Spec.Template.Labels["team"], "platform"},
		"priorityClassName": {pod.PriorityClassName, "landform-critical"},
		"grace":             {*pod.TerminationGracePeriodSeconds, int64(120)},
		"tmp sizeLimit":     {pod.Volumes[0].EmptyDir.SizeLimit.String(), "2Gi"},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}

	keys := into[corev1.ConfigMap](t, find(t, objs, "ConfigMap", ns, "landform-engine-keys"))
	if k := keys.Data["terraform.asc"]; !strings.HasPrefix(k, "-----BEGIN PGP PUBLIC KEY BLOCK-----\n") || len(keys.Data) != 1 {
		t.Errorf("engine keys ConfigMap %v: want terraform.asc only, the armored key as given", keys.Data)
	}

	sa := into[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount", ns, "landform-controller"))
	if sa.Annotations["example.com/controller"] != "yes" {
		t.Errorf("controller ServiceAccount annotations %v", sa.Annotations)
	}
	svc := into[corev1.Service](t, find(t, objs, "Service", ns, "landform-controller-metrics"))
	if p := svc.Spec.Ports[0]; p.Port != 9090 || p.TargetPort.StrVal != "metrics" || svc.Annotations["example.com/scrape"] != "true" {
		t.Errorf("metrics Service ports %+v annotations %v", svc.Spec.Ports, svc.Annotations)
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("the metrics Service selects %s=%s, which the controller Pod lacks", k, v)
		}
	}

	sm := find(t, objs, "ServiceMonitor", ns, "landform-controller")
	if got := sm.GetLabels()["release"]; got != "prometheus" {
		t.Errorf("ServiceMonitor label release=%q, want prometheus", got)
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the metrics Service lacks", k, v)
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if diff := cmp.Diff([]any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}}, endpoints); diff != "" {
		t.Errorf("ServiceMonitor endpoints (-want +got):\n%s", diff)
	}

	for _, runnerNS := range []string{"team-a", "team-b"} {
		sa := into[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount", runnerNS, "landform-runner"))
		if diff := cmp.Diff([]corev1.LocalObjectReference{{Name: "runner-regcred"}}, sa.ImagePullSecrets); diff != "" {
			t.Errorf("runner ServiceAccount imagePullSecrets (-want +got):\n%s", diff)
		}
		if sa.Annotations["eks.amazonaws.com/role-arn"] == "" {
			t.Errorf("runner ServiceAccount annotations %v", sa.Annotations)
		}
	}

	cm := into[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "monitoring", "landform-kube-state-metrics"))
	if cm.Labels["app.kubernetes.io/part-of"] != "kube-prometheus-stack" {
		t.Errorf("kube-state-metrics ConfigMap labels %v", cm.Labels)
	}
	if diff := cmp.Diff(string(readFile(t, kubeStateMetricsConfig)), cm.Data["landform.yaml"]); diff != "" {
		t.Errorf("the ConfigMap's landform.yaml differs from %s (-file +ConfigMap):\n%s", kubeStateMetricsConfig, diff)
	}

	for _, n := range []string{ns, "team-a", "team-b", "monitoring"} {
		ensureNamespace(t, n, nil)
	}
	dryRunApply(t, objs)
}

// checkControllerPod checks what the controller Pod must have whatever the
// values: restricted security, probes on the health port, a writable /tmp,
// its namespace in POD_NAMESPACE; and that the restricted Pod Security
// Standard admits it.
func checkControllerPod(t *testing.T, dep *appsv1.Deployment, metricsPort, healthPort int32) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatalf("security contexts missing: pod %v container %v", psc, sc)
	}
	for name, ok := range map[string]bool{
		"pod runAsNonRoot":               psc.RunAsNonRoot != nil && *psc.RunAsNonRoot,
		"pod runAsUser 65532":            psc.RunAsUser != nil && *psc.RunAsUser == 65532,
		"pod seccomp RuntimeDefault":     psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault,
		"container runAsNonRoot":         sc.RunAsNonRoot != nil && *sc.RunAsNonRoot,
		"no privilege escalation":        sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		"read-only root filesystem":      sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		"all capabilities dropped":       sc.Capabilities != nil && len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL" && len(sc.Capabilities.Add) == 0,
		"not privileged":                 sc.Privileged == nil || !*sc.Privileged,
		"service account":                pod.ServiceAccountName == "landform-controller",
		"liveness probe /healthz":        c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/healthz" && c.LivenessProbe.HTTPGet.Port.StrVal == "health",
		"readiness probe /readyz":        c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz" && c.ReadinessProbe.HTTPGet.Port.StrVal == "health",
		"POD_NAMESPACE from the Pod":     len(c.Env) > 0 && c.Env[0].Name == "POD_NAMESPACE" && c.Env[0].ValueFrom != nil && c.Env[0].ValueFrom.FieldRef.FieldPath == "metadata.namespace",
		"emptyDir at /tmp (--work-dir)":  hasEmptyDirAt(pod, c, "/tmp"),
		"selector matches the Pod":       selects(dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels),
		"metrics and health ports named": portNamed(c, "metrics", metricsPort) && portNamed(c, "health", healthPort),
	} {
		if !ok {
			t.Errorf("controller Pod: %s: not so", name)
		}
	}
	checkPodSecurityRestricted(t, pod)
}

func hasEmptyDirAt(pod corev1.PodSpec, c corev1.Container, dir string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

func portNamed(c corev1.Container, name string, port int32) bool {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort == port
		}
	}
	return false
}

// checkPodSecurityRestricted creates (dry run) a Pod with spec in a
// namespace that enforces the restricted Pod Security Standard: the real
// PodSecurity admission decides. A Pod without the security context is
// refused there, which shows that admission is at work.
func checkPodSecurityRestricted(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	const ns = "psa-restricted"
	ensureNamespace(t, ns, map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"})
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "controller-", Namespace: ns}, Spec: *spec.DeepCopy()}
	// The Priority admission plugin learns a PriorityClass created just
	// before from its informer: retry while it has not yet.
	deadline := time.Now().Add(10 * time.Second)
	err := env.Client.Create(ctx, pod.DeepCopy(), client.DryRunAll)
	for err != nil && strings.Contains(err.Error(), "no PriorityClass with name") && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		err = env.Client.Create(ctx, pod.DeepCopy(), client.DryRunAll)
	}
	if err != nil {
		t.Errorf("the restricted Pod Security Standard refuses the controller Pod: %v", err)
	}
	weak := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "weak-", Namespace: ns}, Spec: *spec.DeepCopy()}
	weak.Spec.SecurityContext, weak.Spec.Containers[0].SecurityContext = nil, nil
	if err := env.Client.Create(ctx, weak, client.DryRunAll); err == nil || !apierrors.IsForbidden(err) {
		t.Errorf("a Pod without security context was not refused (%v): is PodSecurity admission enabled?", err)
	}
}

// TestChartCRDsAreTheGeneratedOnes: charts/landform/crds and the chart's
// copy of the ClusterRole are byte for byte what `make generate` writes
// into config/ (`make generate` copies them; this catches a forgotten run).
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	gen, err := filepath.Glob(path("config", "crd", "bases", "*.yaml"))
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs in config/crd/bases (%v)", err)
	}
	chart, _ := filepath.Glob(path("charts", "landform", "crds", "*.yaml"))
	names := func(files []string) (ns []string) {
		for _, f := range files {
			ns = append(ns, filepath.Base(f))
		}
		return ns
	}
	if diff := cmp.Diff(names(gen), names(chart)); diff != "" {
		t.Fatalf("CRD files in charts/landform/crds differ from config/crd/bases (-generated +chart); run `make generate`:\n%s", diff)
	}
	pairs := map[string]string{path("config", "rbac", "role.yaml"): path("charts", "landform", "files", "controller-clusterrole.yaml")}
	for _, g := range gen {
		pairs[g] = path("charts", "landform", "crds", filepath.Base(g))
	}
	for src, dst := range pairs {
		a, errA := os.ReadFile(src)
		b, errB := os.ReadFile(dst)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is not a copy of %s (%v %v): run `make generate`", dst, src, errA, errB)
		}
	}

	// And helm installs exactly those.
	var rendered []string
	for _, o := range helmTemplate(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			rendered = append(rendered, o.GetName())
		}
	}
	var want []string
	for _, g := range gen {
		want = append(want, readObjects(t, "config", "crd", "bases", filepath.Base(g))[0].GetName())
	}
	if diff := cmp.Diff(want, rendered); diff != "" {
		t.Errorf("CRDs helm renders (-want +got):\n%s", diff)
	}
}

// generatedRules are the controller's rules as controller-gen wrote them.
func generatedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	return into[rbacv1.ClusterRole](t, readObjects(t, "config", "rbac", "role.yaml")[0]).Rules
}

func TestChartControllerRBACIsTheGeneratedOne(t *testing.T) {
	objs := helmTemplate(t)
	cr := into[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "landform-controller"))
	if diff := cmp.Diff(generatedRules(t), cr.Rules); diff != "" {
		t.Errorf("chart ClusterRole rules differ from config/rbac/role.yaml (-generated +chart):\n%s", diff)
	}
	crb := into[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "", "landform-controller"))
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "landform-controller", Namespace: releaseNamespace}}
	if diff := cmp.Diff(want, crb.Subjects); diff != "" || crb.RoleRef.Name != "landform-controller" {
		t.Errorf("ClusterRoleBinding roleRef %v subjects (-want +got):\n%s", crb.RoleRef, diff)
	}
}

// TestChartArgsAreControllerFlags: every flag the chart (with every
// feature on) and config/manager pass exists in the controller binary,
// so a renamed flag cannot crash-loop an installation.
func TestChartArgsAreControllerFlags(t *testing.T) {
	bin := tool(t, "LANDFORM_CONTROLLER_BIN", "landform-controller", "make build")
	// pflag prints the flags on stderr; the exit code does not matter.
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	help := string(out)
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+)`).FindAllStringSubmatch(help, -1) {
		defined[m[1]] = true
	}
	if !defined["metrics-addr"] {
		t.Fatalf("cannot read the controller's flags from `%s -h`:\n%s", bin, help)
	}
	check := func(source string, args []string) {
		for _, a := range args {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !defined[name] {
				t.Errorf("%s passes %s, which landform-controller does not define", source, a)
			}
		}
	}
	dep := into[appsv1.Deployment](t, find(t, helmTemplate(t, "--values", allFeatures), "Deployment", releaseNamespace, "landform-controller"))
	check("the chart", dep.Spec.Template.Spec.Containers[0].Args)
	dep = into[appsv1.Deployment](t, find(t, kustomizeBuild(t, "config/default"), "Deployment", "landform-system", "landform-controller"))
	check("config/manager", dep.Spec.Template.Spec.Containers[0].Args)
}

// valueKeys lists the documented keys of values: a key is a leaf when the
// schema gives it no properties of its own (free-form maps such as
// resources are one value). A value the schema lacks is an error.
func valueKeys(t *testing.T, values map[string]any, schema map[string]any, prefix string) []string {
	t.Helper()
	props, _ := schema["properties"].(map[string]any)
	var ks []string
	for k, v := range values {
		s, ok := props[k].(map[string]any)
		if !ok {
			t.Errorf("values.schema.json has no %s%s", prefix, k)
			continue
		}
		if ref, ok := s["$ref"].(string); ok {
			s = resolveRef(t, ref)
		}
		sub, isMap := v.(map[string]any)
		if _, hasProps := s["properties"]; isMap && hasProps {
			ks = append(ks, valueKeys(t, sub, s, prefix+k+".")...)
			continue
		}
		ks = append(ks, prefix+k)
	}
	sort.Strings(ks)
	return ks
}

func resolveRef(t *testing.T, ref string) map[string]any {
	t.Helper()
	var schema map[string]any
	readJSON(t, &schema, "charts", "landform", "values.schema.json")
	defs, _ := schema["definitions"].(map[string]any)
	d, ok := defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	if !ok {
		t.Fatalf("values.schema.json: unresolved %s", ref)
	}
	return d
}

// TestChartValuesDocumented: every value in values.yaml has a row in the
// chart README's table (and every row names a value), and the
// all-features values set every value.
func TestChartValuesDocumented(t *testing.T) {
	var values, schema, all map[string]any
	readYAML(t, &values, "charts", "landform", "values.yaml")
	readJSON(t, &schema, "charts", "landform", "values.schema.json")
	readYAML(t, &all, filepath.FromSlash(allFeatures))
	want := valueKeys(t, values, schema, "")

	readme, err := os.ReadFile(path("charts", "landform", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		rows = append(rows, m[1])
	}
	sort.Strings(rows)
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("values (-values.yaml +README table rows):\n%s", diff)
	}
	if diff := cmp.Diff(want, valueKeys(t, all, schema, "")); diff != "" {
		t.Errorf("values that %s does not set (-values.yaml +all-features):\n%s", allFeatures, diff)
	}
}

// TestHelmInstallUpgradeUninstall runs the commands a user runs, against
// the test API server (nothing runs the Pods: this is about what Helm
// creates, changes and removes).
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	helm := helmBin(t)
	kc := kubeconfig(t, "")
	henv := helmEnv(t)
	const ns = "landform-helm"
	// allFeatures puts the ServiceMonitor in namespace monitoring.
	for _, n := range []string{"team-helm", "team-a", "team-b", "monitoring"} {
		ensureNamespace(t, n, nil)
	}
	ctx := context.Background()
	helmRun := func(args ...string) string {
		t.Helper()
		out, err := runErr(henv, helm, append(args, "--kubeconfig", kc, "--namespace", ns)...)
		if err != nil {
			t.Fatalf("helm %s: %v", args[0], err)
		}
		return out
	}

	// NOTES without runner namespaces say what is missing.
	out := helmRun("install", "landform", "charts/landform", "--dry-run=client")
	if !strings.Contains(out, "No runner namespaces are configured") {
		t.Errorf("NOTES without runner.namespaces do not say so:\n%s", out)
	}

	out = helmRun("install", "landform", "charts/landform", "--create-namespace", "--set", "runner.namespaces={team-helm}")
	for _, want := range []string{"STATUS: deployed", "Terraform objects can run in: team-helm", "rollout status deployment/landform-controller"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm install output lacks %q:\n%s", want, out)
		}
	}
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "landform-controller"}, &dep); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "team-helm", Name: "landform-runner"}, &corev1.ServiceAccount{}); err != nil {
		t.Errorf("runner ServiceAccount in team-helm: %v", err)
	}

	out = helmRun("upgrade", "landform", "charts/landform", "--values", allFeatures)
	for _, want := range []string{"Terraform objects can run in: team-a, team-b", "Cross-namespace references are ALLOWED", "registry.example/landform-runner:v9.9.9-terraform"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm upgrade output lacks %q:\n%s", want, out)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "landform-controller"}, &dep); err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--keep-runner-pods") {
		t.Errorf("after the upgrade the controller's args are %s", args)
	}
	sm := &unstructured.Unstructured{}
	sm.SetAPIVersion("monitoring.coreos.com/v1")
	sm.SetKind("ServiceMonitor")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "landform-controller"}, sm); err != nil {
		t.Errorf("ServiceMonitor after the upgrade: %v", err)
	}
	// team-helm is no longer a runner namespace: its ServiceAccount goes.
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "team-helm", Name: "landform-runner"}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("runner ServiceAccount in team-helm after the upgrade: %v, want NotFound", err)
	}

	helmRun("uninstall", "landform", "--wait")
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landform-controller"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "landform-controller"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "landform-runner"}},
	} {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after uninstall: %v, want NotFound", o, client.ObjectKeyFromObject(o), err)
		}
	}
	// Helm keeps CRDs (and so every Terraform object) on uninstall.
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "terraforms.infra.landform.dev"}, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}}); err != nil {
		t.Errorf("the CRD after uninstall: %v", err)
	}
}

// The NOTES name the images the release runs, whatever their tag, not the
// chart's appVersion (which an image override leaves behind), and say the
// Flux source CRDs may come after Landform.
func TestNotesNameTheImages(t *testing.T) {
	out, err := runErr(helmEnv(t), helmBin(t), "install", "landform", "charts/landform", "--dry-run=client",
		"--kubeconfig", kubeconfig(t, ""), "--namespace", releaseNamespace,
		"--set", "image.repository=registry.example/landform-controller,image.tag=v9.8.7",
		"--set", "runner.image.repository=registry.example/landform-runner,runner.image.tag=v9.8.6")
	if err != nil {
		t.Fatalf("helm install --dry-run=client: %v", err)
	}
	_, notes, _ := strings.Cut(out, "NOTES:")
	for _, want := range []string{"Controller image: registry.example/landform-controller:v9.8.7", "Runner image: registry.example/landform-runner:v9.8.6", "may come before or after Landform"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "must exist for the controller to start") {
		t.Errorf("NOTES say the source CRDs must exist before the controller starts:\n%s", notes)
	}
}

// keptArtifactMaxSize 0 is a value (keep no artifact, as
// internal/keptartifact's TestMaxSizeFlag holds the controller to), passed
// on like any other; only an empty value leaves the controller's default.
// (Helm's `with` took 0 for unset, and the default 4 MiB applied.)
func TestKeptArtifactMaxSizeZeroIsPassedOn(t *testing.T) {
	for value, want := range map[string]string{"0": "--kept-artifact-max-size=0", "-1": "--kept-artifact-max-size=-1", "": ""} {
		args := []string{}
		if value != "" {
			args = append(args, "--set", "keptArtifactMaxSize="+value)
		}
		dep := into[appsv1.Deployment](t, find(t, helmTemplate(t, args...), "Deployment", releaseNamespace, "landform-controller"))
		var got string
		for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--kept-artifact-max-size") {
				got = a
			}
		}
		if got != want {
			t.Errorf("keptArtifactMaxSize %q: flag %q, want %q", value, got, want)
		}
	}
}
