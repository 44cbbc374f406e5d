package placement

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
)

func TestImageAllowed(t *testing.T) {
	tests := []struct {
		image    string
		prefixes []string
		want     bool
	}{
		{"ghcr.io/acme/runner:v1", []string{"ghcr.io/acme/"}, true},
		{"ghcr.io/acme/runner:v1", []string{"ghcr.io/acme"}, true},
		{"ghcr.io/acmeevil/runner:v1", []string{"ghcr.io/acme"}, false},
		{"ghcr.io/acmeevil/runner:v1", []string{"ghcr.io/acme/"}, false},
		{"ghcr.io/acme/runner", []string{"ghcr.io/acme/runner"}, true},
		{"ghcr.io/acme/runner:v1", []string{"ghcr.io/acme/runner"}, true},
		{"ghcr.io/acme/runner@sha256:0123", []string{"ghcr.io/acme/runner"}, true},
		{"ghcr.io/acme/runner-debug:v1", []string{"ghcr.io/acme/runner"}, false},
		{"ghcr.io/acme/runner:v1", []string{"ghcr.io/acme/runner:"}, true},
		{"ghcr.io/acme/runner:v1.2", []string{"ghcr.io/acme/runner:v1"}, false},
		{"ghcr.io/acme/runner:v1@sha256:0123", []string{"ghcr.io/acme/runner:v1"}, true},
		{"ghcr.io/acme/runner@sha256:0123", []string{"ghcr.io/acme/runner@"}, true},
		{"ghcr.io/acme/runner:v1", []string{"registry.example/", "ghcr.io/acme/"}, true},
		{"registry.example:5000/runner", []string{"registry.example"}, true},
		{"registry.example.evil/runner", []string{"registry.example"}, false},
		// Compared as written: the short form is another string.
		{"alpine:3", []string{"docker.io/library/"}, false},
		{"ghcr.io/acme/runner:v1", []string{""}, false},
		{"ghcr.io/acme/runner:v1", nil, false},
	}
	for _, tt := range tests {
		if got := ImageAllowed(tt.image, tt.prefixes); got != tt.want {
			t.Errorf("ImageAllowed(%q, %q) = %t, want %t", tt.image, tt.prefixes, got, tt.want)
		}
	}
}

func TestParseImagePrefixes(t *testing.T) {
	for in, want := range map[string][]string{
		"":                                     nil,
		" , ":                                  nil,
		"ghcr.io/acme/":                        {"ghcr.io/acme/"},
		"ghcr.io/acme/, registry.example/x ,,": {"ghcr.io/acme/", "registry.example/x"},
	} {
		if d := cmp.Diff(want, ParseImagePrefixes(in)); d != "" {
			t.Errorf("ParseImagePrefixes(%q) (-want +got):\n%s", in, d)
		}
	}
}

