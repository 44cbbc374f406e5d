// Package names derives every name and label value Landform gives to what it
// creates for a Terraform object: the state Secret's suffix (which the
// engine's kubernetes backend also writes into labels), the state Lease and
// identity, runner Pods, the Secrets of plans, logs and kept artifacts, and
// the label naming the object.
//
// An object's name may have 253 characters, a label value only 63, and some
// names (a Pod's hostname) 63. A derived value that fits is the plain
// value, exactly as it always was: an existing object keeps its state
// Secret, its labels and its identity. Only a value that would be too long
// is shortened, by Fit, the one rule for all of them: cut, and followed by
// a hash of the whole name so that two long names stay apart.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/statelock"
)

const (
	// MaxLabelValue is the longest label value.
	MaxLabelValue = 63
	// MaxName is the longest name of a Secret, Lease, ServiceAccount or
	// Role: a DNS subdomain.
	MaxName = 253
	// MaxDNSLabel is the longest DNS label: a runner Pod's name, which is
	// its hostname. The state identity keeps to it too, so that the names
	// it always had stay.
	MaxDNSLabel = 63

	// hashLen is how many hex digits of the SHA-256 Fit appends. Eight,
	// as Landform's shortened names had before this package: a state
	// identity shortened then keeps its name.
	hashLen = 8

	// StateIdentityPrefix starts the names of an object's state
	// ServiceAccount, Role and RoleBinding.
	StateIdentityPrefix = "landform-state-"
	// RunnerPodInfix follows RunnerPodPrefix in a runner Pod's name;
	// the API server then adds RunnerPodRandom characters.
	RunnerPodInfix  = "-runner-"
	RunnerPodRandom = 5
)

// Fit returns s when it has at most max bytes. A longer s is cut to
// max-9 bytes, without the '-', '.' and '_' it may then end with (a name's
// parts end with a letter or digit), and followed by "-" and the first 8
// hex digits of the SHA-256 of of: the whole value s stands for, usually
// the object's name, so that two names cut alike stay distinct. max must
// be more than 9.
func Fit(s string, max int, of string) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(of))
	h := hex.EncodeToString(sum[:])[:hashLen]
	return strings.TrimRight(s[:max-hashLen-1], "-._") + "-" + h
}

// Label is v as a label value: v itself up to 63 characters, else cut
// and hashed by Fit.
func Label(v string) string { return Fit(v, MaxLabelValue, v) }

// Prefixed is prefix+name as a name of at most max characters, name cut
// and hashed by Fit when the whole is longer.
func Prefixed(prefix, name string, max int) string { return Fit(prefix+name, max, name) }

// SecretSuffix is obj's secret_suffix for the kubernetes backend:
// spec.backendConfig.secretSuffix, else the object's name as a label value,
// because the backend labels the state Secret and its Lease with it
// (tfstateSecretSuffix). A name of up to 63 characters is the suffix
// itself, as it always was.
func SecretSuffix(obj *v1alpha1.Terraform) string {
	if obj.Spec.BackendConfig != nil && obj.Spec.BackendConfig.SecretSuffix != "" {
		return obj.Spec.BackendConfig.SecretSuffix
	}
	return Label(obj.Name)
}

// StateSecret is the name of obj's state Secret with the default backend:
// tfstate-<workspace>-<SecretSuffix>, at most 135 characters as the CRD
// bounds the workspace to 63.
func StateSecret(obj *v1alpha1.Terraform) string {
	return statelock.StateSecretName(obj.GetWorkspace(), SecretSuffix(obj))
}

// StateLease is the Lease the backend locks obj's state Secret with.
func StateLease(obj *v1alpha1.Terraform) string { return statelock.LeaseName(StateSecret(obj)) }

// StateIdentity names obj's state ServiceAccount, Role and RoleBinding:
// landform-state-<name>, cut and hashed by Fit beyond 63 characters (as
// it always was). Dots stay: ServiceAccount, Role and RoleBinding names
// may hold them, and making them dashes gave db.prod and db-prod one
// identity, each object's runs re-pointing the other's Role at its own
// state. An object with a dot in its name gets a new identity; the old
// one goes with the object (its owner reference).
func StateIdentity(obj *v1alpha1.Terraform) string {
	return Fit(StateIdentityPrefix+obj.Name, MaxDNSLabel, obj.Name)
}

// RunnerPodPrefix starts the names of the runner Pods of the object named
// name: <prefix>-runner-<5 random characters> is the Pod's hostname, so a
// DNS label: dots become dashes and the prefix is cut to 50 characters.
// Not hashed: the random characters make the name unique, and the Pods are
// found by their labels (Label of the name).
func RunnerPodPrefix(name string) string {
	const max = MaxDNSLabel - len(RunnerPodInfix) - RunnerPodRandom
	name = strings.ReplaceAll(name, ".", "-")
	if len(name) > max {
		name = strings.TrimRight(name[:max], "-")
	}
	return name
}

// IsRunnerPodName reports a name (or hostname) that a runner Pod of the
// object named name has.
func IsRunnerPodName(pod, name string) bool {
	prefix := RunnerPodPrefix(name) + RunnerPodInfix
	return len(pod) == len(prefix)+RunnerPodRandom && strings.HasPrefix(pod, prefix)
}
