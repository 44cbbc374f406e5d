package reachability

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
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

// WakeAll queues every Terraform object there is, of every namespace.
func TestWakeAllQueuesEveryObject(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db"}},
		&v1alpha1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "net"}},
	).Build()
	to := make(chan event.GenericEvent, 4)
	WakeAll(c, to)(context.Background())
	close(to)
	var got []string
	for e := range to {
		got = append(got, e.Object.GetNamespace()+"/"+e.Object.GetName())
	}
	if len(got) != 2 || got[0] != "a/db" || got[1] != "b/net" {
		t.Fatalf("woke %v, want [a/db b/net]", got)
	}
}
