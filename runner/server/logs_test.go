package server

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{emit: func(l string) { got = append(got, l) }}
	for _, p := range []string{"first li", "ne\r\nsecond\n\nthi", "rd"} {
		if n, err := w.Write([]byte(p)); err != nil || n != len(p) {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	w.flush()
	if diff := cmp.Diff([]string{"first line", "second", "", "third"}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	got = nil
	w.Write([]byte(strings.Repeat("x", maxLogLine+10) + "\n"))
	if len(got) != 2 || len(got[0]) != maxLogLine || len(got[1]) != 10 {
		t.Fatalf("a long line was not split: %d parts", len(got))
	}
}

// logs collects streamed log lines.
type logs struct {
	mu    sync.Mutex
	lines []string
	seen  chan string
}

func newLogs() *logs { return &logs{seen: make(chan string, 4096)} }

func (l *logs) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	select {
	case l.seen <- line:
	default:
	}
}

func (l *logs) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitFor waits until a line containing substr was logged.
func (l *logs) waitFor(t *testing.T, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line := <-l.seen:
			if strings.Contains(line, substr) {
				return
			}
		case <-deadline:
			t.Fatalf("no log line containing %q within %s; logs:\n%s", substr, timeout, l.text())
		}
	}
}
