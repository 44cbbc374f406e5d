package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ClusterCPU is CPU-seconds spent by each party of the single-node
// cluster over a window.
type ClusterCPU struct {
	// Controller is the controller container's cgroup.
	Controller float64 `json:"controller"`
	// Pods is the BestEffort Pods' cgroup (kubepods/besteffort): the
	// runner Pods and the raw engine's Pods, which set no resources, and
	// any other BestEffort Pod of the node.
	Pods float64 `json:"bestEffortPods"`
	// The cluster's host processes, each with its reaped children (the
	// kubelet's mount, for one).
	Kubelet           float64 `json:"kubelet"`
	Containerd        float64 `json:"containerd"`
	APIServer         float64 `json:"apiServer"`
	Etcd              float64 `json:"etcd"`
	Scheduler         float64 `json:"scheduler"`
	ControllerManager float64 `json:"controllerManager"`
	// Shims is containerd's shims (one per Pod) and the runc processes
	// they ran, sampled every shimPoll: a shim's last moments, after its
	// last sample, are not counted (see clusterSnap.sub).
	Shims float64 `json:"containerdShimsAndRunc"`
}

// Total is the CPU of every party.
func (c ClusterCPU) Total() float64 {
	return c.Controller + c.Pods + c.Kubelet + c.Containerd + c.APIServer + c.Etcd + c.Scheduler + c.ControllerManager + c.Shims
}

// Node is the CPU of the node's own machinery: the kubelet, containerd
// and its shims.
func (c ClusterCPU) Node() float64 { return c.Kubelet + c.Containerd + c.Shims }

func (c ClusterCPU) sub(before ClusterCPU) ClusterCPU {
	return ClusterCPU{
		Controller: c.Controller - before.Controller, Pods: c.Pods - before.Pods,
		Kubelet: c.Kubelet - before.Kubelet, Containerd: c.Containerd - before.Containerd,
		APIServer: c.APIServer - before.APIServer, Etcd: c.Etcd - before.Etcd,
		Scheduler: c.Scheduler - before.Scheduler, ControllerManager: c.ControllerManager - before.ControllerManager,
		Shims: c.Shims - before.Shims,
	}
}

// medianCPU is the median of each party over samples.
func medianCPU(samples []ClusterCPU) ClusterCPU {
	pick := func(f func(ClusterCPU) float64) float64 {
		xs := make([]float64, len(samples))
		for i, s := range samples {
			xs[i] = f(s)
		}
		return median(xs)
	}
	return ClusterCPU{
		Controller:        pick(func(c ClusterCPU) float64 { return c.Controller }),
		Pods:              pick(func(c ClusterCPU) float64 { return c.Pods }),
		Kubelet:           pick(func(c ClusterCPU) float64 { return c.Kubelet }),
		Containerd:        pick(func(c ClusterCPU) float64 { return c.Containerd }),
		APIServer:         pick(func(c ClusterCPU) float64 { return c.APIServer }),
		Etcd:              pick(func(c ClusterCPU) float64 { return c.Etcd }),
		Scheduler:         pick(func(c ClusterCPU) float64 { return c.Scheduler }),
		ControllerManager: pick(func(c ClusterCPU) float64 { return c.ControllerManager }),
		Shims:             pick(func(c ClusterCPU) float64 { return c.Shims }),
	}
}

// hostComponents are the cluster's host processes measured, by the name of
// their PID file in the cluster's pids/ (e2e/cluster/lib.sh).
var hostComponents = []string{"kubelet", "containerd", "kube-apiserver", "etcd", "kube-scheduler", "kube-controller-manager"}

// pidOf is e2e/cluster/lib.sh's pid_of: the PID recorded in
// pidsDir/name.pid, if that process still runs a command line naming
// name.
func pidOf(pidsDir, name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(pidsDir, name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("%s is not running (no PID file): is the cluster up (make cluster-up)? %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s's PID file: %w", name, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(name)) {
		return 0, fmt.Errorf("%s (pid %d) is not running: is the cluster up (make cluster-up)?", name, pid)
	}
	return pid, nil
}

// cgroupUsage reads a cgroup's cumulative CPU in seconds: cgroup v1's
// cpuacct.usage (nanoseconds) or v2's cpu.stat usage_usec, whichever dir
// holds. A cgroup's counter includes its descendants', also those removed
// since (the kernel charges every ancestor as it goes).
func cgroupUsage(dir string) (float64, error) {
	if b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
		ns, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if err != nil {
			return 0, fmt.Errorf("%s/cpuacct.usage: %w", dir, err)
		}
		return ns / 1e9, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("no CPU accounting in cgroup %s: %w", dir, err)
	}
	return parseCPUStat(string(b))
}

