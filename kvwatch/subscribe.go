package kvwatch

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// snapshots owns the current snapshot and the Subscribe channels: the
// watch loop stores (store, from its one goroutine), API callers load and
// subscribe, Shutdown closes. It is KV's part for what the watchers made;
// nothing else of KV is under its lock.
type snapshots struct {
	cur     atomic.Pointer[Snapshot]
	dropped prometheus.Counter // notifications replaced unread

	// mu guards subs and closed. store holds it across replacing cur and
	// notifying, which keeps a new subscriber's first snapshot and the
	// later notifications in order.
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

// subscriber is one Subscribe channel.
type subscriber struct {
	ch chan *Snapshot // buffer 1: holds the latest snapshot not yet read
}

// newSnapshots returns the part holding first as the current snapshot,
// counting replaced notifications in dropped.
func newSnapshots(first *Snapshot, dropped prometheus.Counter) *snapshots {
	s := &snapshots{dropped: dropped, subs: make(map[*subscriber]struct{})}
	s.cur.Store(first)
	return s
}

// load returns the current snapshot. It does not block.
func (s *snapshots) load() *Snapshot { return s.cur.Load() }

// Subscribe returns a channel that delivers the current snapshot at once,
// then each new snapshot whose keys, values, Connected or Stale changed
// (refreshes that only move revisions are not notified; Snapshot has
// them). The contract:
//
//   - snapshots arrive in the order they were made, from the one goroutine
//     that applies the watchers' updates;
//   - the channel holds one snapshot. A consumer that does not keep up is
//     never waited for: the unread snapshot is replaced by the newer one
//     (counted in spangle_kvwatch_dropped_notifications_total), so a slow
//     consumer skips intermediate snapshots but always ends with the
//     latest one;
//   - cancel stops the deliveries and closes the channel; it is idempotent.
//     Shutdown closes every channel too.
//
// Subscribing after Shutdown returns a closed channel.
func (k *KV) Subscribe() (snapshots <-chan *Snapshot, cancel func()) {
	return k.snaps.subscribe()
}

func (s *snapshots) subscribe() (<-chan *Snapshot, func()) {
	sub := &subscriber{ch: make(chan *Snapshot, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(sub.ch)
		return sub.ch, func() {}
	}
	s.subs[sub] = struct{}{}
	sub.ch <- s.cur.Load()
	return sub.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[sub]; ok {
			delete(s.subs, sub)
			close(sub.ch)
		}
	}
}

// store makes snap the current snapshot and, if notify, hands it to every
// subscriber. Only the watch loop calls it; it never blocks on a consumer.
func (s *snapshots) store(snap *Snapshot, notify bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.Store(snap)
	if !notify {
		return
	}
	for sub := range s.subs {
		select {
		case sub.ch <- snap:
			continue
		default:
		}
		select {
		case <-sub.ch:
			s.dropped.Inc()
		default: // the consumer read it meanwhile
		}
		// Cannot block: the buffer is empty now and only this goroutine
		// sends, under mu.
		sub.ch <- snap
	}
}

// close closes every subscriber channel, for Shutdown; later subscribers
// get a closed channel. Idempotent.
func (s *snapshots) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for sub := range s.subs {
		close(sub.ch)
	}
	clear(s.subs)
}
