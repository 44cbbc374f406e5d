package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A restartable API server comes back on its address with its
// certificates and its etcd: the client from before the stop reads what
// was written before it.
func TestRestartAPIServer(t *testing.T) {
	e, err := StartRestartable()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "before"}, Data: map[string]string{"k": "v"}}
	if err := e.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := e.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = e.Client.Get(short, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	cancel()
	if err == nil {
		t.Fatal("the API server answers while stopped")
	}
	if err := e.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil || got.Data["k"] != "v" {
		t.Fatalf("after the restart: %v, %v", got.Data, err)
	}
}
