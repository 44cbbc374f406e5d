package placement

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/names"
)

// PodPolicy is what the operator lets Terraform authors choose for their
// runner Pods (the controller's lockdown flags). Authors need no Pod
// permission of their own, since the controller creates the Pods: this is
// where the operator says which image and ServiceAccount a Terraform
// object may run with. Whatever it says, a template never reaches the node
// or shadows the runner's own mounts (see Check).
type PodPolicy struct {
	// DefaultServiceAccount runs the runners of objects that name no
	// spec.serviceAccountName (--default-service-account). Empty: the
	// API's default, landform-runner.
	DefaultServiceAccount string
	// EnforceDefaultServiceAccount refuses objects that name any other
	// ServiceAccount (--enforce-default-service-account).
	EnforceDefaultServiceAccount bool
	// AllowedImages are the image prefixes spec.runnerPodTemplate.spec.image
	// must match (--allowed-runner-images); empty allows any image. The
	// placer's own runner image is always allowed. See ImageAllowed.
	AllowedImages []string
}

// Checker is a Placer that can refuse an object's runner before any run of
// it starts: the controller asks it before it records a run, so that a
// refused object starts nothing.
type Checker interface {
	// Check returns nil, or an *Error marked Stalling: the object's spec
	// must change.
	Check(obj *infrav1.Terraform) error
}

var _ Checker = &Pod{}

// nodeVolumes are the volume types that reach the node itself rather than
// storage or API objects: the node's filesystem (hostPath), a git clone
// run by the kubelet on the node (gitRepo, deprecated), a driver binary the
// kubelet runs on the node with the Pod's options (flexVolume, deprecated).
var nodeVolumes = []struct {
	name string
	is   func(*corev1.VolumeSource) bool
}{
	{"hostPath", func(v *corev1.VolumeSource) bool { return v.HostPath != nil }},
	{"gitRepo", func(v *corev1.VolumeSource) bool { return v.GitRepo != nil }},
	{"flexVolume", func(v *corev1.VolumeSource) bool { return v.FlexVolume != nil }},
}

// securityAnnotationPrefixes are annotations that set a container's
// AppArmor or seccomp profile, which Landform sets itself.
var securityAnnotationPrefixes = []string{
	"container.apparmor.security.beta.kubernetes.io/",
	"seccomp.security.alpha.kubernetes.io/",
	"container.seccomp.security.alpha.kubernetes.io/",
}

// Check implements Checker: it refuses, before anything is created, an
// object whose runner Pod the policy does not allow: a ServiceAccount
// other than the default when that is enforced (reason
// RunnerServiceAccountNotAllowed), an image outside the allowed prefixes
// (RunnerImageNotAllowed), or a template that reaches the node, changes the
// runner's security profile or shadows the runner's own mounts
// (RunnerPodTemplateNotAllowed).
func (p *Pod) Check(obj *infrav1.Terraform) error {
	if err := p.checkServiceAccountAllowed(obj); err != nil {
		return err
	}
	if err := p.checkImage(obj); err != nil {
		return err
	}
	return p.checkTemplate(obj)
}

// serviceAccountName is the runner Pod's ServiceAccount: the object's, else
// the policy's default, else the API's.
func (p *Pod) serviceAccountName(obj *infrav1.Terraform) string {
	if obj.Spec.ServiceAccountName == "" && p.Policy.DefaultServiceAccount != "" {
		return p.Policy.DefaultServiceAccount
	}
	return obj.GetServiceAccountName()
}

func (p *Pod) checkServiceAccountAllowed(obj *infrav1.Terraform) error {
	def := p.serviceAccountName(&infrav1.Terraform{})
	name := obj.Spec.ServiceAccountName
	if strings.HasPrefix(name, names.StateIdentityPrefix) {
		// Also refused by the CRD; checked here for objects admitted
		// before that rule. A state identity's token, mounted, would let
		// the module read and write that state past the runner's lock.
		return &Error{
			Reason:   infrav1.RunnerServiceAccountNotAllowedReason,
			Stalling: true,
			Message: fmt.Sprintf("spec.serviceAccountName %q is not allowed: names starting with %s are the state identities of Terraform objects, which runners reach only through the controller's token; "+
				"remove spec.serviceAccountName (or name a ServiceAccount of your own)", name, names.StateIdentityPrefix),
		}
	}
	if !p.Policy.EnforceDefaultServiceAccount || name == "" || name == def {
		return nil
	}
	return &Error{
		Reason:   infrav1.RunnerServiceAccountNotAllowedReason,
		Stalling: true,
		Message: fmt.Sprintf("spec.serviceAccountName %q is not allowed: the controller runs every runner as the ServiceAccount %s of the object's namespace (--enforce-default-service-account); "+
			"remove spec.serviceAccountName (or set it to %s)", name, def, def),
	}
}

