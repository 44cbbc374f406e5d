package source

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

var (
	_ manager.Runnable               = (*Pruner)(nil)
	_ manager.LeaderElectionRunnable = (*Pruner)(nil)
)

// startPruner runs p until the test stops it with the returned function,
// which fails the test unless Start returns nil promptly.
func startPruner(t *testing.T, p *Pruner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	return func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v, want nil when its context ends", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Start did not return after its context ended")
		}
	}
}

func gone(path string) func() bool {
	return func() bool { _, err := os.Stat(path); return os.IsNotExist(err) }
}

func TestPrunerPrunesAtStartAndEveryInterval(t *testing.T) {
	srv := newArtifactServer(t)
	f := newTestFetcher(t)
	var (
		mu   sync.Mutex
		logs []string
	)
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, args)
	}, funcr.Options{})
	opts := PruneOptions{MaxAge: time.Hour}
	past := time.Now().Add(-2 * time.Hour)

	// At start, long before the first tick.
	first := fetchUsedAt(t, f, srv, "first", 100, past)
	kept := fetchUsedAt(t, f, srv, "kept", 100, time.Now())
	stop := startPruner(t, &Pruner{Fetcher: f, Interval: time.Hour, Options: opts, Log: log})
	eventually(t, "the pruner removes the old artifact at start", gone(first.tarball))
	stop()
	assertCached(t, first, false)
	assertCached(t, kept, true)

	// And again at every tick.
	stop = startPruner(t, &Pruner{Fetcher: f, Interval: 20 * time.Millisecond, Options: opts, Log: log})
	time.Sleep(50 * time.Millisecond) // past the first prune
	second := fetchUsedAt(t, f, srv, "second", 200, past)
	eventually(t, "a later tick removes an artifact that got old meanwhile", gone(second.tarball))
	stop()
	assertCached(t, second, false)
	assertCached(t, kept, true)

	// After Start returned, nothing prunes any more.
	third := fetchUsedAt(t, f, srv, "third", 100, past)
	time.Sleep(100 * time.Millisecond)
	assertCached(t, third, true)

	mu.Lock()
	defer mu.Unlock()
	var pruned []string
	for _, l := range logs {
		if strings.Contains(l, `"msg"="pruned the artifact cache"`) {
			pruned = append(pruned, l)
		}
	}
	if len(pruned) != 2 || !strings.Contains(pruned[0], `"removed"=1`) || !strings.Contains(pruned[1], `"removed"=1`) {
		t.Errorf("want two info lines reporting one removal each, got %q", pruned)
	}
}

func TestPrunerNeedsNoLeaderElection(t *testing.T) {
	if (&Pruner{}).NeedLeaderElection() {
		t.Error("NeedLeaderElection() = true, want false: every replica has its own cache")
	}
}
