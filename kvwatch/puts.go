package kvwatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
)

// putLog owns repair's memory of the Versions entries this KV wrote with
// Put: Put notes them, Delete forgets them, the watch loop reports the
// writes it sees (saw), and the heartbeat's repair reads and settles them.
// Its lock is a leaf: nothing is called under it.
type putLog struct {
	mu sync.Mutex         // guards m and the ownPuts in it
	m  map[string]*ownPut // by key
}

// ownPut is a permanent entry this KV wrote with Put and has not deleted,
// kept for repair. Its fields are guarded by putLog.mu.
type ownPut struct {
	value []byte
	rev   uint64
	// writing is set while a repair writes the entry again: the watcher
	// may deliver that write before the repair learns its revision, so
	// writes seen meanwhile are only noted (seen, the highest revision)
	// and judged when the repair's own revision is known.
	writing bool
	seen    uint64
}

// all returns the entries noted, by key: a copy of the map, whose
// ownPuts are still guarded by mu.
func (l *putLog) all() map[string]*ownPut {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.m)
}

// revisions returns the revisions of the entries noted.
func (l *putLog) revisions() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	revs := make([]uint64, 0, len(l.m))
	for _, p := range l.m {
		revs = append(revs, p.rev)
	}
	return revs
}

// get returns key's entry and its revision, if noted (for tests).
func (l *putLog) get(key string) (p *ownPut, rev uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok = l.m[key]; ok {
		rev = p.rev
	}
	return p, rev, ok
}

// note records a Put of key for repair; value is owned by the caller.
func (l *putLog) note(key string, value []byte, rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[key] = &ownPut{value: slices.Clone(value), rev: rev}
}

// forget stops repairing key (Delete).
func (l *putLog) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, key)
}

// saw forgets the Put of key when the watcher delivers a
// write of it that is not that Put (another node's newer version, a
// delete): repair must not bring back a value someone replaced. Called by
// the watch loop.
func (l *putLog) saw(key string, rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.m[key]
	switch {
	case !ok:
	case p.writing:
		p.seen = max(p.seen, rev)
	case p.rev != rev:
		delete(l.m, key)
	}
}

// start marks p, the Put of key, as being written again, unless
// it was put again or deleted since the repair took it (false).
func (l *putLog) start(key string, p *ownPut) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[key] != p {
		return false
	}
	p.writing, p.seen = true, 0
	return true
}

// end settles p after its Create (rev, err): kept with its new
// revision, or forgotten when someone else wrote the key meanwhile (a
// revision above ours seen while writing, or the key exists).
func (l *putLog) end(key string, p *ownPut, rev uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p.writing = false
	if l.m[key] != p { // put again or deleted meanwhile
		return
	}
	switch {
	case err == nil && p.seen > rev:
		delete(l.m, key) // written again by someone else since
	case err == nil:
		p.rev = rev
	case errors.Is(err, jetstream.ErrKeyExists):
		delete(l.m, key) // someone else's value now: theirs to keep
	}
}

// Put writes a permanent entry to bucket b, which must be Versions (in the
// TTL'd buckets a plain put would turn a live entry into a permanent one),
// and returns its revision. It blocks for at most OpTimeout; while
// disconnected it fails at once. The caller keeps ownership of value.
func (k *KV) Put(ctx context.Context, b Bucket, key string, value []byte) (uint64, error) {
	if b != Versions {
		return 0, fmt.Errorf("%w: Put takes Versions, not %s", ErrWrongBucket, b)
	}
	if k.cfg.Region.Enabled() {
		return 0, ErrMirror
	}
	if !names.ValidKey(key) {
		return 0, fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	_, kvs, err := k.handles()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
	defer cancel()
	rev, err := kvs[b].Put(ctx, key, value)
	if err != nil {
		return 0, fmt.Errorf("kvwatch: put %s %s: %w", b, key, err)
	}
	k.writes.note(b, rev)
	k.puts.note(key, value, rev)
	return rev, nil
}

// Delete removes key from bucket b, which must be Versions. Deleting a
// missing key succeeds. It blocks for at most OpTimeout.
func (k *KV) Delete(ctx context.Context, b Bucket, key string) error {
	if b != Versions {
		return fmt.Errorf("%w: Delete takes Versions, not %s", ErrWrongBucket, b)
	}
	if k.cfg.Region.Enabled() {
		return ErrMirror
	}
	if !names.ValidKey(key) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	_, kvs, err := k.handles()
	if err != nil {
		return err
	}
	k.puts.forget(key)
	return k.purge(ctx, kvs[b], b, key)
}
