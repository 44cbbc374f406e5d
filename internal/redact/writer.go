package redact

import (
	"bytes"
	"io"
	"sync"
)

// maxHold bounds the bytes held back waiting for a newline, so that output
// without newlines (progress dots, a huge JSON document) still streams.
const maxHold = 64 << 10

// Flusher is implemented by the writer Writer returns.
type Flusher interface {
	// Flush redacts and writes whatever is still held back. Call it once
	// the stream ends, or the last line (if it has no newline) is lost.
	Flush() error
}

// Writer returns a line-buffered writer that redacts what is written before
// passing it to w. Whole lines are written at once; a secret spanning
// several lines (a PEM key) is still caught, because a line whose end might
// start a secret is held until the secret can be told apart. The returned
// writer implements Flusher; call Flush when done. It is safe for concurrent
// use.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	return &writer{r: r, w: w}
}

type writer struct {
	mu  sync.Mutex
	r   *Redactor
	w   io.Writer
	buf []byte
	out []byte
}

func (lw *writer) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.buf = append(lw.buf, p...)
	limit := bytes.LastIndexByte(lw.buf, '\n') + 1
	if len(lw.buf) > maxHold {
		limit = len(lw.buf)
	}
	if err := lw.emit(limit, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (lw *writer) Flush() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.emit(len(lw.buf), true)
}

func (lw *writer) emit(limit int, final bool) error {
	if limit == 0 {
		return nil
	}
	var n int
	if lw.r == nil || len(lw.r.byFirst) == 0 {
		lw.out, n = append(lw.out[:0], lw.buf[:limit]...), limit
	} else {
		lw.out, n = lw.r.redact(lw.out[:0], lw.buf, limit, final)
	}
	lw.buf = append(lw.buf[:0], lw.buf[n:]...)
	if len(lw.out) == 0 {
		return nil
	}
	_, err := lw.w.Write(lw.out)
	return err
}
