package source

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ArtifactChanged passes a source's creation and deletion, and an update
// only when the artifact it publishes changed (its revision, digest or
// address) or when it has none: the source's other writes (its conditions
// at every fetch, a requested reconcile) do not concern the Terraform
// objects using it. A source watched by its metadata only (a version older
// than v1) passes every update.
var ArtifactChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok := e.ObjectOld.(source)
		after, ok2 := e.ObjectNew.(source)
		if !ok || !ok2 {
			return true
		}
		a, b := before.GetArtifact(), after.GetArtifact()
		if a == nil || b == nil {
			// Without an artifact the objects wait, and say why with the
			// source's own Ready message: keep that message current.
			return true
		}
		return a.Revision != b.Revision || a.Digest != b.Digest || a.URL != b.URL
	},
}
