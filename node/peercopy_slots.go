package node

import (
	"context"
	"slices"
	"sync"
)

// peerSlots lets one copy take a file at a time from each peer. The
// copy's files go to its parallel slots in partition order, so without
// them two slots could go to one sender, sharing its
// peer_copy_bandwidth, while another sender idled (in the peercopy
// bench, a sender idle for 165 ms of a copy's 1,460 while the other sent
// two files). With them a slot whose next file is from a busy peer
// waits, its file ready, and starts the moment that peer's file is done.
type peerSlots struct {
	mu    sync.Mutex
	slots map[string]chan struct{} // by peer: full while a file is copied from it
}

// freeFirst returns peers with those whose slot is free first, each
// part in its order: a file held by several peers goes to one not busy
// with another of the copy's files.
func (s *peerSlots) freeFirst(peers []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	busy := func(p string) bool { return len(s.slots[p]) > 0 }
	out := slices.DeleteFunc(slices.Clone(peers), busy)
	for _, p := range peers {
		if busy(p) {
			out = append(out, p)
		}
	}
	return out
}

// take waits for peer's slot and takes it; false when ctx ends first.
func (s *peerSlots) take(ctx context.Context, peer string) bool {
	s.mu.Lock()
	if s.slots == nil {
		s.slots = map[string]chan struct{}{}
	}
	c := s.slots[peer]
	if c == nil {
		c = make(chan struct{}, 1)
		s.slots[peer] = c
	}
	s.mu.Unlock()
	select {
	case c <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// give returns peer's slot, taken with take.
func (s *peerSlots) give(peer string) {
	s.mu.Lock()
	c := s.slots[peer]
	s.mu.Unlock()
	<-c
}
