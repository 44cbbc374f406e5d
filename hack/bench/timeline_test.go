package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTypicalSample(t *testing.T) {
	var t0 time.Time
	after := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	samples := []writeSample{{done: after(1.6)}, {done: after(0.31)}, {done: after(0.29)}, {done: after(0.35)}}
	if got := typicalSample(samples); got != 1 {
		t.Errorf("typicalSample = %d, want 1 (0.31 s, the median of all but the first)", got)
	}
	if got := typicalSample(samples[:1]); got != 0 {
		t.Errorf("typicalSample of one = %d, want 0", got)
	}
}

func TestTimelineOf(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := writeSample{name: "one-1", created: t0, done: at(300)}
	writes := []auditWrite{
		{at: at(0), verb: "create", resource: "terraforms", name: "one-1", writer: "bench harness"},
		{at: at(20), verb: "patch", resource: "terraforms/status", name: "one-1", writer: "landform-controller"},
		{at: at(240), verb: "update", resource: "secrets", name: "tfstate-default-one-1", writer: "tofu"},
		{at: at(290), verb: "patch", resource: "terraforms/status", name: "one-1", writer: "landform-controller"},
	}
	engines := []engineStart{
		{caller: callerRaw, sub: "init", at: at(10)}, // not the object's
		{caller: callerLandform, sub: "init", at: at(50)},
		{caller: callerLandform, sub: "plan", at: at(100)},
		{caller: callerLandform, sub: "show", at: at(170)},
		{caller: callerLandform, sub: "apply", at: at(200)},
		{caller: callerLandform, sub: "init", at: at(400)}, // the next object's
	}
	tl := timelineOf(2, s, writes, engines)
	var got []int64
	for _, p := range tl.Phases {
		got = append(got, p.Millis)
	}
	if diff := cmp.Diff([]int64{50, 50, 70, 30, 40, 60}, got); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if len(tl.Marks) != 9 || tl.Marks[3].What != "engine process `plan` starts" || tl.Marks[8].Millis != 300 {
		t.Errorf("marks = %+v, want the 4 writes, 4 engine starts and Ready in order", tl.Marks)
	}
	if tl.Marks[6].What != "update `secrets` `tfstate-default-<obj>`" {
		t.Errorf("mark 7 = %q, want the engine's state write with the generic name", tl.Marks[6].What)
	}
	// Without an apply, no phases: they would mislead.
	if tl := timelineOf(0, s, writes, engines[:3]); tl.Phases != nil {
		t.Errorf("phases without an apply = %+v, want none", tl.Phases)
	}
}
