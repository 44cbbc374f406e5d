package placement

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// Two objects share a runner Pod only when their Pods would be the same
// but for what names the object and the run.
func TestReuseKey(t *testing.T) {
	p := &Pod{Image: "runner:1"}
	obj := func(ns, name string, mutate func(*infrav1.Terraform)) *infrav1.Terraform {
		o := &infrav1.Terraform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
		if mutate != nil {
			mutate(o)
		}
		return o
	}
	withEnv := func(v string) func(*infrav1.Terraform) {
		return func(o *infrav1.Terraform) {
			o.Spec.RunnerPodTemplate = &infrav1.RunnerPodTemplate{Spec: infrav1.RunnerPodSpec{Env: []corev1.EnvVar{{Name: "X", Value: v}}}}
		}
	}
	key := func(o *infrav1.Terraform) string { return reuseKey(p.podFor(o, "run-"+o.Name, "tls")) }
	base := key(obj("a", "one", withEnv("1")))
	for _, c := range []struct {
		name string
		obj  *infrav1.Terraform
		same bool
	}{
		{"another object, the same template", obj("a", "two", withEnv("1")), true},
		{"another namespace", obj("b", "one", withEnv("1")), false},
		{"another environment", obj("a", "two", withEnv("2")), false},
		{"no template", obj("a", "two", nil), false},
		{"another ServiceAccount", obj("a", "two", func(o *infrav1.Terraform) { withEnv("1")(o); o.Spec.ServiceAccountName = "other" }), false},
		{"another image", obj("a", "two", func(o *infrav1.Terraform) { withEnv("1")(o); o.Spec.RunnerPodTemplate.Spec.Image = "runner:2" }), false},
		{"a template label", obj("a", "two", func(o *infrav1.Terraform) {
			withEnv("1")(o)
			o.Spec.RunnerPodTemplate.Metadata.Labels = map[string]string{"team": "x"}
		}), false},
	} {
		if got := key(c.obj) == base; got != c.same {
			t.Errorf("%s: same key %v, want %v", c.name, got, c.same)
		}
	}
}

// A Pod serves no run once it is reuseMaxAge old: its env, resolved at
// its start, may hold a rotated Secret's old value.
func TestKeptPodMaxAge(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		created time.Time
		old     bool
	}{
		{now.Add(-time.Minute), false},
		{now.Add(-reuseMaxAge + time.Second), false},
		{now.Add(-reuseMaxAge - time.Second), true},
		{time.Time{}, false}, // not known: the API server sets it
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(c.created)}}
		if got := tooOld(pod, now); got != c.old {
			t.Errorf("created %s before: too old %v, want %v", now.Sub(c.created), got, c.old)
		}
	}
}

// EndKept leaves a kept Pod whose reuse time ran out to its timer, as a
// claim does: the timer, which ends it, must still find it kept.
func TestEndKeptLeavesAFiredTimerItsPod(t *testing.T) {
	p := &Pod{}
	p.ReuseFor(time.Hour)
	pp := &parkedPod{pod: &corev1.Pod{}}
	fired, proceed, found := make(chan struct{}), make(chan struct{}), make(chan bool)
	pp.timer = time.AfterFunc(0, func() {
		close(fired)
		<-proceed
		found <- p.dropParked("key", pp)
	})
	p.pool.mu.Lock()
	p.pool.setParked("key", []*parkedPod{pp})
	p.pool.mu.Unlock()
	<-fired

	p.EndKept(logr.Discard())
	close(proceed)
	if !<-found {
		t.Fatal("EndKept dropped a Pod whose timer had fired: nothing ends it")
	}
}