func (p *Pod) checkImage(obj *infrav1.Terraform) error {
	tmpl := obj.Spec.RunnerPodTemplate
	if tmpl == nil || tmpl.Spec.Image == "" || tmpl.Spec.Image == p.Image || len(p.Policy.AllowedImages) == 0 {
		return nil
	}
	image := tmpl.Spec.Image
	if ImageAllowed(image, p.Policy.AllowedImages) {
		return nil
	}
	quoted := make([]string, len(p.Policy.AllowedImages))
	for i, a := range p.Policy.AllowedImages {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return &Error{
		Reason:   infrav1.RunnerImageNotAllowedReason,
		Stalling: true,
		Message: fmt.Sprintf("spec.runnerPodTemplate.spec.image %q is not allowed: the controller allows runner images under %s (--allowed-runner-images) and its own runner image %q; "+
			"use one of them, or remove spec.runnerPodTemplate.spec.image", image, strings.Join(quoted, ", "), p.Image),
	}
}

// ImageAllowed reports whether image is under one of prefixes. A prefix
// matches an image that starts with it, where the prefix ends at a
// boundary of the image reference: the prefix ends with '/', ':' or '@',
// or the image ends with it, or the image continues with '/', ':' or '@'.
// So "ghcr.io/acme" and "ghcr.io/acme/" allow "ghcr.io/acme/runner:v1",
// but neither allows "ghcr.io/acmeevil/runner"; "ghcr.io/acme/runner"
// allows its tags and digests, not "ghcr.io/acme/runner-debug". Images
// are compared as written, not normalised: "alpine" is not under
// "docker.io/library/".
func ImageAllowed(image string, prefixes []string) bool {
	for _, prefix := range prefixes {
		if prefix == "" || !strings.HasPrefix(image, prefix) {
			continue
		}
		if len(image) == len(prefix) || isRefBoundary(prefix[len(prefix)-1]) || isRefBoundary(image[len(prefix)]) {
			return true
		}
	}
	return false
}

func isRefBoundary(c byte) bool { return c == '/' || c == ':' || c == '@' }

// ParseImagePrefixes reads --allowed-runner-images: comma-separated
// prefixes, blanks ignored.
func ParseImagePrefixes(s string) []string {
	var prefixes []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	return prefixes
}

// runnerMounts are the runner's own mount paths, which a template may not
// shadow.
var runnerMounts = []string{workMountPath, homeMountPath, tlsMountPath}

func (p *Pod) checkTemplate(obj *infrav1.Terraform) error {
	tmpl := obj.Spec.RunnerPodTemplate
	if tmpl == nil {
		return nil
	}
	var refused []string
	for _, v := range tmpl.Spec.Volumes {
		for _, t := range nodeVolumes {
			if t.is(&v.VolumeSource) {
				refused = append(refused, fmt.Sprintf("volume %q is a %s volume, which reaches the node", v.Name, t.name))
			}
		}
		if slices.Contains([]string{workVolume, homeVolume, tlsVolume}, v.Name) {
			refused = append(refused, fmt.Sprintf("volume %q has the name of one of the runner's own volumes (%s, %s, %s)", v.Name, workVolume, homeVolume, tlsVolume))
		}
	}
	for _, m := range tmpl.Spec.VolumeMounts {
		if own := shadowedMount(m.MountPath); own != "" {
			refused = append(refused, fmt.Sprintf("volumeMount %q at %s overlaps the runner's own mount %s", m.Name, m.MountPath, own))
		}
		if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
			refused = append(refused, fmt.Sprintf("volumeMount %q asks for Bidirectional mount propagation, which needs a privileged container", m.Name))
		}
	}
	keys := make([]string, 0, len(tmpl.Metadata.Annotations))
	for k := range tmpl.Metadata.Annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, prefix := range securityAnnotationPrefixes {
			if strings.HasPrefix(k, prefix) {
				refused = append(refused, fmt.Sprintf("annotation %s sets a security profile, which Landform sets itself", k))
			}
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return &Error{
		Reason:   infrav1.RunnerPodTemplateNotAllowedReason,
		Stalling: true,
		Message: fmt.Sprintf("spec.runnerPodTemplate is not allowed: %s; runner Pods may not reach the node, change their security profile or shadow the runner's mounts (%s): "+
			"remove these from spec.runnerPodTemplate (an emptyDir, a persistentVolumeClaim, a Secret or ConfigMap volume mounted elsewhere is fine)",
			strings.Join(refused, "; "), strings.Join(runnerMounts, ", ")),
	}
}

// shadowedMount returns the runner's mount that a mount at dir would be
// at, under or above; "" when none.
func shadowedMount(dir string) string {
	dir = path.Clean("/" + dir)
	for _, own := range runnerMounts {
		if dir == own || strings.HasPrefix(dir, own+"/") || dir == "/" || strings.HasPrefix(own, dir+"/") {
			return own
		}
	}
	return ""
}
