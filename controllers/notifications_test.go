package controllers

import (
	"encoding/json"
	"net/http"
	"sync"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
)

// notificationSink stands where notification-controller's event endpoint
// would: Flux's event recorder posts the controller's events to it.
type notificationSink struct {
	mu     sync.Mutex
	events []eventv1.Event
}

func (n *notificationSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e eventv1.Event
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n.mu.Lock()
	n.events = append(n.events, e)
	n.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// about returns the events posted about the object ns/name, oldest first.
func (n *notificationSink) about(ns, name string) []eventv1.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []eventv1.Event
	for _, e := range n.events {
		if e.InvolvedObject.Namespace == ns && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}
