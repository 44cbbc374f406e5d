package statelock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// Holder is who took a lock: a runner Pod or a local runner process, on
// behalf of run Run; or, with Tool set, another Landform process (the
// controller, the CLI) writing a state the engine could not save.
type Holder struct {
	Run     string         `json:"run"`
	Tool    string         `json:"tool,omitempty"`
	Pod     *PodHolder     `json:"pod,omitempty"`
	Process *ProcessHolder `json:"process,omitempty"`
}

// PodHolder is a runner Pod.
type PodHolder struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// ProcessHolder is a local runner process: a pid is reused, so its start
// time and the host's boot id pin it down.
type ProcessHolder struct {
	Host       string `json:"host"`
	BootID     string `json:"bootID"`
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks"`
}

// envelope is the lock info's Info field.
type envelope struct {
	Landform *Holder `json:"landform"`
}

func (h Holder) encode() string {
	b, _ := json.Marshal(envelope{Landform: &h})
	return string(b)
}

// Who is the lock info's readable holder, which terraform prints when it
// finds the state locked.
func (h Holder) Who() string {
	if h.Tool != "" && h.Process != nil {
		return fmt.Sprintf("%s (pid %d on %s)", h.Tool, h.Process.PID, h.Process.Host)
	}
	switch {
	case h.Pod != nil:
		return fmt.Sprintf("landform-runner run %s (pod %s/%s)", h.Run, h.Pod.Namespace, h.Pod.Name)
	case h.Process != nil:
		return fmt.Sprintf("landform-runner run %s (pid %d on %s)", h.Run, h.Process.PID, h.Process.Host)
	}
	return "landform-runner run " + h.Run
}

// ParseHolder returns the Landform runner that took the lock; false for
// any other holder.
func ParseHolder(info LockInfo) (*Holder, bool) {
	var e envelope
	if info.Info == "" || json.Unmarshal([]byte(info.Info), &e) != nil || e.Landform == nil {
		return nil, false
	}
	h := e.Landform
	switch {
	case h.Pod != nil && h.Pod.Name != "" && h.Pod.Namespace != "" && h.Pod.UID != "":
	case h.Process != nil && h.Process.PID > 0 && h.Process.BootID != "" && h.Process.Host != "":
	default:
		return nil, false
	}
	return h, true
}

// EncodeHolder is the lock info's Info field for h (for tests and tools
// that write locks as a runner does).
func EncodeHolder(h Holder) string { return h.encode() }

// CurrentProcess identifies this process.
func CurrentProcess() (*ProcessHolder, error) {
	return Process(os.Getpid())
}

// Process identifies the running process pid on this host.
func Process(pid int) (*ProcessHolder, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	boot, err := bootID()
	if err != nil {
		return nil, err
	}
	start, err := startTicks(pid)
	if err != nil {
		return nil, err
	}
	return &ProcessHolder{Host: host, BootID: boot, PID: pid, StartTicks: start}, nil
}

// GoneGiven reports whether the runner Pod p is provably gone, given what
// the API server holds under its name (nil: no such Pod), and if so how:
// "no longer exists", "was replaced by another Pod of that name" or "has
// terminated (<phase>)". A Pod being deleted still runs its runner.
func (p *PodHolder) GoneGiven(pod *corev1.Pod) (bool, string) {
	switch {
	case pod == nil:
		return true, "no longer exists"
	case string(pod.UID) != p.UID:
		return true, "was replaced by another Pod of that name"
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return true, fmt.Sprintf("has terminated (%s)", pod.Status.Phase)
	}
	return false, ""
}

// ErrOutsideNamespace is a lock naming a runner Pod outside the locked
// object's namespace: not one Landform ran for it.
var ErrOutsideNamespace = errors.New("the lock names a Pod outside the object's namespace")

// GetPod reads the Pod key names into pod; an IsNotFound error when there
// is none. A controller-runtime client.Reader's Get serves, wrapped: the
// runner links this package, and controller-runtime's client would cost
// every runner start its package initialisation (about 5 ms).
type GetPod func(ctx context.Context, key types.NamespacedName, pod *corev1.Pod) error

// Look reads the runner Pod p through get and reports whether it is gone
// and how (GoneGiven), with the Pod read (nil: none). Proving a holder
// gone releases its lock, so whatever proves nothing is err: a read that
// failed, or a Pod outside namespace, the locked object's (Landform runs
// an object's runners in its namespace). The controller and `landform
// unlock` both decide with it.
func (p *PodHolder) Look(ctx context.Context, get GetPod, namespace string) (bool, string, *corev1.Pod, error) {
	if p.Namespace != namespace {
		return false, "", nil, fmt.Errorf("%w: Pod %s/%s, the object is in %s", ErrOutsideNamespace, p.Namespace, p.Name, namespace)
	}
	pod := &corev1.Pod{}
	err := get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return false, "", nil, err
	}
	gone, how := p.GoneGiven(pod)
	return gone, how, pod, nil
}

// Gone reports whether the process is provably gone, and why: the host
// rebooted, or its pid is free or belongs to a process started at another
// time. On another host, or when /proc cannot tell, it is not gone.
func (p *ProcessHolder) Gone() (bool, string) {
	host, err := os.Hostname()
	if err != nil || host != p.Host {
		return false, ""
	}
	boot, err := bootID()
	if err != nil {
		return false, ""
	}
	if boot != p.BootID {
		return true, fmt.Sprintf("runner process %d ran before %s rebooted", p.PID, p.Host)
	}
	start, err := startTicks(p.PID)
	if os.IsNotExist(err) {
		return true, fmt.Sprintf("runner process %d on %s no longer exists", p.PID, p.Host)
	}
	if err != nil {
		return false, ""
	}
	if start != p.StartTicks {
		return true, fmt.Sprintf("runner process %d on %s no longer exists (its pid was reused)", p.PID, p.Host)
	}
	return false, ""
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// startTicks is field 22 of /proc/<pid>/stat: when the process started,
// in clock ticks since boot.
func startTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
