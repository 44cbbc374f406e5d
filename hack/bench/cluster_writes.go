package main

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Every write of the one-object samples on the cluster, from its API
// server's audit log (e2e/cluster/audit-policy.yaml: every write, no
// body). apiserver_request_total counts a sample's writes by resource;
// the log says who made each one, so that Landform's own writes (the
// controller's, the runner's, the engine's) are told from what
// Kubernetes writes for any Pod (the scheduler's binding, the kubelet's
// status, events and the Pod's ServiceAccount token).

// clusterAuditLog is the log e2e/cluster/up.sh has the API server write.
func (cb *clusterBench) clusterAuditLog() string { return filepath.Join(cb.co.dir, "audit.log") }

// auditedSample is a sample of one as the audit log sees it: its name
// (which the writes that belong to it name), its window, and its side.
type auditedSample struct {
	writeSample
	raw bool
}

// auditedWrites charges the log's writes to the samples (objectWrites:
// by name, else by time; in the namespace, and Landform's elsewhere but
// for leader election) and sums them up for each side. A sample starts
// when the API server received its create (a Pod's for the raw engine, a
// Terraform object's for Landform) and ends when its Pod was gone.
func auditedWrites(path, ns string, samples []auditedSample, end time.Time) (raw, landform *OneObjectWrites, err error) {
	events, dups, err := readAuditLog(path)
	if err != nil {
		return nil, nil, err
	}
	samples = slices.Clone(samples)
	for i, s := range samples {
		created := false
		for _, w := range events {
			if w.verb == "create" && w.namespace == ns && w.name == s.name && (w.resource == "pods" || w.resource == "terraforms") {
				samples[i].created, created = w.at, true
				break
			}
		}
		if !created {
			return nil, nil, fmt.Errorf("%s: no create of sample %s (the log rotated, or the cluster runs without it?)", path, s.name)
		}
	}
	slices.SortFunc(samples, func(a, b auditedSample) int { return a.created.Compare(b.created) })
	all := make([]writeSample, len(samples))
	for i, s := range samples {
		all[i] = s.writeSample
	}
	perSample, leader, notCounted := objectWrites(events, ns, all, end)
	var rawW, lfW [][]auditWrite
	var rawS, lfS []writeSample
	for i, s := range samples {
		if s.raw {
			rawW, rawS = append(rawW, perSample[i]), append(rawS, s.writeSample)
		} else {
			lfW, lfS = append(lfW, perSample[i]), append(lfS, s.writeSample)
		}
	}
	raw, landform = summarizeWrites(rawW, rawS, ns), summarizeWrites(lfW, lfS, ns)
	landform.LeaderElection, landform.NotCounted, landform.DuplicateEvents = leader, notCounted, dups
	landform.WindowSeconds = end.Sub(samples[0].created).Seconds()
	return raw, landform, nil
}

// writeAuditedWrites renders the samples' writes by writer, and the first
// Landform sample's in order.
func writeAuditedWrites(p printer, raw, lf *OneObjectWrites) {
	p("\n#### Every write, by writer\n\n")
	p("From the cluster API server's audit log (every write, without bodies, blocking: `e2e/cluster/audit-policy.yaml`). Each write\n")
	p("in the namespace is charged to the sample its name names (the object, its Secrets, its runner Pod and that Pod's events),\n")
	p("else to the sample created last before it; outside the namespace only Landform's writes count, but for its leader election.\n")
	p("So the node's own writes (its Lease, its status) are not here, and the totals can be below the counters' above.\n\n")
	p("| writer | raw engine's Pod | Landform object |\n|---|---|---|\n")
	writers := map[string]bool{}
	for w := range raw.ByWriter {
		writers[w] = true
	}
	for w := range lf.ByWriter {
		writers[w] = true
	}
	keys := slices.Collect(maps.Keys(writers))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(landformRank(b), landformRank(a)), cmp.Compare(lf.ByWriter[b], lf.ByWriter[a]), cmp.Compare(a, b))
	})
	var ownRaw, ownLF, kubeRaw, kubeLF float64
	for _, w := range keys {
		p("| %s | %s | %s |\n", w, count(raw.ByWriter[w]), count(lf.ByWriter[w]))
		switch {
		case landformWriter(w):
			ownRaw, ownLF = ownRaw+raw.ByWriter[w], ownLF+lf.ByWriter[w]
		case w != "bench harness":
			kubeRaw, kubeLF = kubeRaw+raw.ByWriter[w], kubeLF+lf.ByWriter[w]
		}
	}
	p("| **Landform's own** (controller, runner, engine) | %s | **%s** |\n", count(ownRaw), count(ownLF))
	p("| **Kubernetes'** (all but Landform and the harness) | **%s** | **%s** |\n", count(kubeRaw), count(kubeLF))
	p("| all but the harness | %s | %s |\n", count(ownRaw+kubeRaw), count(ownLF+kubeLF))
	p("\nMeans of %d samples each. Writes per Landform sample: %s; per raw Pod: %s.", lf.Samples, ints(lf.WritesPerSample), ints(raw.WritesPerSample))
	if len(lf.NotCounted) > 0 {
		p(" Not counted (outside the namespace, not Landform's): %s.", counts(lf.NotCounted))
	}
	if lf.DuplicateEvents > 0 {
		p(" %d audit events were logged twice and counted once.", lf.DuplicateEvents)
	}
	p("\n\n<details><summary>The first Landform sample's writes in order (ms since its create was received; <code>&lt;obj&gt;</code> is its name)</summary>\n\n")
	writeList(p, lf.FirstSample)
	p("\n</details>\n")
}

// landformRank orders Landform's writers first.
func landformRank(w string) int {
	if landformWriter(w) {
		return 1
	}
	if strings.HasPrefix(w, "bench") {
		return -1
	}
	return 0
}