// TestPodPolicyCheck: each refusal has its reason, stalls, and says what
// was refused and what to change; what the policy allows passes.
func TestPodPolicyCheck(t *testing.T) {
	locked := PodPolicy{EnforceDefaultServiceAccount: true, AllowedImages: []string{"ghcr.io/acme/", "registry.example/runner"}}
	hostPath := corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/run"}}}
	withTemplate := func(spec infrav1.RunnerPodSpec) *infrav1.Terraform {
		return &infrav1.Terraform{Spec: infrav1.TerraformSpec{RunnerPodTemplate: &infrav1.RunnerPodTemplate{Spec: spec}}}
	}
	tests := []struct {
		name   string
		policy PodPolicy
		obj    *infrav1.Terraform
		reason string // "" when allowed
		says   []string
	}{
		{name: "nothing set", policy: locked, obj: &infrav1.Terraform{}},
		{name: "default account named", policy: locked, obj: &infrav1.Terraform{Spec: infrav1.TerraformSpec{ServiceAccountName: "landform-runner"}}},
		{
			name: "other account enforced", policy: locked,
			obj:    &infrav1.Terraform{Spec: infrav1.TerraformSpec{ServiceAccountName: "deployer"}},
			reason: infrav1.RunnerServiceAccountNotAllowedReason,
			says:   []string{`spec.serviceAccountName "deployer" is not allowed`, "ServiceAccount landform-runner", "--enforce-default-service-account", "remove spec.serviceAccountName"},
		},
		{
			name: "other account against another default", policy: PodPolicy{DefaultServiceAccount: "tenant", EnforceDefaultServiceAccount: true},
			obj:    &infrav1.Terraform{Spec: infrav1.TerraformSpec{ServiceAccountName: "landform-runner"}},
			reason: infrav1.RunnerServiceAccountNotAllowedReason,
			says:   []string{`"landform-runner" is not allowed`, "ServiceAccount tenant"},
		},
		{name: "other account not enforced", policy: PodPolicy{AllowedImages: locked.AllowedImages}, obj: &infrav1.Terraform{Spec: infrav1.TerraformSpec{ServiceAccountName: "deployer"}}},
		{
			name: "another object's state identity, not enforced", policy: PodPolicy{},
			obj:    &infrav1.Terraform{Spec: infrav1.TerraformSpec{ServiceAccountName: "landform-state-other"}},
			reason: infrav1.RunnerServiceAccountNotAllowedReason,
			says:   []string{`spec.serviceAccountName "landform-state-other" is not allowed`, "state identities of Terraform objects", "remove spec.serviceAccountName"},
		},
		{name: "allowed image", policy: locked, obj: withTemplate(infrav1.RunnerPodSpec{Image: "ghcr.io/acme/runner:v2"})},
		{name: "allowed image by repository", policy: locked, obj: withTemplate(infrav1.RunnerPodSpec{Image: "registry.example/runner@sha256:0123"})},
		{name: "the controller's own image", policy: locked, obj: withTemplate(infrav1.RunnerPodSpec{Image: "ghcr.io/landform-dev/landform-runner:v1"})},
		{name: "any image without a list", policy: PodPolicy{}, obj: withTemplate(infrav1.RunnerPodSpec{Image: "evil.example/runner:latest"})},
		{
			name: "image outside the list", policy: locked,
			obj:    withTemplate(infrav1.RunnerPodSpec{Image: "ghcr.io/acmeevil/runner:v1"}),
			reason: infrav1.RunnerImageNotAllowedReason,
			says: []string{`spec.runnerPodTemplate.spec.image "ghcr.io/acmeevil/runner:v1" is not allowed`, `"ghcr.io/acme/", "registry.example/runner"`,
				"--allowed-runner-images", `"ghcr.io/landform-dev/landform-runner:v1"`, "remove spec.runnerPodTemplate.spec.image"},
		},
		{
			name: "image beside an allowed repository", policy: locked,
			obj:    withTemplate(infrav1.RunnerPodSpec{Image: "registry.example/runner-debug:v1"}),
			reason: infrav1.RunnerImageNotAllowedReason,
		},
		{
			name: "hostPath volume", policy: PodPolicy{},
			obj:    withTemplate(infrav1.RunnerPodSpec{Volumes: []corev1.Volume{hostPath}, VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}}),
			reason: infrav1.RunnerPodTemplateNotAllowedReason,
			says:   []string{`volume "host" is a hostPath volume, which reaches the node`, "remove these from spec.runnerPodTemplate"},
		},
		{
			name: "gitRepo and flexVolume", policy: PodPolicy{},
			obj: withTemplate(infrav1.RunnerPodSpec{Volumes: []corev1.Volume{
				{Name: "git", VolumeSource: corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{Repository: "https://example.invalid/x.git"}}},
				{Name: "flex", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "example/driver"}}},
			}}),
			reason: infrav1.RunnerPodTemplateNotAllowedReason,
			says:   []string{`volume "git" is a gitRepo volume`, `volume "flex" is a flexVolume volume`},
		},
		{
			name: "a runner volume's name", policy: PodPolicy{},
			obj:    withTemplate(infrav1.RunnerPodSpec{Volumes: []corev1.Volume{{Name: "runner-tls", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}),
			reason: infrav1.RunnerPodTemplateNotAllowedReason,
			says:   []string{`volume "runner-tls" has the name of one of the runner's own volumes`},
		},
		{
			name: "mounts over the runner's", policy: PodPolicy{},
			obj: withTemplate(infrav1.RunnerPodSpec{VolumeMounts: []corev1.VolumeMount{
				{Name: "a", MountPath: "/work"},
				{Name: "b", MountPath: "/tmp/cache"},
				{Name: "c", MountPath: "/etc/landform"},
				{Name: "d", MountPath: "/etc/landform/tls/"},
				{Name: "e", MountPath: "/"},
			}}),
			reason: infrav1.RunnerPodTemplateNotAllowedReason,
			says: []string{
				`volumeMount "a" at /work overlaps the runner's own mount /work`,
				`volumeMount "b" at /tmp/cache overlaps the runner's own mount /tmp`,
				`volumeMount "c" at /etc/landform overlaps the runner's own mount /etc/landform/tls`,
				`volumeMount "d" at /etc/landform/tls/ overlaps`,
				`volumeMount "e" at / overlaps`,
			},
		},
		{
			name: "mounts beside the runner's", policy: PodPolicy{},
			obj: withTemplate(infrav1.RunnerPodSpec{
				Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "cache", MountPath: "/cache"},
					{Name: "cache", MountPath: "/workspace"},
					{Name: "cache", MountPath: "/etc/ssl/certs", MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
				},
			}),
		},
		{
			name: "bidirectional propagation", policy: PodPolicy{},
			obj:    withTemplate(infrav1.RunnerPodSpec{VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache", MountPropagation: ptr.To(corev1.MountPropagationBidirectional)}}}),
			reason: infrav1.RunnerPodTemplateNotAllowedReason,
			says:   []string{"Bidirectional mount propagation, which needs a privileged container"},
		},
		{
			name: "security profile annotations", policy: PodPolicy{},
			obj: &infrav1.Terraform{Spec: infrav1.TerraformSpec{RunnerPodTemplate: &infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Annotations: map[string]string{
				"container.apparmor.security.beta.kubernetes.io/runner": "unconfined",
				"seccomp.security.alpha.kubernetes.io/pod":              "unconfined",
				"cost-center": "42",
			}}}}},
			reason: infrav1.RunnerPodTemplateNotAllowedReason,
			says:   []string{"annotation container.apparmor.security.beta.kubernetes.io/runner sets a security profile", "annotation seccomp.security.alpha.kubernetes.io/pod sets"},
		},
		{
			// The account is refused first, then the image, then the template.
			name: "everything wrong", policy: locked,
			obj: &infrav1.Terraform{Spec: infrav1.TerraformSpec{ServiceAccountName: "deployer", RunnerPodTemplate: &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{
				Image: "evil.example/x", Volumes: []corev1.Volume{hostPath},
			}}}},
			reason: infrav1.RunnerServiceAccountNotAllowedReason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pod{Image: "ghcr.io/landform-dev/landform-runner:v1", Policy: tt.policy}
			err := p.Check(tt.obj)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("want a placement error with reason %s, got %v", tt.reason, err)
			}
			if perr.Reason != tt.reason || !perr.Stalling {
				t.Fatalf("reason %s stalling %t, want %s stalling (message: %s)", perr.Reason, perr.Stalling, tt.reason, perr.Message)
			}
			for _, want := range tt.says {
				if !strings.Contains(perr.Message, want) {
					t.Errorf("message %q does not say %q", perr.Message, want)
				}
			}
		})
	}
}

