package kvwatch

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Entry is the current state of one key.
type Entry struct {
	// Value is the key's value. It is shared by every snapshot that holds
	// the entry: callers must not modify it.
	Value []byte
	// Revision is the JetStream sequence of the write that produced the
	// entry. A heartbeat refresh gives an own entry a new revision.
	Revision uint64
	// Created is when that write was stored, by the server's clock.
	Created time.Time
}

// Snapshot is an immutable view of the three buckets as the watchers last
// saw them. Its methods are safe for concurrent use; a Snapshot never
// changes once published, so a reader holding one sees a consistent state
// however long it keeps it. The zero value is an empty, disconnected, stale
// snapshot.
type Snapshot struct {
	buckets   [numBuckets]map[string]Entry
	revisions [numBuckets]uint64
	connected bool
	current   bool // not stale; inverted so that the zero value is stale
	since     time.Time
	// staleSince is when the stale period this snapshot is in began, zero
	// when current or before the watch loop ran: the stale-age metric.
	staleSince time.Time

	sortOnce [numBuckets]sync.Once
	sorted   [numBuckets][]string
}

// Connected reports whether the connection to NATS was up when the snapshot
// was taken.
func (s *Snapshot) Connected() bool { return s.connected }

// Stale reports whether the snapshot may lag behind the buckets: while the
// connection is down (expiry markers cannot arrive, so entries of nodes
// that died meanwhile are still present) and until every watcher has
// caught up after connecting. Decisions based on the absence of an entry's
// expiry are unsafe while Stale is true. A snapshot taken before the first
// full load is stale too.
func (s *Snapshot) Stale() bool { return !s.current }

// Since returns when Connected or Stale last changed.
func (s *Snapshot) Since() time.Time { return s.since }

// Revision returns the highest revision applied to bucket b.
func (s *Snapshot) Revision(b Bucket) uint64 {
	if !b.valid() {
		return 0
	}
	return s.revisions[b]
}

// Get returns the entry of key in bucket b.
func (s *Snapshot) Get(b Bucket, key string) (Entry, bool) {
	if !b.valid() {
		return Entry{}, false
	}
	e, ok := s.buckets[b][key]
	return e, ok
}

// Len returns the number of keys in bucket b.
func (s *Snapshot) Len(b Bucket) int {
	if !b.valid() {
		return 0
	}
	return len(s.buckets[b])
}

// Keys returns the keys of bucket b in byte-wise order. The caller owns the
// returned slice.
func (s *Snapshot) Keys(b Bucket) []string {
	if !b.valid() {
		return nil
	}
	return slices.Clone(s.sortedKeys(b))
}

// Range calls fn for each key of bucket b that starts with prefix, in
// byte-wise key order, until fn returns false. An empty prefix ranges over
// the whole bucket. fn must not modify e.Value.
func (s *Snapshot) Range(b Bucket, prefix string, fn func(key string, e Entry) bool) {
	if !b.valid() {
		return
	}
	keys := s.sortedKeys(b)
	for i := sort.SearchStrings(keys, prefix); i < len(keys) && strings.HasPrefix(keys[i], prefix); i++ {
		if !fn(keys[i], s.buckets[b][keys[i]]) {
			return
		}
	}
}

func (s *Snapshot) sortedKeys(b Bucket) []string {
	s.sortOnce[b].Do(func() {
		keys := make([]string, 0, len(s.buckets[b]))
		for k := range s.buckets[b] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		s.sorted[b] = keys
	})
	return s.sorted[b]
}

// sameContent reports whether a and b hold the same keys and values (in
// every bucket), ignoring revisions: a heartbeat refresh changes only
// those.
func sameContent(a, b map[string]Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, ea := range a {
		eb, ok := b[k]
		if !ok || string(ea.Value) != string(eb.Value) {
			return false
		}
	}
	return true
}
