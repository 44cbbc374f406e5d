package placement

import (
	"fmt"
	"maps"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/certs"
	"github.com/landform-dev/landform/internal/names"
)

const (
	runnerContainer = "runner"
	// runnerUID is the user (and group) runners run as: the distroless
	// "nonroot" user.
	runnerUID = 65532

	// nameLabel and its value mark runner Pods.
	nameLabel      = "app.kubernetes.io/name"
	runnerPodValue = "landform-runner"

	// Where the runner's volumes are mounted.
	tlsMountPath  = "/etc/landform/tls"
	workMountPath = "/work"
	homeMountPath = "/tmp"

	// shmPath is the container's shared memory, a tmpfs of the Pod's.
	shmPath = "/dev/shm"

	tlsVolume  = "runner-tls"
	workVolume = "work"
	homeVolume = "tmp"

	// terminationSlack is added to the runner's grace for its own
	// shutdown: the runner waits grace+5s for terraform, then up to 5s
	// for its calls to return.
	terminationSlack = 15 * time.Second
)

// podLabels are the labels that find an object's runner Pods.
func podLabels(obj *infrav1.Terraform) map[string]string {
	return map[string]string{
		nameLabel:              runnerPodValue,
		infrav1.ManagedByLabel: infrav1.ManagedByValue,
		infrav1.OwnerNameLabel: names.Label(obj.Name),
	}
}

// podFor builds obj's runner Pod: the user's template, and around it what
// Landform needs and will not let the template weaken (security context,
// labels, the TLS Secret, the runner's arguments).
func (p *Pod) podFor(obj *infrav1.Terraform, runID, secretName string) *corev1.Pod {
	var tmpl infrav1.RunnerPodTemplate
	if obj.Spec.RunnerPodTemplate != nil {
		tmpl = *obj.Spec.RunnerPodTemplate
	}
	labels := maps.Clone(tmpl.Metadata.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, podLabels(obj))
	labels[infrav1.RunLabel] = runID

	image := tmpl.Spec.Image
	if image == "" {
		image = p.Image
	}
	port := p.port()
	grace := p.grace()
	args := []string{
		"--listen", ":" + strconv.Itoa(port),
		"--tls-cert", path.Join(tlsMountPath, corev1.TLSCertKey),
		"--tls-key", path.Join(tlsMountPath, corev1.TLSPrivateKeyKey),
		"--tls-client-ca", path.Join(tlsMountPath, certs.CABundleKey),
		"--tls-client-cn", certs.ControllerName,
		"--work-dir", workMountPath,
		"--grace", grace.String(),
		// HOME and the Pod's own /dev/shm: emptied with the work
		// directory when the runner is recycled for another object
		// (pod_reuse.go).
		"--recycle-dir", homeMountPath,
		"--recycle-dir", shmPath,
	}
	for _, m := range p.ProviderMirrors {
		args = append(args, "--provider-mirror", m)
	}
	var env []corev1.EnvVar
	if !hasEnv(tmpl.Spec.Env, "HOME") {
		env = append(env, corev1.EnvVar{Name: "HOME", Value: homeMountPath})
	}
	env = append(env, tmpl.Spec.Env...)
	// The runner takes the state lock under its Pod's identity, which the
	// controller checks before releasing a lock the runner left behind.
	env = append(env, fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"), fieldEnv("POD_UID", "metadata.uid"))
	var resources corev1.ResourceRequirements
	if tmpl.Spec.Resources != nil {
		resources = *tmpl.Spec.Resources
	}
	uid := int64(runnerUID)
	terminationGrace := int64((grace + terminationSlack + time.Second - 1) / time.Second)
	// Owned by the object, so that a Pod a crashed controller left behind
	// goes with it; but not while the object is being deleted: a
	// foreground deletion would have the garbage collector delete the
	// Pod that runs the destroy.
	var owners []metav1.OwnerReference
	if obj.DeletionTimestamp == nil {
		owners = []metav1.OwnerReference{*metav1.NewControllerRef(obj, infrav1.GroupVersion.WithKind(infrav1.TerraformKind))}
	}

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    names.RunnerPodPrefix(obj.Name) + names.RunnerPodInfix,
			Namespace:       obj.Namespace,
			Labels:          labels,
			Annotations:     maps.Clone(tmpl.Metadata.Annotations),
			OwnerReferences: owners,
		},
		Spec: corev1.PodSpec{
			ServiceAccountName:            p.serviceAccountName(obj),
			AutomountServiceAccountToken:  ptr.To(true),
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &terminationGrace,
			EnableServiceLinks:            ptr.To(false),
			NodeSelector:                  maps.Clone(tmpl.Spec.NodeSelector),
			Tolerations:                   tmpl.Spec.Tolerations,
			Affinity:                      tmpl.Spec.Affinity,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      &uid,
				RunAsGroup:     &uid,
				FSGroup:        &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:      runnerContainer,
				Image:     image,
				Args:      args,
				Ports:     []corev1.ContainerPort{{Name: "grpc", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}},
				Env:       env,
				EnvFrom:   tmpl.Spec.EnvFrom,
				Resources: resources,
				VolumeMounts: append([]corev1.VolumeMount{
					{Name: workVolume, MountPath: workMountPath},
					{Name: homeVolume, MountPath: homeMountPath},
					{Name: tlsVolume, MountPath: tlsMountPath, ReadOnly: true},
				}, tmpl.Spec.VolumeMounts...),
				// The runner's last words (a bad flag, a missing
				// certificate) reach the Pod's status.
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             ptr.To(true),
					RunAsUser:                &uid,
					RunAsGroup:               &uid,
					ReadOnlyRootFilesystem:   ptr.To(true),
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
			Volumes: append([]corev1.Volume{
				{Name: workVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: homeVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: tlsVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName, DefaultMode: ptr.To(int32(0o440))}}},
			}, tmpl.Spec.Volumes...),
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// describePod summarises why a Pod is not running: its phase, the
// conditions that are not true and the containers' states, with reasons
// and messages (Unschedulable, ImagePullBackOff, an exit code).
func describePod(pod *corev1.Pod) string {
	var parts []string
	phase := string(pod.Status.Phase)
	if phase == "" {
		phase = string(corev1.PodPending)
	}
	parts = append(parts, "phase "+phase)
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		parts = append(parts, joinNonEmpty(pod.Status.Reason, pod.Status.Message))
	}
	for _, c := range pod.Status.Conditions {
		if c.Status == corev1.ConditionTrue || (c.Reason == "" && c.Message == "") {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s %s", c.Type, c.Status, joinNonEmpty(c.Reason, c.Message)))
	}
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("container %s waiting: %s", cs.Name, joinNonEmpty(cs.State.Waiting.Reason, cs.State.Waiting.Message)))
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			parts = append(parts, fmt.Sprintf("container %s terminated (exit code %d): %s", cs.Name, t.ExitCode, joinNonEmpty(t.Reason, strings.TrimSpace(t.Message))))
		}
	}
	if len(parts) == 1 && pod.Status.Phase == "" {
		parts = append(parts, "no status reported yet (no scheduler or kubelet has seen it)")
	}
	return strings.Join(parts, "; ")
}

func joinNonEmpty(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}
