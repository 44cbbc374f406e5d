package placement

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

func TestPodFor(t *testing.T) {
	p := &Pod{Image: "ghcr.io/landform-dev/landform-runner:v1", Grace: 45 * time.Second, ProviderMirrors: []string{"/providers"}}
	uid := int64(65532)
	securePod := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      &uid,
		RunAsGroup:     &uid,
		FSGroup:        &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	secureContainer := &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                &uid,
		RunAsGroup:               &uid,
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	args := []string{
		"--listen", ":9443",
		"--tls-cert", "/etc/landform/tls/tls.crt",
		"--tls-key", "/etc/landform/tls/tls.key",
		"--tls-client-ca", "/etc/landform/tls/ca.crt",
		"--tls-client-cn", "landform-controller",
		"--work-dir", "/work",
		"--grace", "45s",
		"--recycle-dir", "/tmp",
		"--recycle-dir", "/dev/shm",
		"--provider-mirror", "/providers",
	}
	ownVolumes := []corev1.Volume{
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "runner-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "landform-runner-tls", DefaultMode: ptr.To(int32(0o440))}}},
	}
	ownMounts := []corev1.VolumeMount{
		{Name: "work", MountPath: "/work"},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "runner-tls", MountPath: "/etc/landform/tls", ReadOnly: true},
	}
	owner := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "infra.landform.dev/v1alpha1", Kind: "Terraform", Name: name, UID: "uid-1", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	ownLabels := func(name string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": "landform-runner", "app.kubernetes.io/managed-by": "landform", "infra.landform.dev/terraform": name, "infra.landform.dev/run": "run-1"}
	}

	resources := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"infra"}}}}},
	}}}
	userVolume := corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	userMount := corev1.VolumeMount{Name: "cache", MountPath: "/cache"}
	envFrom := []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-creds"}}}}
	tolerations := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}

	// The default Pod, and the one a template changes: its labels and
	// annotations join the runner's own, its container and scheduling
	// fields are used, and its volumes come after the runner's.
	defaults := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "db-runner-", Namespace: "team-a", Labels: ownLabels("db"), OwnerReferences: owner("db")},
		Spec: corev1.PodSpec{
			ServiceAccountName:            "landform-runner",
			AutomountServiceAccountToken:  ptr.To(true),
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(60)),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext:               securePod,
			Containers: []corev1.Container{{
				Name:                     "runner",
				Image:                    "ghcr.io/landform-dev/landform-runner:v1",
				Args:                     args,
				Ports:                    []corev1.ContainerPort{{Name: "grpc", ContainerPort: 9443, Protocol: corev1.ProtocolTCP}},
				Env:                      append([]corev1.EnvVar{{Name: "HOME", Value: "/tmp"}}, identityEnv...),
				VolumeMounts:             ownMounts,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext:          secureContainer,
			}},
			Volumes: ownVolumes,
		},
	}
	templated := defaults.DeepCopy()
	templated.Labels["team"] = "a"
	templated.Annotations = map[string]string{"cost-center": "42"}
	templated.Spec.ServiceAccountName = "deployer"
	templated.Spec.NodeSelector = map[string]string{"pool": "infra"}
	templated.Spec.Tolerations = tolerations
	templated.Spec.Affinity = affinity
	templated.Spec.Volumes = append(templated.Spec.Volumes, userVolume)
	container := &templated.Spec.Containers[0]
	container.Image = "registry.example/runner:custom"
	container.Env = append([]corev1.EnvVar{{Name: "HOME", Value: "/home/runner"}, {Name: "TF_LOG", Value: "info"}}, identityEnv...)
	container.EnvFrom = envFrom
	container.Resources = *resources
	container.VolumeMounts = append(container.VolumeMounts, userMount)

	tests := []struct {
		name string
		obj  *infrav1.Terraform
		want *corev1.Pod
	}{
		{
			name: "defaults",
			obj:  &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db", UID: "uid-1"}},
			want: defaults,
		},
		{
			name: "template",
			obj: &infrav1.Terraform{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db", UID: "uid-1"},
				Spec: infrav1.TerraformSpec{
					ServiceAccountName: "deployer",
					RunnerPodTemplate: &infrav1.RunnerPodTemplate{
						Metadata: infrav1.RunnerPodMetadata{
							// A template cannot take the labels that find
							// runner Pods.
							Labels:      map[string]string{"team": "a", "app.kubernetes.io/name": "mine", "infra.landform.dev/terraform": "other"},
							Annotations: map[string]string{"cost-center": "42"},
						},
						Spec: infrav1.RunnerPodSpec{
							Image:        "registry.example/runner:custom",
							Env:          []corev1.EnvVar{{Name: "HOME", Value: "/home/runner"}, {Name: "TF_LOG", Value: "info"}},
							EnvFrom:      envFrom,
							Resources:    resources,
							NodeSelector: map[string]string{"pool": "infra"},
							Tolerations:  tolerations,
							Affinity:     affinity,
							Volumes:      []corev1.Volume{userVolume},
							VolumeMounts: []corev1.VolumeMount{userMount},
						},
					},
				},
			},
			want: templated,
		},
	}
	deleting := tests[0].obj.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{infrav1.Finalizer}
	unowned := tests[0].want.DeepCopy()
	unowned.OwnerReferences = nil
	// The Pod that runs the destroy of an object being deleted is not
	// owned by it, or a foreground deletion would delete it mid-destroy.
	tests = append(tests, struct {
		name string
		obj  *infrav1.Terraform
		want *corev1.Pod
	}{name: "object being deleted", obj: deleting, want: unowned})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.podFor(tt.obj, "run-1", "landform-runner-tls")
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("Pod (-want +got):\n%s", d)
			}
		})
	}
}

