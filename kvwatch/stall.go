package kvwatch

import (
	"sync"
	"time"
)

// writeLog owns what the stall check knows of this node's own writes:
// per bucket, the writes acknowledged that its watcher has yet to
// deliver. The writers (own entries, Put, repair) note them; the watch
// loop asks whether one is overdue. Its lock is a leaf: nothing is called
// under it.
type writeLog struct {
	mu     sync.Mutex // guards writes
	writes [numBuckets]writes
}

// write is an own write to a bucket: its revision and when it was
// acknowledged.
type write struct {
	rev uint64
	at  time.Time
}

// writes are the own writes to a bucket that its watcher has yet to
// deliver, for the stall check: the oldest one not known to be seen, and
// the newest.
type writes struct {
	first, last write
}

// note records an own write at rev in bucket b for the stall check.
func (l *writeLog) note(b Bucket, rev uint64) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := &l.writes[b]
	if w.first.rev == 0 {
		w.first = write{rev, now}
	}
	if rev > w.last.rev {
		w.last = write{rev, now}
	}
}

// stalled reports whether an own write to b acknowledged more than d
// ago is still above seen, the bucket's last revision applied. It then
// forgets the writes, so that one stall is reported once.
func (l *writeLog) stalled(b Bucket, seen uint64, d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := &l.writes[b]
	if w.first.rev != 0 && w.first.rev <= seen {
		// The oldest pending write arrived; the newest one, if not yet
		// seen, is now the one to wait for.
		w.first = write{}
		if w.last.rev > seen {
			w.first = w.last
		}
	}
	if w.first.rev != 0 && time.Since(w.first.at) > d {
		*w = writes{}
		return true
	}
	return false
}
