package runs

import (
	"context"
	"testing"
	"time"
)

func TestUserRunsGoBeforeDriftChecks(t *testing.T) {
	q := NewSlots(1)
	release, err := q.Acquire(context.Background(), User)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	start := func(name string, p Priority) {
		go func() {
			rel, err := q.Acquire(context.Background(), p)
			if err != nil {
				t.Error(err)
				return
			}
			order <- name
			rel()
		}()
	}
	start("drift", Background)
	waitWaiting(t, q, 1)
	start("approval", User)
	waitWaiting(t, q, 2)
	start("drift2", Background)
	waitWaiting(t, q, 3)

	release()
	release() // a second call must not free a second slot
	got := []string{<-order, <-order, <-order}
	want := []string{"approval", "drift", "drift2"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	if inUse, waiting := q.Stats(); inUse != 0 || waiting != 0 {
		t.Fatalf("after all released: %d in use, %d waiting", inUse, waiting)
	}
}

func TestBudgetBoundsRunsInFlight(t *testing.T) {
	q := NewSlots(2)
	ctx := context.Background()
	r1, _ := q.Acquire(ctx, User)
	_, _ = q.Acquire(ctx, Background)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := q.Acquire(short, User); err == nil {
		t.Fatal("a third run got a slot out of a budget of two")
	}
	if _, waiting := q.Stats(); waiting != 0 {
		t.Fatalf("a waiter that gave up is still queued: %d", waiting)
	}
	r1()
	r3, err := q.Acquire(ctx, User)
	if err != nil {
		t.Fatal(err)
	}
	r3()
	if inUse, _ := q.Stats(); inUse != 1 {
		t.Fatalf("in use %d, want 1", inUse)
	}
}

func waitWaiting(t *testing.T, q *Slots, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, w := q.Stats(); w == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("never %d waiting", n)
}
