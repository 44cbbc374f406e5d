package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// driftIntervals is how many drift intervals the drift phase watches,
// after the check due at once.
const driftIntervals = 3

// Drift is the scale objects with a short interval, nothing changed: their
// drift checks, and the time between two checks of the same object.
type Drift struct {
	IntervalSeconds float64 `json:"intervalSeconds"`
	Intervals       int     `json:"intervals"`
	WindowSeconds   float64 `json:"windowSeconds"`
	Objects         int     `json:"objects"`
	Runs            int     `json:"runs"`
	DriftRuns       int     `json:"driftRuns"`
	MinPerObject    int     `json:"minRunsPerObject"`
	MaxPerObject    int     `json:"maxRunsPerObject"`
	// MinGapSeconds and MedianGapSeconds are between the starts of two
	// runs of the same object (status.run.started): about the interval when
	// each object is checked once per interval, longer when the runs queue;
	// shorter would be a run between drift intervals.
	MinGapSeconds    float64 `json:"minGapSeconds"`
	MedianGapSeconds float64 `json:"medianGapSeconds"`
	CPU              CPU     `json:"cpuSeconds"`
	EngineProcs      int     `json:"engineProcesses"`
}

// drift sets the scale objects' interval to o.driftInterval (their last
// check is older, so one is due at once) and watches driftIntervals
// intervals and a half.
func (b *bench) drift(ctx context.Context, r *Report) error {
	if b.o.driftInterval <= 0 {
		return nil
	}
	keys := scaleKeys(b.o.n)
	before, err := b.snap(ctx)
	if err != nil {
		return err
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"interval":%q}}`, b.o.driftInterval.String()))
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		obj := &infrav1.Terraform{}
		obj.Namespace, obj.Name = ns, name
		if err := b.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("setting the interval of %s: %w", key, err)
		}
	}
	window := time.Duration(driftIntervals)*b.o.driftInterval + b.o.driftInterval/2
	log("drift: interval %s; counting runs for %s", b.o.driftInterval, window)
	time.Sleep(window)
	after, err := b.snap(ctx)
	if err != nil {
		return err
	}
	d := after.sub(before)
	starts := map[string][]time.Time{}
	dr := &r.Drift
	*dr = Drift{
		IntervalSeconds: b.o.driftInterval.Seconds(),
		Intervals:       driftIntervals,
		WindowSeconds:   after.at.Sub(before.at).Seconds(),
		Objects:         len(keys),
		MinPerObject:    -1,
		CPU:             d.cpu,
		EngineProcs:     sum(d.engines[callerLandform]),
	}
	for _, run := range b.tr.runsSince(before.at) {
		if run.at.After(after.at) {
			continue
		}
		starts[run.key] = append(starts[run.key], run.started)
		dr.Runs++
		if run.drift {
			dr.DriftRuns++
		}
	}
	var gaps []float64
	for _, key := range keys {
		ts := starts[key]
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			gaps = append(gaps, ts[i].Sub(ts[i-1]).Seconds())
		}
		if dr.MinPerObject < 0 || len(ts) < dr.MinPerObject {
			dr.MinPerObject = len(ts)
		}
		dr.MaxPerObject = max(dr.MaxPerObject, len(ts))
	}
	if len(gaps) > 0 {
		dr.MinGapSeconds, dr.MedianGapSeconds = slices.Min(gaps), median(gaps)
	}
	log("drift: %d runs (%d drift checks) of %d objects in %.0fs; gap between checks of one object: min %.1fs, median %.1fs",
		dr.Runs, dr.DriftRuns, len(keys), dr.WindowSeconds, dr.MinGapSeconds, dr.MedianGapSeconds)
	return nil
}
