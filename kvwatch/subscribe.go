package kvwatch

// subscriber is one Subscribe channel.
type subscriber struct {
	ch chan *Snapshot // buffer 1: holds the latest snapshot not yet read
}

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
	s := &subscriber{ch: make(chan *Snapshot, 1)}
	k.subMu.Lock()
	defer k.subMu.Unlock()
	if k.subsClosed {
		close(s.ch)
		return s.ch, func() {}
	}
	k.subs[s] = struct{}{}
	s.ch <- k.snap.Load()
	return s.ch, func() {
		k.subMu.Lock()
		defer k.subMu.Unlock()
		if _, ok := k.subs[s]; ok {
			delete(k.subs, s)
			close(s.ch)
		}
	}
}

// store makes s the current snapshot and, if notify, hands it to every
// subscriber. Holding subMu across both keeps a new subscriber's first
// snapshot and the later notifications in order.
func (k *KV) store(s *Snapshot, notify bool) {
	k.subMu.Lock()
	defer k.subMu.Unlock()
	k.snap.Store(s)
	if !notify {
		return
	}
	for sub := range k.subs {
		select {
		case sub.ch <- s:
			continue
		default:
		}
		select {
		case <-sub.ch:
			k.met.droppedNotifies.Inc()
		default: // the consumer read it meanwhile
		}
		// Cannot block: the buffer is empty now and only this goroutine
		// sends, under subMu.
		sub.ch <- s
	}
}

// closeSubscribers closes every subscriber channel, for Shutdown.
func (k *KV) closeSubscribers() {
	k.subMu.Lock()
	defer k.subMu.Unlock()
	k.subsClosed = true
	for sub := range k.subs {
		close(sub.ch)
	}
	clear(k.subs)
}
