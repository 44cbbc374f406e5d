package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	kind sampleKind
}

// sampleKind is which side a sample is on.
type sampleKind int

const (
	sampleLandform sampleKind = iota
	sampleRaw
	// sampleRawState is the raw engine's Pod keeping its state
	// (cluster_rawstate.go): its writes are charged to it, so that they
	// are neither side's, and not summed up.
	sampleRawState
)

// auditedWrites charges the log's writes to the samples (objectWrites:
// by name, else by time; in the namespace, and Landform's elsewhere but
// for leader election) and sums them up for each side. A sample starts
// when the API server received its create (a Pod's for the raw engine, a
// Terraform object's for Landform) and ends when its Pod was gone.
func auditedWrites(path, ns string, samples []auditedSample, end time.Time) (raw, landform *OneObjectWrites, err error) {
	events, reads, dups, err := readAudit(path)
	if err != nil {
		return nil, nil, err
	}
	samples = slices.Clone(samples)
	for i, s := range samples {
		at, ok := receivedCreate(events, ns, s.name, "pods", "terraforms")
		if !ok {
			return nil, nil, fmt.Errorf("%s: no create of sample %s (the log rotated, or the cluster runs without it?)", path, s.name)
		}
		samples[i].created = at
	}
	slices.SortFunc(samples, func(a, b auditedSample) int { return a.created.Compare(b.created) })
	all := make([]writeSample, len(samples))
	for i, s := range samples {
		all[i] = s.writeSample
	}
	perSample, leader, notCounted := objectWrites(events, ns, all, end)
	raw, landform = sides(perSample, samples, ns)
	landform.LeaderElection, landform.NotCounted, landform.DuplicateEvents = leader, notCounted, dups
	landform.WindowSeconds = end.Sub(samples[0].created).Seconds()
	if len(reads) > 0 {
		perSample, _, _ = objectWrites(reads, ns, all, end)
		rawR, lfR := sides(perSample, samples, ns)
		raw.ReadsByReader, raw.ReadsPerObject = rawR.ByWriter, rawR.WritesPerObject
		landform.ReadsByReader, landform.ReadsPerObject = lfR.ByWriter, lfR.WritesPerObject
	}
	return raw, landform, nil
}

// sides sums up the requests charged to each sample (perSample, in the
// order of samples) for the raw engine's side and Landform's; the raw
// engine's Pod keeping its state is neither's.
func sides(perSample [][]auditWrite, samples []auditedSample, ns string) (raw, landform *OneObjectWrites) {
	var rawW, lfW [][]auditWrite
	var rawS, lfS []writeSample
	for i, s := range samples {
		switch s.kind {
		case sampleRaw:
			rawW, rawS = append(rawW, perSample[i]), append(rawS, s.writeSample)
		case sampleLandform:
			lfW, lfS = append(lfW, perSample[i]), append(lfS, s.writeSample)
		}
	}
	return summarizeWrites(rawW, rawS, ns), summarizeWrites(lfW, lfS, ns)
}

// writeAuditedWrites renders the samples' writes by writer, and the first
// Landform sample's in order.
func writeAuditedWrites(p printer, raw, lf *OneObjectWrites) {
	p("\n#### Every write, by writer\n\n")
	p("Measured apart, on %s from %s by `BENCH_ONLY=writes make bench-cluster` (%d samples of each, as above) on a cluster started with\n", lf.Date, lf.Revision, lf.Samples)
	audit, logged, policy := "1", "every write", "audit-policy.yaml"
	if lf.ReadsByReader != nil {
		audit, logged, policy = "all", "every request", "audit-policy-all.yaml"
	}
	p("`LANDFORM_CLUSTER_AUDIT=%s make cluster-up`, whose API server logs %s (without bodies, blocking:\n", audit, logged)
	p("`e2e/cluster/%s`); the log costs the API server CPU, so the figures above are of a cluster without it. Each write\n", policy)
	p("in the namespace is charged to the sample its name names (the object, its Secrets, its runner Pod and that Pod's events),\n")
	p("else to the sample created last before it; outside the namespace only Landform's writes count, but for its leader election.\n")
	p("So the node's own writes (its Lease, its status) are not here, and the totals can be below the counters' above.\n\n")
	p("| writer | raw engine's Pod | Landform object |\n|---|---|---|\n")
	programRows(p, raw.ByWriter, lf.ByWriter)
	ownRaw, ownLF := raw.landformOwn(), lf.landformOwn()
	kubeRaw, kubeLF := raw.WritesPerObject-ownRaw-raw.ByWriter[harnessWriter], lf.WritesPerObject-ownLF-lf.ByWriter[harnessWriter]
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
	if lf.ReadsByReader != nil {
		writeAuditedReads(p, raw, lf)
	}
	p("\n\n<details><summary>The first Landform sample's writes in order (ms since its create was received; <code>&lt;obj&gt;</code> is its name)</summary>\n\n")
	writeList(p, lf.FirstSample)
	p("\n</details>\n")
}

