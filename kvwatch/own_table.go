package kvwatch

import (
	"hash/fnv"
	"maps"
	"slices"
	"sync"
)

// ownTable owns the registry of this node's own TTL'd entries and the
// locks that serialise the writes of each key. Publish registers
// (entryFor) and Withdraw removes (remove); the heartbeat, repair and
// Shutdown read (all, in, registered) and write each entry under its key
// lock (forEach); Shutdown closes it (closeAll). A key lock is taken
// before mu; mu is a leaf.
type ownTable struct {
	keyLocks [keyLockStripes]sync.Mutex // serialise the writes of each own key; see keyLock

	mu sync.Mutex // guards m (nil once closeAll ran)
	m  map[ownKey]*ownEntry
}

func newOwnTable() ownTable { return ownTable{m: make(map[ownKey]*ownEntry)} }

type ownKey struct {
	b   Bucket
	key string
}

// keyLockStripes is the number of locks that serialise the writes of own
// keys.
const keyLockStripes = 64

// keyLock returns the lock that serialises every write of key in b:
// Publish, Withdraw, heartbeat refreshes and the deletes of Shutdown. It is
// per key, not per registration, so that a Withdraw's delete and the next
// Publish's create of the same key never overlap (they would take the key
// from each other). Keys share a few locks (striping).
func (t *ownTable) keyLock(b Bucket, key string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte{byte(b)})
	h.Write([]byte(key))
	return &t.keyLocks[h.Sum32()%keyLockStripes]
}

// registered reports whether e is still the registered entry of its key.
func (t *ownTable) registered(e *ownEntry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[ownKey{e.b, e.key}] == e
}

// entryFor returns the own entry of (b, key), registering a new one;
// ErrClosed once closeAll ran.
func (t *ownTable) entryFor(b Bucket, key string) (*ownEntry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		return nil, ErrClosed
	}
	id := ownKey{b, key}
	e := t.m[id]
	if e == nil {
		e = &ownEntry{b: b, key: key}
		t.m[id] = e
	}
	return e, nil
}

// remove unregisters the entry of (b, key) and returns it, nil if none.
func (t *ownTable) remove(b Bucket, key string) *ownEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[ownKey{b, key}]
	delete(t.m, ownKey{b, key})
	return e
}

// all returns the registered entries.
func (t *ownTable) all() []*ownEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Values(t.m))
}

// in returns the registered entries of bucket b.
func (t *ownTable) in(b Bucket) []*ownEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var entries []*ownEntry
	for _, e := range t.m {
		if e.b == b {
			entries = append(entries, e)
		}
	}
	return entries
}

// closeAll unregisters every entry and returns them; later entryFor calls
// fail with ErrClosed. For Shutdown.
func (t *ownTable) closeAll() []*ownEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	entries := slices.Collect(maps.Values(t.m))
	t.m = nil
	return entries
}

// forEach calls fn on every entry, refreshParallelism at a time, each
// call holding its entry's key lock (keyLock), and returns when all calls
// have returned. It must be called without any key lock held.
func (t *ownTable) forEach(entries []*ownEntry, fn func(*ownEntry)) {
	sem := make(chan struct{}, refreshParallelism)
	var wg sync.WaitGroup
	for _, e := range entries {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			l := t.keyLock(e.b, e.key)
			l.Lock()
			defer l.Unlock()
			fn(e)
		})
	}
	wg.Wait()
}
