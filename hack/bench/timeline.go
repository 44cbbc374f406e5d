package main

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Timeline is one object's life, create to Ready, as the API server's
// audit log and the engine counter saw it: where the time over the raw
// engine goes, phase by phase.
type Timeline struct {
	// Sample is the object's index among the samples: the one whose
	// Ready time is the median of all but the first (which also waits
	// for the controller's first reconcile of anything).
	Sample      int    `json:"sample"`
	ReadyMillis int64  `json:"readyMs"`
	Marks       []Mark `json:"marks"`
	Phases      []Span `json:"phases"`
}

// Mark is one moment of the timeline: an API write, an engine process's
// start, or Ready seen.
type Mark struct {
	Millis int64  `json:"ms"` // since the object's create was received
	What   string `json:"what"`
	Writer string `json:"writer,omitempty"`
}

// Span is a phase of one timeline: the time between two marks.
type Span struct {
	Name   string `json:"name"`
	Millis int64  `json:"ms"`
}

// typicalSample is the index of the sample with the median Ready time,
// the first left out when there are others.
func typicalSample(samples []writeSample) int {
	idx := make([]int, 0, len(samples))
	for i := range samples {
		if i > 0 || len(samples) == 1 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return 0
	}
	sort.SliceStable(idx, func(a, b int) bool { return samples[idx[a]].ready() < samples[idx[b]].ready() })
	return idx[len(idx)/2]
}

// timelineOf merges sample i's writes, the runners' engine processes
// started in its life, and its Ready into one timeline with its phases.
func timelineOf(i int, s writeSample, writes []auditWrite, engines []engineStart) *Timeline {
	ms := func(t time.Time) int64 { return t.Sub(s.created).Milliseconds() }
	tl := &Timeline{Sample: i, ReadyMillis: ms(s.done)}
	for _, w := range writes {
		tl.Marks = append(tl.Marks, Mark{Millis: ms(w.at), What: fmt.Sprintf("%s `%s` `%s`", w.verb, w.resource, genericName(w.name, s.name)), Writer: w.writer})
	}
	first := map[string]time.Time{}
	for _, e := range engines {
		if e.caller != callerLandform || e.at.IsZero() || e.at.Before(s.created) || e.at.After(s.done) {
			continue
		}
		tl.Marks = append(tl.Marks, Mark{Millis: ms(e.at), What: "engine process `" + e.sub + "` starts", Writer: "landform-runner"})
		if _, ok := first[e.sub]; !ok {
			first[e.sub] = e.at
		}
	}
	tl.Marks = append(tl.Marks, Mark{Millis: tl.ReadyMillis, What: "Ready with its outputs Secret, seen by the harness's watch"})
	slices.SortStableFunc(tl.Marks, func(a, b Mark) int { return int(a.Millis - b.Millis) })

	// The engine's state write of the apply ends the apply's phase.
	var stateWritten time.Time
	if apply, ok := first["apply"]; ok {
		for _, w := range writes {
			if w.writer == "tofu" && w.resource == "secrets" && w.at.After(apply) {
				stateWritten = w.at
				break
			}
		}
	}
	bounds := []struct {
		name string
		at   time.Time
	}{
		{"", s.created},
		{"create → `init` starts: the controller takes the object up, claims its state, records the run, starts a runner, hands it the workspace", first["init"]},
		{"`init`", first["plan"]},
		{"`plan`", first["show"]},
		{"`show -json`, the plan stored, the apply recorded and handed to the runner", first["apply"]},
		{"`apply`, to the engine's state write", stateWritten},
		{"after the apply: the engine's end, the lock released, the log, the kept artifact and the outputs, event, status; to Ready seen", s.done},
	}
	for j := 1; j < len(bounds); j++ {
		if bounds[j].at.IsZero() || bounds[j-1].at.IsZero() {
			tl.Phases = nil
			break
		}
		tl.Phases = append(tl.Phases, Span{Name: bounds[j].name, Millis: bounds[j].at.Sub(bounds[j-1].at).Milliseconds()})
	}
	return tl
}

// writeMarkdown renders the timeline: its phases, then every mark.
func (tl *Timeline) writeMarkdown(p printer, samples int) {
	p("\n\nWhere one object's time goes: sample %d of %d (the median Ready time but the first's), %d ms from its create to Ready seen. "+
		"Engine processes are placed by the counting wrapper's clock when they start (see Method), API writes by the audit log's.\n\n", tl.Sample+1, samples, tl.ReadyMillis)
	if len(tl.Phases) > 0 {
		p("| phase | ms |\n|---|---|\n")
		for _, ph := range tl.Phases {
			p("| %s | %d |\n", ph.Name, ph.Millis)
		}
		p("\n")
	}
	p("<details><summary>Its marks in order</summary>\n\n| ms | what | by |\n|---|---|---|\n")
	for _, m := range tl.Marks {
		p("| %d | %s | %s |\n", m.Millis, m.What, m.Writer)
	}
	p("\n</details>\n")
}
