// Package statelock takes, reads and releases the state lock of Terraform's
// and OpenTofu's kubernetes backend — a Lease named lock-<state Secret>
// whose spec.holderIdentity is the lock id and whose annotation holds the
// lock info — under an identity that the controller can check.
//
// A Landform runner takes the lock itself (terraform then runs with
// -lock=false, which is safe: the backend writes the state without looking
// at the lock) and writes who it is into the lock info: its Pod, or its
// process. When a run ends without releasing its lock, the controller
// proves that holder gone and releases exactly that lock, by its id. A lock
// without a Landform identity (a person's tofu) is never released
// automatically.
package statelock

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/landform-dev/landform/internal/version"
)

// Leases is what the lock needs of a namespace's Leases: client-go's
// typed LeaseInterface, or the runner's own small client, which keeps
// client-go's clientset out of a process that starts for every run
// (runner/internal/kubeclient).
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// InfoAnnotation holds the JSON lock info on the Lease, as the backend
// writes it (internal/backend/remote-state/kubernetes in OpenTofu).
const InfoAnnotation = "app.terraform.io/lock-info"

// Operations recorded in the lock info, Terraform's names. A destroy is an
// apply of a destroy plan, and terraform records it as one.
const (
	OperationPlan    = "OperationTypePlan"
	OperationApply   = "OperationTypeApply"
	OperationDestroy = "OperationTypeApply"
)

// maxConflicts bounds the retries when another writer changed the Lease
// between our read and our write.
const maxConflicts = 5

// LockInfo is Terraform's statemgr.LockInfo as it marshals it.
type LockInfo struct {
	ID        string    `json:"ID"`
	Operation string    `json:"Operation"`
	Info      string    `json:"Info"`
	Who       string    `json:"Who"`
	Version   string    `json:"Version"`
	Created   time.Time `json:"Created"`
	Path      string    `json:"Path"`
}

// LockedError is a lock held by someone else.
type LockedError struct {
	Info LockInfo
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("the state is locked by %s (lock %s, %s since %s)", e.Info.Who, e.Info.ID, e.Info.Operation, e.Info.Created.UTC().Format(time.RFC3339))
}

// LeaseName is the Lease the backend locks the state Secret with.
func LeaseName(stateSecret string) string { return "lock-" + stateSecret }

// StateSecretName is the kubernetes backend's state Secret of a terraform
// workspace ("default" when empty) and a secret_suffix.
func StateSecretName(workspace, secretSuffix string) string {
	if workspace == "" {
		workspace = "default"
	}
	return "tfstate-" + workspace + "-" + secretSuffix
}

// LeaseLabels are the labels the backend puts on a lock Lease it creates
// (getLabels in its client.go): `tofu workspace delete` deletes only a
// Lease that carries them.
func LeaseLabels(workspace, secretSuffix string) map[string]string {
	if workspace == "" {
		workspace = "default"
	}
	return map[string]string{
		"tfstate":                      "true",
		"tfstateSecretSuffix":          secretSuffix,
		"tfstateWorkspace":             workspace,
		"app.kubernetes.io/managed-by": "terraform",
	}
}

// Option adjusts Acquire.
type Option func(*coordinationv1.Lease)

// WithLabels sets the labels of the Lease when Acquire creates it; see
// LeaseLabels.
func WithLabels(labels map[string]string) Option {
	return func(l *coordinationv1.Lease) { l.Labels = labels }
}

// Acquire takes the lock in Lease leaseName for h and returns its id: it
// creates the Lease when missing, else sets the holder only when there is
// none. A lock held by anyone else fails with *LockedError. Every write
// carries the resourceVersion it read, so two takers cannot both win.
func Acquire(ctx context.Context, leases Leases, leaseName string, h Holder, operation string, opts ...Option) (string, error) {
	id, _, err := AcquireLease(ctx, leases, leaseName, h, operation, opts...)
	return id, err
}