// TestDefaultServiceAccountPolicy: --default-service-account names the
// runner Pod's ServiceAccount when the object names none, and only then.
func TestDefaultServiceAccountPolicy(t *testing.T) {
	p := &Pod{Image: "runner:v1", Policy: PodPolicy{DefaultServiceAccount: "tenant-runner"}}
	for account, want := range map[string]string{"": "tenant-runner", "deployer": "deployer"} {
		obj := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db"}, Spec: infrav1.TerraformSpec{ServiceAccountName: account}}
		if got := p.podFor(obj, "run-1", "tls").Spec.ServiceAccountName; got != want {
			t.Errorf("spec.serviceAccountName %q: the Pod runs as %q, want %q", account, got, want)
		}
	}
	p.Policy = PodPolicy{}
	if got := p.podFor(&infrav1.Terraform{}, "run-1", "tls").Spec.ServiceAccountName; got != "landform-runner" {
		t.Errorf("without a policy the Pod runs as %q, want the API's default landform-runner", got)
	}
}

// TestPolicyRefusesBeforeAnythingExists: a refused object gets no Pod and
// not even the namespace's certificate Secret; the same object allowed
// (a policy without the limit) gets its Pod from the fake kubelet.
func TestPolicyRefusesBeforeAnythingExists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := runnerNamespace(t, true)
	obj := newTerraform(t, ns, "locked", func(o *infrav1.Terraform) {
		o.Spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{
			Volumes:      []corev1.Volume{{Name: "docker", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/run/docker.sock"}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "docker", MountPath: "/var/run/docker.sock"}},
		}}
	})
	_, err := newPodPlacer().Start(ctx, obj, "run-1")
	perr := wantPlacementError(t, err, infrav1.RunnerPodTemplateNotAllowedReason)
	if !perr.Stalling || !strings.Contains(perr.Message, `volume "docker" is a hostPath volume`) {
		t.Fatalf("stalling %t, message %q", perr.Stalling, perr.Message)
	}

	obj = newTerraform(t, ns, "image", func(o *infrav1.Terraform) {
		o.Spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{Image: "ghcr.io/landform-dev/landform-runner-debug:test"}}
	})
	p := newPodPlacer()
	p.Policy = PodPolicy{AllowedImages: []string{"ghcr.io/landform-dev/landform-runner"}}
	_, err = p.Start(ctx, obj, "run-1")
	wantPlacementError(t, err, infrav1.RunnerImageNotAllowedReason)

	if names := fake.CreatedIn(ns); len(names) != 0 {
		t.Fatalf("Pods created for refused objects: %v", names)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: certs.RunnerSecretName}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the runner certificate Secret of %s: %v, want NotFound: nothing is prepared for a refused object", ns, err)
	}

	p.Policy.AllowedImages = []string{"ghcr.io/landform-dev/"}
	startRun(t, ctx, p, obj)
	if pod := onlyPod(t, ns); pod.Spec.Containers[0].Image != "ghcr.io/landform-dev/landform-runner-debug:test" {
		t.Fatalf("image %q", pod.Spec.Containers[0].Image)
	}
}

