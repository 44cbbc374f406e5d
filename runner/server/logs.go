package server

import (
	"bytes"
	"io"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-exec/tfexec"
)

// maxLogLine splits pathological lines so that one log event stays small.
const maxLogLine = 64 << 10

// lineWriter turns terraform's output into lines. Write never fails: a
// writer error would make terraform-exec stop draining the pipe, and
// terraform would block on a full pipe instead of exiting.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) >= maxLogLine {
				w.emit(string(w.buf[:maxLogLine]))
				w.buf = append(w.buf[:0], w.buf[maxLogLine:]...)
				continue
			}
			return len(p), nil
		}
		line := w.buf[:i]
		for len(line) > maxLogLine {
			w.emit(string(line[:maxLogLine]))
			line = line[maxLogLine:]
		}
		w.emit(strings.TrimSuffix(string(line), "\r"))
		w.buf = append(w.buf[:0], w.buf[i+1:]...)
	}
}

// flush emits a last line without a newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(strings.TrimSuffix(string(w.buf), "\r"))
		w.buf = w.buf[:0]
	}
}

// attachLogs streams terraform's stdout and stderr to logf, line by line,
// until the returned function is called. The two streams are written from
// separate goroutines, so logf calls are serialised.
func attachLogs(tf *tfexec.Terraform, logf func(string)) (detach func()) {
	return attachLogsKeeping(tf, logf, nil)
}

// attachLogsKeeping is attachLogs that also keeps the lines of stdout in
// kept, when it is not nil.
func attachLogsKeeping(tf *tfexec.Terraform, logf func(string), kept *strings.Builder) (detach func()) {
	stdout, stderr, flush := logWriters(logf, kept)
	tf.SetStdout(stdout)
	tf.SetStderr(stderr)
	return func() {
		tf.SetStdout(nil)
		tf.SetStderr(nil)
		flush()
	}
}

// logWriters turns the engine's stdout and stderr into lines for logf,
// keeping those of stdout in kept when it is not nil. flush emits the last
// lines once both are written.
func logWriters(logf func(string), kept *strings.Builder) (stdout, stderr io.Writer, flush func()) {
	var mu sync.Mutex
	emit := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		logf(line)
	}
	out := &lineWriter{emit: emit}
	if kept != nil {
		out.emit = func(line string) {
			emit(line)
			kept.WriteString(line)
			kept.WriteByte('\n')
		}
	}
	errs := &lineWriter{emit: emit}
	return out, errs, func() {
		out.flush()
		errs.flush()
	}
}
