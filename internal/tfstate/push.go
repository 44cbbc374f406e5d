package tfstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Secrets is what Push needs of a namespace's Secrets: client-go's typed
// SecretInterface, or the runner's own small client
// (runner/internal/kubeclient).
type Secrets interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
	Update(ctx context.Context, secret *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error)
}

// Identity is what `state push` compares before it overwrites a state:
// the lineage, and the serial the engine raises with every write. A state
// file keeps both in clear, OpenTofu-encrypted or not.
type Identity struct {
	Serial  int64  `json:"serial"`
	Lineage string `json:"lineage"`
}

func (id Identity) String() string {
	return fmt.Sprintf("serial %d of lineage %s", id.Serial, id.Lineage)
}

// header is the part of a state file Push reads.
type header struct {
	Identity
	EncryptedData json.RawMessage            `json:"encrypted_data"`
	Resources     []json.RawMessage          `json:"resources"`
	Outputs       map[string]json.RawMessage `json:"outputs"`
}

func readHeader(raw []byte) (header, error) {
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		// The decoder's message may quote state content: say only what.
		return h, errors.New("it is not a state file (not valid JSON)")
	}
	if h.Lineage == "" {
		return h, errors.New("it is not a state file (no lineage)")
	}
	return h, nil
}

// ReadIdentity returns the lineage and serial of a state file as the engine
// writes it (errored.tfstate, `state pull`).
func ReadIdentity(raw []byte) (Identity, error) {
	h, err := readHeader(raw)
	return h.Identity, err
}

// RefusedError is a push that would overwrite a state it may not: of
// another lineage, newer, or of the same serial with other content. Only a
// person can tell which one is right.
type RefusedError struct{ msg string }

func (e *RefusedError) Error() string { return e.msg }

// Refused returns a *RefusedError with a message in fmt's format.
func Refused(format string, args ...any) error {
	return &RefusedError{msg: fmt.Sprintf(format, args...)}
}

// IsRefused reports whether err is a *RefusedError.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// PushOptions tune Push's checks.
type PushOptions struct {
	// Force writes the state whatever the backend holds, as `state push
	// -force` does.
	Force bool
	// HeldSinceApply says that the caller has held the state lock since
	// before the engine tried to write this state: a state of the same
	// lineage and serial in the backend can then only be that very write,
	// which reached the API server although its answer was lost (an
	// OpenTofu-encrypted state is encrypted afresh each time, so the bytes
	// differ), and writing over it changes nothing.
	HeldSinceApply bool
}

// Pushed is what Push found and did.
type Pushed struct {
	// Previous is the backend's state before; zero when it had none.
	Previous Identity
	// Written is false when the backend held these very bytes already.
	Written bool
}

// Push writes a state file, as the engine wrote it, into the kubernetes
// backend's Secret name, the way the backend's own write does (gzip'd
// under DataKey, an update of the Secret read, so a concurrent write
// fails with a conflict instead of being lost). It makes the checks of
// `state push` first: the backend's state must be empty, or of the same
// lineage with a lower serial (or the same one, see PushOptions), unless
// opts.Force. A refusal is a *RefusedError; anything else is the API
// server's answer. The caller holds the state lock.
//
// Landform writes the Secret itself instead of running `tofu state push`
// because OpenTofu's state push reads the file it pushes as an unencrypted
// state (OpenTofu 1.12.6: "This state file is encrypted and can not be read
// without an encryption configuration"), so it cannot push the
// errored.tfstate of a module with state encryption; the bytes the engine
// wrote are already what the backend would store, encrypted with the
// backend's own method. Landform already writes the backend's lock Lease
// and reads its state Secret the same way (internal/statelock, outputs).
func Push(ctx context.Context, secrets Secrets, name string, state []byte, opts PushOptions) (Pushed, error) {
	next, err := readHeader(state)
	if err != nil {
		return Pushed{}, &RefusedError{msg: "the state to push is unusable: " + err.Error()}
	}
	secret, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Pushed{}, fmt.Errorf("the state Secret %s does not exist (Landform creates it before every run)", name)
	}
	if err != nil {
		return Pushed{}, err
	}
	var current []byte
	if data := secret.Data[DataKey]; len(data) > 0 {
		if current, err = Decompress(data); err != nil {
			return Pushed{}, &RefusedError{msg: fmt.Sprintf("the state in Secret %s is unreadable (%v)", name, err)}
		}
	}
	res, write, err := checkPush(current, state, next, opts)
	if err != nil || !write {
		return res, err
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[DataKey] = Compress(state)
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations["encoding"] = "gzip"
	if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: "landform"}); err != nil {
		return res, err
	}
	res.Written = true
	return res, nil
}

// checkPush decides whether state (whose header is next) may replace
// current, the backend's state (nil: none), as `state push` decides.
func checkPush(current, state []byte, next header, opts PushOptions) (Pushed, bool, error) {
	if len(bytes.TrimSpace(current)) == 0 {
		return Pushed{}, true, nil
	}
	if bytes.Equal(current, state) {
		prev, _ := ReadIdentity(current)
		return Pushed{Previous: prev}, false, nil
	}
	prev, err := readHeader(current)
	if err != nil {
		if opts.Force {
			return Pushed{}, true, nil
		}
		return Pushed{}, false, &RefusedError{msg: "the backend's state is unreadable: " + err.Error()}
	}
	res := Pushed{Previous: prev.Identity}
	if opts.Force || prev.empty() {
		// The engine, too, overwrites an empty state whatever its
		// lineage.
		return res, true, nil
	}
	switch {
	case prev.Lineage != next.Lineage:
		return res, false, &RefusedError{msg: fmt.Sprintf("the backend holds a state of another lineage (%s), not %s", prev.Lineage, next.Lineage)}
	case prev.Serial > next.Serial:
		return res, false, &RefusedError{msg: fmt.Sprintf("the backend holds a newer state (serial %d) than this one (serial %d)", prev.Serial, next.Serial)}
	case prev.Serial == next.Serial && !opts.HeldSinceApply:
		return res, false, &RefusedError{msg: fmt.Sprintf("the backend holds another state with the same serial %d", prev.Serial)}
	}
	return res, true, nil
}

// empty is a plain state with neither resources nor outputs; an encrypted
// one cannot tell.
func (h header) empty() bool {
	return len(h.EncryptedData) == 0 && len(h.Resources) == 0 && len(h.Outputs) == 0
}