// TestDefaultServiceAccountRuns: a runner Pod runs under the policy's
// default ServiceAccount; a namespace without it is told which to create.
func TestDefaultServiceAccountRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPodPlacer()
	p.Policy = PodPolicy{DefaultServiceAccount: "tenant-runner", EnforceDefaultServiceAccount: true}

	ns := runnerNamespace(t, true) // with landform-runner, not tenant-runner
	obj := newTerraform(t, ns, "tenant", nil)
	_, err := p.Start(ctx, obj, "run-1")
	perr := wantPlacementError(t, err, infrav1.RunnerServiceAccountMissingReason)
	if !strings.Contains(perr.Message, "ServiceAccount "+ns+"/tenant-runner does not exist") || perr.Stalling {
		t.Fatalf("stalling %t, message %q", perr.Stalling, perr.Message)
	}

	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-runner"}}); err != nil {
		t.Fatal(err)
	}
	startRun(t, ctx, p, obj)
	if got := onlyPod(t, ns).Spec.ServiceAccountName; got != "tenant-runner" {
		t.Fatalf("the runner Pod runs as %q, want tenant-runner", got)
	}
}

// TestRunnerPodsAreRestricted: a runner Pod built from a template that
// uses everything the policy allows is admitted where the restricted Pod
// Security Standard is enforced (the real PodSecurity admission decides,
// dry run); the same Pod without Landform's security context is not, which
// shows that admission is at work.
func TestRunnerPodsAreRestricted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	nsObj := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
	if err := env.Client.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	obj := &infrav1.Terraform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rich", UID: "uid-1"},
		Spec: infrav1.TerraformSpec{RunnerPodTemplate: &infrav1.RunnerPodTemplate{
			Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"cost-center": "42"}},
			Spec: infrav1.RunnerPodSpec{
				Image:        "ghcr.io/acme/runner:v1",
				Env:          []corev1.EnvVar{{Name: "TF_LOG", Value: "info"}},
				EnvFrom:      []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}},
				Resources:    &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				NodeSelector: map[string]string{"pool": "infra"},
				Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}},
				Volumes: []corev1.Volume{
					{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
					{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}},
					{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "cache", MountPath: "/cache"},
					{Name: "data", MountPath: "/data"},
					{Name: "ca", MountPath: "/etc/ssl/certs/acme", ReadOnly: true},
					{Name: "creds", MountPath: "/var/run/creds", ReadOnly: true},
				},
			},
		}},
	}
	p := &Pod{Image: "ghcr.io/landform-dev/landform-runner:v1", Policy: PodPolicy{EnforceDefaultServiceAccount: true, AllowedImages: []string{"ghcr.io/acme/"}}}
	if err := p.Check(obj); err != nil {
		t.Fatalf("the policy refuses the template: %v", err)
	}
	pod := p.podFor(obj, "run-1", "landform-runner-tls")
	pod.OwnerReferences = nil
	if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("the restricted Pod Security Standard refuses the runner Pod: %v", err)
	}
	weak := p.podFor(obj, "run-1", "landform-runner-tls")
	weak.OwnerReferences = nil
	weak.Spec.SecurityContext, weak.Spec.Containers[0].SecurityContext = nil, nil
	if err := env.Client.Create(ctx, weak, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Fatalf("a runner Pod without its security context: %v, want Forbidden: is PodSecurity admission enabled?", err)
	}
}
