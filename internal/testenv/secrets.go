package testenv

import (
	"context"
	"crypto/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RandomBytes returns n random bytes: data that no compression shrinks, so
// that n bytes stay n bytes in a store's chunks.
func RandomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// Secrets lists the Secrets of namespace whose names match, read whole,
// by name.
func (e *Env) Secrets(t testing.TB, namespace string, match func(name string) bool) map[string]corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Secret{}
	for _, s := range list.Items {
		if match(s.Name) {
			out[s.Name] = s
		}
	}
	return out
}

// Secret reads a Secret, which must exist.
func (e *Env) Secret(t testing.TB, namespace, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// UpdateSecret changes a Secret with mutate and writes it back, as someone
// who may write Secrets in its namespace could.
func (e *Env) UpdateSecret(t testing.TB, namespace, name string, mutate func(*corev1.Secret)) {
	t.Helper()
	s := e.Secret(t, namespace, name)
	mutate(s)
	if err := e.Client.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// DeleteSecret deletes a Secret, which must exist.
func (e *Env) DeleteSecret(t testing.TB, namespace, name string) {
	t.Helper()
	if err := e.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}); err != nil {
		t.Fatal(err)
	}
}
