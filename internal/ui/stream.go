package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// keepAlive is how often an idle stream sends a comment, so that proxies
// and the browser keep it open.
const keepAlive = 20 * time.Second

// events writes server-sent events.
type events struct {
	w http.ResponseWriter
	f http.Flusher
	// id is sent with the next event: the browser sends the last one back
	// as Last-Event-ID when it reconnects.
	id string
}

func startEvents(w http.ResponseWriter) (*events, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &events{w: w, f: f}, true
}

// send writes one event; false once the browser is gone.
func (e *events) send(name, data string) bool {
	var b strings.Builder
	if e.id != "" {
		fmt.Fprintf(&b, "id: %s\n", e.id)
	}
	fmt.Fprintf(&b, "event: %s\n", name)
	for _, line := range strings.Split(data, "\n") {
		fmt.Fprintf(&b, "data: %s\n", line)
	}
	b.WriteString("\n")
	if _, err := e.w.Write([]byte(b.String())); err != nil {
		return false
	}
	e.f.Flush()
	return true
}

func (e *events) sendJSON(name string, v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return e.send(name, string(data))
}

func (e *events) comment() bool {
	if _, err := e.w.Write([]byte(": keep-alive\n\n")); err != nil {
		return false
	}
	e.f.Flush()
	return true
}

// forward hands each event of the watches to handle until the browser
// leaves, handle returns false or a watch ends (the browser then
// reconnects and the stream starts again where it was).
func (s *Server) forward(ctx context.Context, ev *events, w watch.Interface, handle func(watch.Event) bool) {
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !ev.comment() {
				return
			}
		case e, ok := <-w.ResultChan():
			if !ok || !handle(e) {
				return
			}
		}
	}
}
