package names_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
	"github.com/landform-dev/landform/internal/owned"
	"github.com/landform-dev/landform/internal/runlog"
	"github.com/landform-dev/landform/internal/statelock"
)

// name returns a valid object name of n characters that differs from
// others of its length in its last character.
func name(n int, last byte) string {
	return strings.Repeat("a", n-1) + string(last)
}

func TestLabel(t *testing.T) {
	tests := []struct {
		in   string
		want string // empty: only check length, validity, stability
	}{
		{"db", "db"},
		{name(10, 'z'), name(10, 'z')},
		{name(63, 'z'), name(63, 'z')},
		{name(64, 'z'), ""},
		{name(200, 'z'), ""},
		{name(253, 'z'), ""},
		// Pinned: the values Landform gave these names before this package.
		{strings.Repeat("b", 64), strings.Repeat("b", 54) + "-a0fab137"},
		{strings.Repeat("c", 200), strings.Repeat("c", 54) + "-5e39abe8"},
		// A cut that would end in '.' or '-' drops them.
		{strings.Repeat("a", 53) + "." + strings.Repeat("c", 20), ""},
		{strings.Repeat("a", 53) + "-" + strings.Repeat("c", 20), ""},
		{strings.Repeat("a", 60) + "-" + strings.Repeat("b", 100), ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := names.Label(tt.in)
		if tt.want != "" && got != tt.want {
			t.Errorf("Label(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if len(tt.in) <= names.MaxLabelValue && got != tt.in {
			t.Errorf("Label(%q) = %q: a value that fits must stay as it is", tt.in, got)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("Label(%.20q...) = %q is not a valid label value: %v", tt.in, got, errs)
		}
		if again := names.Label(tt.in); again != got {
			t.Errorf("Label(%.20q...) is not stable: %q, then %q", tt.in, got, again)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%.20q... and %.20q... give the same label value %q", prev, tt.in, got)
		}
		seen[got] = tt.in
	}
}

// Long names that share their first characters stay apart.
func TestFitDistinct(t *testing.T) {
	for _, n := range []int{64, 200, 253} {
		a, b := names.Label(name(n, 'y')), names.Label(name(n, 'z'))
		if a == b {
			t.Errorf("two %d-character names give %q", n, a)
		}
		if len(a) != names.MaxLabelValue {
			t.Errorf("Label of %d characters has %d: %q", n, len(a), a)
		}
	}
	if got := names.Fit("x", 20, "ignored"); got != "x" {
		t.Errorf("Fit of a short value = %q", got)
	}
	if a, b := names.Fit(strings.Repeat("p", 40), 20, "one"), names.Fit(strings.Repeat("p", 40), 20, "two"); a == b || len(a) != 20 {
		t.Errorf("Fit hashes what it is told to: %q, %q", a, b)
	}
}

// Every name and label Landform derives from an object fits Kubernetes'
// limits for every name the CRD accepts (up to 253 characters, dots
// allowed) and workspace (up to 63), and stays exactly as it was for names
// that always fitted.
func TestObjectNames(t *testing.T) {
	lengths := []int{1, 10, 49, 50, 63, 64, 200, 253}
	var objects []*v1alpha1.Terraform
	for _, n := range lengths {
		for _, ws := range []string{"", "default", strings.Repeat("w", 63)} {
			objects = append(objects, &v1alpha1.Terraform{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name(n, 'z')},
				Spec:       v1alpha1.TerraformSpec{Workspace: ws},
			})
		}
		if n > 4 {
			dotted := name(n-4, 'z') + ".e-u"
			objects = append(objects, &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: dotted}})
		}
	}
	// A dot wherever a cut may land: a DNS name's parts must not end
	// with it.
	for dot := 40; dot < 252; dot++ {
		n := name(dot, 'z') + "." + name(252-dot, 'z')
		objects = append(objects, &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}})
	}
	objects = append(objects, &v1alpha1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name(253, 'z')},
		Spec:       v1alpha1.TerraformSpec{BackendConfig: &v1alpha1.BackendConfig{SecretSuffix: name(63, 's')}},
	})

	for _, obj := range objects {
		n, ws := obj.Name, obj.GetWorkspace()
		suffix := names.SecretSuffix(obj)
		subdomains := map[string]string{
			"state Secret":    names.StateSecret(obj),
			"state Lease":     names.StateLease(obj),
			"state identity":  names.StateIdentity(obj),
			"log Secret":      runlog.SecretName(n),
			"plan chunk":      owned.ChunkName("tfplan", n, 999999),
			"artifact chunk":  owned.ChunkName("tfartifact", n, 0),
			"runner Pod name": names.RunnerPodPrefix(n) + names.RunnerPodInfix + "x7k2p",
		}
		for what, v := range subdomains {
			if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
				t.Errorf("%d characters, workspace %q: %s %q: %v", len(n), ws, what, v, errs)
			}
		}
		if len(names.StateIdentity(obj)) > names.MaxDNSLabel {
			t.Errorf("%d characters: state identity %q is longer than it ever was", len(n), names.StateIdentity(obj))
		}
		for what, v := range map[string]string{"runner Pod name": subdomains["runner Pod name"]} {
			if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
				t.Errorf("%d characters: %s %q is not a DNS label (a hostname): %v", len(n), what, v, errs)
			}
		}
		labelSets := map[string]map[string]string{
			"the backend's state labels": statelock.LeaseLabels(ws, suffix),
			"Landform's labels":          owned.Labels(obj),
		}
		for what, l := range labelSets {
			if errs := metavalidation.ValidateLabels(l, field.NewPath("labels")); len(errs) > 0 {
				t.Errorf("%d characters, workspace %q: %s: %v", len(n), ws, what, errs)
			}
		}
		if names.StateLease(obj) != "lock-"+names.StateSecret(obj) {
			t.Errorf("state Lease %q is not the backend's for %q", names.StateLease(obj), names.StateSecret(obj))
		}

		// What always fitted stays exactly as it was: the state Secret
		// and its labels name an existing object's state.
		if obj.Spec.BackendConfig != nil {
			if suffix != obj.Spec.BackendConfig.SecretSuffix {
				t.Errorf("secretSuffix %q not used: %q", obj.Spec.BackendConfig.SecretSuffix, suffix)
			}
			continue
		}
		if len(n) <= names.MaxLabelValue {
			if suffix != n || names.StateSecret(obj) != "tfstate-"+ws+"-"+n || owned.Labels(obj)[v1alpha1.OwnerNameLabel] != n {
				t.Errorf("%q: suffix %q, state Secret %q, label %q changed", n, suffix, names.StateSecret(obj), owned.Labels(obj)[v1alpha1.OwnerNameLabel])
			}
		}
		if len(n) <= 253-len("tfplan-")-7 && owned.ChunkName("tfplan", n, 3) != "tfplan-"+n+"-3" {
			t.Errorf("plan chunk of %q changed: %q", n, owned.ChunkName("tfplan", n, 3))
		}
		if len(n) <= 253-len("tflogs-") && runlog.SecretName(n) != "tflogs-"+n {
			t.Errorf("log Secret of %q changed: %q", n, runlog.SecretName(n))
		}
	}
}

