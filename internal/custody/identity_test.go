package custody

import (
	"context"
	"testing"
	"time"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// A state token lives for the run's deadline plus slack (at least the
// API server's minimum, a day without deadline); a reused runner's token
// is kept only while it would still live nearly as long as a new one.
func TestTokenLifeAndReuse(t *testing.T) {
	for _, tt := range []struct {
		deadline, want time.Duration
	}{
		{0, 24 * time.Hour},
		{time.Minute, 16 * time.Minute},
		{-time.Second, 24 * time.Hour},
		{2 * time.Hour, 2*time.Hour + 15*time.Minute},
	} {
		if got := tokenLife(tt.deadline); got != tt.want {
			t.Errorf("tokenLife(%s) = %s, want %s", tt.deadline, got, tt.want)
		}
	}
	k := &Keeper{}
	deadline := time.Hour
	if !k.Reusable(time.Now().Add(tokenLife(deadline)-time.Minute), deadline) {
		t.Error("a token issued a minute ago is not reused")
	}
	if k.Reusable(time.Now().Add(tokenLife(deadline)-10*time.Minute), deadline) {
		t.Error("a token issued ten minutes ago is reused")
	}
}

// A custom backend keeps its state elsewhere: no token, no claim, and
// nothing written.
func TestACustomBackendHasNoCustody(t *testing.T) {
	obj := object("db", "uid-db", 0, "")
	obj.Spec.BackendConfig = &v1alpha1.BackendConfig{CustomConfiguration: `terraform { backend "s3" {} }`}
	k, c := keeper(t, obj)
	token, _, err := k.Issue(context.Background(), obj, time.Hour)
	if err != nil || token != "" {
		t.Fatalf("Issue: %q, %v", token, err)
	}
	if err := k.ClaimOnce(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	if err := k.DeleteLease(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	if got := secretCount(t, c); got != 0 {
		t.Fatalf("%d Secrets written for a custom backend", got)
	}
}