// writeAuditedReads renders the samples' reads by reader, when the
// cluster logged every request.
func writeAuditedReads(p printer, raw, lf *OneObjectWrites) {
	p("\n\nThe reads (gets and lists; a watch is neither) of the same samples, charged as the writes are:\n\n")
	p("| reader | raw engine's Pod | Landform object |\n|---|---|---|\n")
	programRows(p, raw.ReadsByReader, lf.ReadsByReader)
	p("| **Landform's own** (controller, runner, engine) | %s | **%s** |\n", count(landformSum(raw.ReadsByReader)), count(landformSum(lf.ReadsByReader)))
	p("| all | %s | %s |", count(raw.ReadsPerObject), count(lf.ReadsPerObject))
}

// programRows renders one row per program of either side, with its count
// on the raw engine's side and on Landform's: Landform's programs first,
// then by Landform's count, then by name.
func programRows(p printer, raw, lf map[string]float64) {
	keys := slices.Collect(maps.Keys(lf))
	for k := range raw {
		if _, ok := lf[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(landformRank(b), landformRank(a)), cmp.Compare(lf[b], lf[a]), cmp.Compare(a, b))
	})
	for _, k := range keys {
		p("| %s | %s | %s |\n", k, count(raw[k]), count(lf[k]))
	}
}

// landformOwn is the writes per sample that Landform made: its
// controller's, runners' and engine's.
func (w *OneObjectWrites) landformOwn() float64 { return landformSum(w.ByWriter) }

// landformSum is the sum of Landform's programs' counts in byProgram.
func landformSum(byProgram map[string]float64) float64 {
	var own float64
	for program, n := range byProgram {
		if landformWriter(program) {
			own += n
		}
	}
	return own
}

// landformRank orders Landform's writers first.
func landformRank(w string) int {
	if landformWriter(w) {
		return 1
	}
	if w == harnessWriter {
		return -1
	}
	return 0
}

// writesOnly is `BENCH_ONLY=writes make bench-cluster`: the one-object
// samples alone, on a cluster started with its audit log
// (LANDFORM_CLUSTER_AUDIT=1), their writes by writer merged into the
// cluster run kept beside -out-json, whose other figures stay.
//
// The log is not kept by default: on this machine it cost the API server
// about 0.07 CPU-s per object (the CPU per object rose from 1.8× the raw
// engine's Pod to 1.95× with it), which would skew every CPU figure of
// the run it is on. The writes it names are measured apart instead.
func (cb *clusterBench) writesOnly(ctx context.Context, now *ClusterReport) error {
	logPath, path := cb.clusterAuditLog(), clusterReportPath(cb.o.outJSON)
	if _, err := os.Stat(logPath); err != nil {
		return fmt.Errorf("BENCH_ONLY=writes reads the cluster's audit log, which it does not keep (%w): start it with LANDFORM_CLUSTER_AUDIT=1 make cluster-up", err)
	}
	var r ClusterReport
	if err := readJSONFile(path, &r); err != nil {
		return fmt.Errorf("BENCH_ONLY=writes adds to the cluster run kept at %s: %w (make bench-cluster writes one)", path, err)
	}
	log("cleaning up what an earlier run left in %s", cb.co.ns)
	if err := cb.cleanup(ctx); err != nil {
		return err
	}
	if err := cb.prepare(ctx); err != nil {
		return err
	}
	var one ClusterOne
	if err := cb.one(ctx, &one); err != nil {
		return fmt.Errorf("one object: %w", err)
	}
	if err := cb.cleanup(ctx); err != nil {
		return err
	}
	if one.LandformWrites == nil {
		return fmt.Errorf("no write of the samples found in %s", logPath)
	}
	for _, w := range []*OneObjectWrites{one.RawWrites, one.LandformWrites} {
		w.Date, w.Revision, w.LoadStart = now.Date, now.Revision, one.LoadStart
	}
	r.One.RawWrites, r.One.LandformWrites = one.RawWrites, one.LandformWrites
	notes, err := readNotes(cb.o.notes)
	if err != nil {
		return err
	}
	r.Targets = r.targets()
	r.applyNotes(notes)
	if err := writeReportFile(path, &r); err != nil {
		return err
	}
	log("wrote every write by writer into %s", path)
	return render(cb.o.outJSON, cb.o.outMD, cb.o.notes, false)
}

// carryAuditedWrites keeps the writes by writer of the run kept at path
// when r, on a cluster without the audit log, has none: they are measured
// apart (writesOnly), and say from which revision.
func carryAuditedWrites(r *ClusterReport, path string) {
	if r.One.LandformWrites != nil {
		return
	}
	var old ClusterReport
	if readJSONFile(path, &old) != nil {
		return
	}
	r.One.RawWrites, r.One.LandformWrites = old.One.RawWrites, old.One.LandformWrites
}