// AcquireLease is Acquire, also returning the Lease as the API server
// wrote it, for ReleaseLease.
func AcquireLease(ctx context.Context, leases Leases, leaseName string, h Holder, operation string, opts ...Option) (string, *coordinationv1.Lease, error) {
	info := LockInfo{
		ID:        NewID(),
		Operation: operation,
		Info:      h.encode(),
		Who:       h.Who(),
		Version:   "landform " + version.Version,
		Created:   time.Now().UTC(),
	}
	raw, err := json.Marshal(info)
	if err != nil {
		return "", nil, err
	}
	for range maxConflicts {
		lease, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: leaseName, Annotations: map[string]string{InfoAnnotation: string(raw)}},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &info.ID},
			}
			for _, o := range opts {
				o(lease)
			}
			created, err := leases.Create(ctx, lease, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return "", nil, fmt.Errorf("creating the lock Lease %s: %w", leaseName, err)
			}
			return info.ID, created, nil
		}
		if err != nil {
			return "", nil, fmt.Errorf("reading the lock Lease %s: %w", leaseName, err)
		}
		if lease.Spec.HolderIdentity != nil {
			return "", nil, &LockedError{Info: infoOf(lease)}
		}
		lease.Spec.HolderIdentity = &info.ID
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[InfoAnnotation] = string(raw)
		taken, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("taking the lock Lease %s: %w", leaseName, err)
		}
		return info.ID, taken, nil
	}
	return "", nil, fmt.Errorf("taking the lock Lease %s: it kept changing under us", leaseName)
}

// Release releases lock lockID: it clears the holder and the lock info, as
// the backend's Unlock and `tofu force-unlock` do, only while the Lease
// still holds lockID (the write carries the resourceVersion it read). A
// free Lease is fine; one held by another lock fails with *LockedError and
// is left alone.
func Release(ctx context.Context, leases Leases, leaseName, lockID string) error {
	return release(ctx, leases, leaseName, lockID, nil)
}

// ReleaseLease is Release starting from taken, the Lease as AcquireLease
// returned it, instead of reading it: one read less per lock (the
// runner's, on every apply). The write still carries taken's
// resourceVersion, so a Lease changed since (a person's force-unlock, a
// new taker) is a conflict, and Release reads it and decides again.
func ReleaseLease(ctx context.Context, leases Leases, taken *coordinationv1.Lease, lockID string) error {
	return release(ctx, leases, taken.Name, lockID, taken.DeepCopy())
}

func release(ctx context.Context, leases Leases, leaseName, lockID string, lease *coordinationv1.Lease) error {
	for range maxConflicts {
		if lease == nil {
			var err error
			lease, err = leases.Get(ctx, leaseName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("reading the lock Lease %s: %w", leaseName, err)
			}
		}
		if lease.Spec.HolderIdentity == nil {
			return nil
		}
		if *lease.Spec.HolderIdentity != lockID {
			return &LockedError{Info: infoOf(lease)}
		}
		lease.Spec.HolderIdentity = nil
		delete(lease.Annotations, InfoAnnotation)
		_, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			lease = nil
			continue
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("releasing lock %s of Lease %s: %w", lockID, leaseName, err)
		}
		return nil
	}
	return fmt.Errorf("releasing lock %s of Lease %s: it kept changing under us", lockID, leaseName)
}

// IsLocked reports whether err is a lock held by someone else.
func IsLocked(err error) bool {
	var l *LockedError
	return errors.As(err, &l)
}

// Read returns the lock held in Lease leaseName; nil when the state is
// free.
func Read(ctx context.Context, leases Leases, leaseName string) (*LockInfo, error) {
	lease, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the lock Lease %s: %w", leaseName, err)
	}
	if lease.Spec.HolderIdentity == nil {
		return nil, nil
	}
	info := infoOf(lease)
	return &info, nil
}

// infoOf is the lock info of a held Lease. The holder identity is the
// authority on the id: the annotation is only what the taker wrote.
func infoOf(lease *coordinationv1.Lease) LockInfo {
	info := LockInfo{}
	if raw, ok := lease.Annotations[InfoAnnotation]; ok {
		_ = json.Unmarshal([]byte(raw), &info)
	}
	if lease.Spec.HolderIdentity != nil {
		info.ID = *lease.Spec.HolderIdentity
	}
	return info
}

// NewID returns a random UUID: a lock id shaped like Terraform's, or a
// state lineage.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
