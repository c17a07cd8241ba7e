package node

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestPeerSlots: one file at a time from each peer; a file held by
// several goes to a peer not busy first; a take waits for the give, or
// for its context.
func TestPeerSlots(t *testing.T) {
	var s peerSlots
	ctx := context.Background()
	if !s.take(ctx, "a") {
		t.Fatal("take a")
	}
	if got := s.freeFirst([]string{"a", "b", "c"}); !slices.Equal(got, []string{"b", "c", "a"}) {
		t.Fatalf("freeFirst with a busy: %v", got)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if s.take(short, "a") {
		t.Fatal("a taken twice")
	}
	took := make(chan bool)
	go func() { took <- s.take(ctx, "a") }()
	s.give("a")
	if !<-took {
		t.Fatal("a not taken after its give")
	}
	if got := s.freeFirst([]string{"b", "a"}); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("freeFirst: %v", got)
	}
	s.give("a")
	if got := s.freeFirst([]string{"a", "b"}); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("freeFirst, none busy: %v", got)
	}
}
