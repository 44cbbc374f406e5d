package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// procStat is a process's CPU from /proc/<pid>/stat, in seconds.
type procStat struct {
	pid      int
	ppid     int
	comm     string
	self     float64 // utime + stime
	children float64 // cutime + cstime: reaped children
}

// readProcStat reads /proc/<pid>/stat.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat parses one /proc/<pid>/stat line; comm may hold spaces and
// parentheses, so the fields are counted from its last ')'.
func parseProcStat(line string) (procStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("malformed stat line %q", line)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return procStat{}, err
	}
	f := strings.Fields(line[end+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("short stat line %q", line)
	}
	n := make([]float64, 4)
	for i := range n {
		v, err := strconv.ParseFloat(f[11+i], 64)
		if err != nil {
			return procStat{}, err
		}
		n[i] = v / clockTicks
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStat{pid: pid, ppid: ppid, comm: line[open+1 : end], self: n[0] + n[1], children: n[2] + n[3]}, nil
}

// allProcs reads every process's stat; processes that exit meanwhile are
// skipped.
func allProcs() []procStat {
	entries, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readProcStat(pid); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// descendantsCPU is the CPU of pid's live descendants, each with its own
// reaped children: with pid's cutime+cstime, everything pid started.
func descendantsCPU(pid int, procs []procStat) float64 {
	kids := map[int][]procStat{}
	for _, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], p)
	}
	var sum float64
	var walk func(int)
	walk = func(parent int) {
		for _, c := range kids[parent] {
			sum += c.self + c.children
			walk(c.pid)
		}
	}
	walk(pid)
	return sum
}

// childByName finds a direct child of parent whose comm is name (envtest's
// kube-apiserver and etcd are children of the harness).
func childByName(parent int, name string) (int, error) {
	for _, p := range allProcs() {
		if p.ppid == parent && p.comm == name {
			return p.pid, nil
		}
	}
	return 0, fmt.Errorf("no child process %q of pid %d", name, parent)
}

// peakRSSMiB is pid's VmHWM.
func peakRSSMiB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// machineBusy is the machine's non-idle CPU-seconds since boot, from
// /proc/stat: to tell how much else ran during a phase.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var sum float64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest times are already in user
			break
		}
		x, _ := strconv.ParseFloat(v, 64)
		sum += x
	}
	return sum / clockTicks
}

// writeVerbs are the apiserver_request_total verbs that write.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true, "DELETECOLLECTION": true}

// apiWrites sums apiserver_request_total over the writing verbs in a
// Prometheus text exposition, by resource. A series whose value does not
// parse is left out.
func apiWrites(exposition string) map[string]int {
	out := map[string]int{}
	samples, _ := metricSamples(exposition, "apiserver_request_total")
	for _, s := range samples {
		if !writeVerbs[s.labels["verb"]] {
			continue
		}
		res := s.labels["resource"]
		if s.labels["subresource"] != "" {
			res += "/" + s.labels["subresource"]
		}
		out[res] += int(s.value)
	}
	return out
}

// metricSample is one series of a metric: its labels and value.
type metricSample struct {
	labels map[string]string
	value  float64
}

// metricSamples returns the series of metric in a Prometheus text
// exposition. A series whose value does not parse is left out, and the
// first one is reported in err.
func metricSamples(exposition, metric string) (samples []metricSample, err error) {
	for _, line := range strings.Split(exposition, "\n") {
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || rest == "" {
			continue
		}
		labels, value := "", rest
		switch rest[0] {
		case '{':
			labelsEnd := strings.LastIndexByte(rest, '}')
			if labelsEnd < 0 {
				continue
			}
			labels, value = rest[1:labelsEnd], rest[labelsEnd+1:]
		case ' ': // a series without labels
		default: // another metric whose name starts with this one's
			continue
		}
		v, perr := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if perr != nil {
			if err == nil {
				err = fmt.Errorf("metric %q: %w", line, perr)
			}
			continue
		}
		samples = append(samples, metricSample{labels: parseLabels(labels), value: v})
	}
	return samples, err
}

// parseLabels parses `a="x",b="y"` (values hold no escaped quotes in the
// series read here).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		v, rest, _ := strings.Cut(rest, `"`)
		out[strings.TrimPrefix(k, ",")] = v
		s = strings.TrimPrefix(rest, ",")
	}
	return out
}

// diff is after - before, per key, dropping zeros.
func diff(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// cpuInfo is the CPU model and memory of the machine.
func cpuInfo() (model string, memGiB float64) {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				memGiB = kb / 1024 / 1024
			}
		}
	}
	return model, memGiB
}

func readTrim(path string) string {
	b, _ := os.ReadFile(filepath.Clean(path))
	return strings.TrimSpace(string(b))
}