// The state identity's names are those Landform gave before this package
// (an existing object keeps its ServiceAccount, Role and RoleBinding),
// except for names with dots, which once shared one with dashes.
func TestStateIdentity(t *testing.T) {
	tests := []struct{ name, want string }{
		{"db", "landform-state-db"},
		{"db.prod", "landform-state-db.prod"},
		{"db-prod", "landform-state-db-prod"},
		{name(48, 'z'), "landform-state-" + name(48, 'z')},
		{"landform-state-identity-of-a-name-with-55-characters-x", "landform-state-landform-state-identity-of-a-name-with-251fc033"},
		{"db.prod-" + strings.Repeat("x", 50), "landform-state-db.prod-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-5467db7c"},
		{strings.Repeat("a", 63), "landform-state-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-7d3e74a0"},
		{strings.Repeat("b", 64), "landform-state-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-a0fab137"},
		{strings.Repeat("c", 200), "landform-state-ccccccccccccccccccccccccccccccccccccccc-5e39abe8"},
	}
	for _, tt := range tests {
		obj := &v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Name: tt.name}}
		if got := names.StateIdentity(obj); got != tt.want {
			t.Errorf("StateIdentity(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestRunnerPodPrefix(t *testing.T) {
	long := strings.Repeat("a", 100)
	tests := []struct{ name, want string }{
		{"db", "db"},
		{"db.prod", "db-prod"},
		{long, long[:50]},
		{strings.Repeat("a", 49) + "-b", strings.Repeat("a", 49)},
		{name(253, 'z'), strings.Repeat("a", 50)},
	}
	for _, tt := range tests {
		got := names.RunnerPodPrefix(tt.name)
		if got != tt.want {
			t.Errorf("RunnerPodPrefix(%.20q...) = %q, want %q", tt.name, got, tt.want)
		}
		pod := got + names.RunnerPodInfix + "x7k2p"
		if !names.IsRunnerPodName(pod, tt.name) {
			t.Errorf("IsRunnerPodName(%q, %.20q...) = false", pod, tt.name)
		}
	}
}
