package reachability

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
)

// Back is called once per outage (two failed probes or more), when the
// first probe after it succeeds; a single failed probe is no outage.
func TestBackOncePerOutage(t *testing.T) {
	answers := []bool{true, false, true, true, false, false, false, true, true, false, false, true}
	var backs []int
	p := &Probe{Log: logr.Discard()}
	for i, up := range answers {
		p.Ready = func(context.Context) error {
			if up {
				return nil
			}
			return errors.New("connection refused")
		}
		p.Back = func(context.Context) { backs = append(backs, i) }
		p.probe(context.Background(), DefaultEvery)
	}
	want := []int{7, 11}
	if len(backs) != len(want) || backs[0] != want[0] || backs[1] != want[1] {
		t.Fatalf("Back called after probes %v, want %v", backs, want)
	}
}
