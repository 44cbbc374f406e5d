package main

import (
	"context"
	"fmt"
	"time"
)

// The cluster bench with a controller that keeps runner Pods for reuse
// (--runner-pod-reuse): a sample, and the scale run, end once every runner
// Pod of the namespace is idle and kept, not gone, and the namespace
// settles when its only Pods are those. A kept Pod costs the node nothing
// while it waits; its start is charged to the sample that created it.

// podReuse is the controller's --runner-pod-reuse, "" when it keeps none.
func (cb *clusterBench) podReuse() string {
	v := controllerFlags(cb.ctrl.args)["runner-pod-reuse"]
	if d, err := time.ParseDuration(v); err != nil || d <= 0 {
		return ""
	}
	return v
}

// waitIdle waits until the namespace's Pods are all runner Pods the
// controller keeps for reuse: none, when it keeps none or a peer is
// measured.
func (cb *clusterBench) waitIdle(ctx context.Context) error {
	if cb.peer != nil || cb.podReuse() == "" {
		return cb.tl.waitNoPods(ctx)
	}
	for {
		live := cb.tl.liveCount()
		kept, err := podsKept(cb.ctrl.metricsURL)
		if err != nil {
			return err
		}
		if live == kept {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the %d Pods of namespace %s to go or be kept for reuse (%d kept): %w", live, cb.co.ns, kept, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// podsKept reads the controller's landform_runner_pods_kept.
func podsKept(url string) (int, error) {
	body, err := scrape(url)
	if err != nil {
		return 0, err
	}
	samples, err := metricSamples(body, "landform_runner_pods_kept")
	if err != nil {
		return 0, fmt.Errorf("controller %w", err)
	}
	if len(samples) != 1 {
		return 0, fmt.Errorf("controller: %d samples of landform_runner_pods_kept", len(samples))
	}
	return int(samples[0].value), nil
}