func TestDescribePod(t *testing.T) {
	tests := []struct {
		name   string
		status corev1.PodStatus
		want   string
	}{
		{name: "nothing yet", want: "phase Pending; no status reported yet (no scheduler or kubelet has seen it)"},
		{
			name: "unschedulable",
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient memory."},
			}},
			want: "phase Pending; PodScheduled=False Unschedulable: 0/3 nodes are available: 3 Insufficient memory.",
		},
		{
			name: "image pull",
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [runner]"},
			}, ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "runner:nope"`}}}}},
			want: `phase Pending; ContainersReady=False ContainersNotReady: containers with unready status: [runner]; container runner waiting: ImagePullBackOff: Back-off pulling image "runner:nope"`,
		},
		{
			name: "exited",
			status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", Message: "runner failed: --tls-cert is required\n",
			}}}}},
			want: "phase Failed; container runner terminated (exit code 1): Error: runner failed: --tls-cert is required",
		},
		{
			name:   "evicted",
			status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: ephemeral-storage."},
			want:   "phase Failed; Evicted: The node was low on resource: ephemeral-storage.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describePod(&corev1.Pod{Status: tt.status}); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// identityEnv is how a runner learns its Pod's identity, under which it
// takes the state lock.
var identityEnv = []corev1.EnvVar{
	{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
	{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
}

// Every name the CRD accepts gives a runner Pod whose name is a DNS label
// (its hostname) and whose labels are valid, and a shortened name still
// selects the Pod.
func TestPodNames(t *testing.T) {
	for _, n := range []int{2, 50, 63, 64, 200, 253} {
		name := strings.Repeat("a", n-1) + "z"
		obj := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		pod := (&Pod{}).podFor(obj, "run-1", "s")
		if errs := validation.IsDNS1123Label(pod.GenerateName + "x7k2p"); len(errs) > 0 {
			t.Errorf("%d characters: Pod name %q: %v", n, pod.GenerateName+"x7k2p", errs)
		}
		if errs := metavalidation.ValidateLabels(pod.Labels, field.NewPath("labels")); len(errs) > 0 {
			t.Errorf("%d characters: Pod labels: %v", n, errs)
		}
		if !labels.SelectorFromSet(podLabels(obj)).Matches(labels.Set(pod.Labels)) {
			t.Errorf("%d characters: the Pod's labels %v do not select it", n, pod.Labels)
		}
	}
}
