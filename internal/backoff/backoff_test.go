package backoff

import (
	"context"
	"testing"
	"time"
)

// TestNext checks the pauses of a Backoff: each within [d/2, d] of its
// bound before jitter, the bound doubling from the first pause up to max,
// back to the first after Reset; and that the pauses are not all equal
// (jitter).
func TestNext(t *testing.T) {
	b := New(10*time.Millisecond, 75*time.Millisecond)
	bounds := []time.Duration{10, 20, 40, 75, 75, 75}
	distinct := map[time.Duration]bool{}
	for round := range 50 {
		for i, bound := range bounds {
			bound *= time.Millisecond
			d := b.Next()
			if d < bound/2 || d > bound {
				t.Fatalf("round %d, pause %d: %v, want within [%v, %v]", round, i, d, bound/2, bound)
			}
			distinct[d] = true
		}
		b.Reset()
	}
	if len(distinct) < 10 {
		t.Fatalf("%d distinct pauses in 300: no jitter", len(distinct))
	}
}

// TestBounds checks the edges: a max below the first pause is the first,
// and the zero Backoff pauses 0.
func TestBounds(t *testing.T) {
	b := New(time.Second, time.Millisecond)
	for range 3 {
		if d := b.Next(); d < time.Second/2 || d > time.Second {
			t.Fatalf("pause %v, want within [0.5s, 1s]", d)
		}
	}
	var zero Backoff
	if d := zero.Next(); d != 0 {
		t.Fatalf("zero Backoff: %v, want 0", d)
	}
	if Jitter(1) != 1 || Jitter(0) != 0 {
		t.Fatal("Jitter of 0 or 1ns changed it")
	}
}

// TestWait checks that Wait returns false at once when ctx ends, true
// after a short pause.
func TestWait(t *testing.T) {
	b := New(time.Millisecond, time.Millisecond)
	if !b.Wait(context.Background()) {
		t.Fatal("Wait with a live context returned false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := New(time.Hour, time.Hour)
	if long.Wait(ctx) {
		t.Fatal("Wait with an ended context returned true")
	}
}