// parseCPUStat reads usage_usec from a cgroup v2 cpu.stat, in seconds.
func parseCPUStat(s string) (float64, error) {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("cpu.stat: %w", err)
			}
			return us / 1e6, nil
		}
	}
	return 0, fmt.Errorf("cpu.stat has no usage_usec")
}

// kubepodsDirs are where the kubelet's cgroupfs driver puts the Pods'
// cgroups under root (/sys/fs/cgroup): cgroup v1's cpuacct hierarchy,
// then v2's unified one.
func kubepodsDirs(root string) []string {
	return []string{filepath.Join(root, "cpuacct", "kubepods"), filepath.Join(root, "cpu,cpuacct", "kubepods"), filepath.Join(root, "kubepods")}
}

// containerCgroup finds the cgroup of a Pod's container under root, from
// the Pod's UID and the container's ID (status.containerStatuses[].containerID,
// "containerd://<id>"): kubepods/<qos>/pod<uid>/<id>, or
// kubepods/pod<uid>/<id> for a Guaranteed Pod.
func containerCgroup(root, podUID, containerID string) (string, error) {
	_, id, ok := strings.Cut(containerID, "://")
	if !ok || id == "" {
		return "", fmt.Errorf("container ID %q is not <runtime>://<id>", containerID)
	}
	for _, base := range kubepodsDirs(root) {
		for _, pattern := range []string{filepath.Join(base, "*", "pod"+podUID, id), filepath.Join(base, "pod"+podUID, id)} {
			if m, _ := filepath.Glob(pattern); len(m) == 1 {
				return m[0], nil
			}
		}
	}
	return "", fmt.Errorf("no cgroup of container %s of Pod %s under %s (the kubelet's cgroupfs driver's kubepods/...)", id, podUID, root)
}

// bestEffortCgroup is the cgroup of the node's BestEffort Pods.
func bestEffortCgroup(root string) (string, error) {
	for _, base := range kubepodsDirs(root) {
		dir := filepath.Join(base, "besteffort")
		if _, err := cgroupUsage(dir); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no kubepods/besteffort cgroup with CPU accounting under %s", root)
}

// shimPoll is how often the shims' CPU is sampled.
const shimPoll = 200 * time.Millisecond

// shimMeter adds up the CPU of containerd's shims, which are not children
// of any measured process (they reparent to init) and exit with their
// Pod: each live shim is read every poll, and a shim that has gone keeps
// the CPU of its last reading.
type shimMeter struct {
	// address picks our containerd's shims by their command line.
	address string

	mu    sync.Mutex
	seen  map[int]bool    // pid -> is one of our shims (cached per pid)
	last  map[int]float64 // shim pid -> last utime+stime+cutime+cstime
	gone  float64         // the last readings of shims that exited
	stopC chan struct{}
}

func newShimMeter(address string) *shimMeter {
	return &shimMeter{address: address, seen: map[int]bool{}, last: map[int]float64{}, stopC: make(chan struct{})}
}

func (m *shimMeter) start() {
	m.poll()
	go func() {
		t := time.NewTicker(shimPoll)
		defer t.Stop()
		for {
			select {
			case <-m.stopC:
				return
			case <-t.C:
				m.poll()
			}
		}
	}()
}

func (m *shimMeter) stop() { close(m.stopC) }

// poll reads every live shim and retires the ones that exited.
func (m *shimMeter) poll() {
	entries, _ := os.ReadDir("/proc")
	live := map[int]float64{}
	m.mu.Lock()
	defer m.mu.Unlock()
	alive := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		alive[pid] = true
		isShim, known := m.seen[pid]
		if !known {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			isShim = strings.HasPrefix(string(comm), "containerd-shim") && bytes.Contains(cmdline, []byte(m.address))
			// A process containerd forked that has not yet become a
			// shim is looked at again.
			if isShim || !strings.HasPrefix(string(comm), "containerd") {
				m.seen[pid] = isShim
			}
		}
		if !isShim {
			continue
		}
		if s, err := readProcStat(pid); err == nil {
			live[pid] = s.self + s.children
		}
	}
	for pid, cpu := range m.last {
		if _, ok := live[pid]; !ok {
			m.gone += cpu
		}
	}
	m.last = live
	for pid := range m.seen {
		if !alive[pid] {
			delete(m.seen, pid)
		}
	}
}

// total is the shims' CPU so far, as of the last poll.
func (m *shimMeter) total() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	sum := m.gone
	for _, cpu := range m.last {
		sum += cpu
	}
	return sum
}
