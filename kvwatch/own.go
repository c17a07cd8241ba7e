package kvwatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
)

// refreshParallelism bounds the concurrent writes of one heartbeat round,
// and the concurrent deletes of Shutdown.
const refreshParallelism = 8

// ownEntry is a TTL'd entry this KV publishes and keeps alive. Its fields
// are guarded by its key's lock (ownTable.keyLock), held across each write.
type ownEntry struct {
	b     Bucket
	key   string
	value []byte // owned by the entry
	rev   uint64 // revision of our last write; 0 when unknown or lost
	// written is when the last write succeeded; the heartbeat refreshes
	// the entry once a third of its TTL has passed since.
	written time.Time
}

// ttl is the time to live of own entries in bucket b.
func (k *KV) ttl(b Bucket) time.Duration {
	if b == Partitions {
		return k.cfg.PartitionsTTL
	}
	return k.cfg.EntryTTL
}

// due reports whether the heartbeat round at now is to refresh e: the
// round before a third of its TTL has passed since its last write would
// be too late.
func (k *KV) due(e *ownEntry, now time.Time) bool {
	return e.rev == 0 || now.Sub(e.written)+k.cfg.heartbeat() >= k.ttl(e.b)/3
}

// Publish makes key in bucket b (Nodes or Partitions) hold value, as an
// entry of this KV that lives EntryTTL past its last refresh: the heartbeat
// refreshes it every Heartbeat until Withdraw or Shutdown. Publishing an
// own key again replaces its value.
//
// The write is a compare-and-set on the revision this KV last wrote, with
// the entry's TTL in the same message (a plain put would make the key
// permanent). When that fails because the key expired, or because someone
// else wrote it, Publish re-creates it or writes over the other value: the
// keys embed the node ID, so this process is their owner. Taking over a
// value written by someone else is logged, and counted in
// spangle_kvwatch_key_conflicts_total; two processes with the same node ID
// show up there.
//
// The entry stays registered when the write fails (NATS unreachable, say):
// the heartbeat keeps trying, and a reconnect re-puts it at once. Publish
// blocks for at most a few OpTimeouts, after any write of the same key (or
// of a key sharing its lock) in progress. The caller keeps ownership of
// value.
func (k *KV) Publish(ctx context.Context, b Bucket, key string, value []byte) error {
	if !b.valid() || !b.TTL() {
		return fmt.Errorf("%w: Publish takes Nodes or Partitions, not %s", ErrWrongBucket, b)
	}
	if !names.ValidKey(key) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	if _, _, err := k.handles(); err != nil {
		return err
	}
	value = slices.Clone(value)
	if value == nil {
		value = []byte{}
	}
	l := k.own.keyLock(b, key)
	l.Lock()
	defer l.Unlock()
	e, err := k.own.entryFor(b, key)
	if err != nil {
		return err
	}
	e.value = value
	return k.writeOwnLocked(ctx, e)
}

// Withdraw deletes the own entry key of bucket b and stops refreshing it.
// Withdrawing a key this KV does not publish does nothing and returns nil.
// When the delete fails the entry still disappears, EntryTTL after its
// last refresh.
func (k *KV) Withdraw(ctx context.Context, b Bucket, key string) error {
	if !b.valid() || !b.TTL() {
		return fmt.Errorf("%w: Withdraw takes Nodes or Partitions, not %s", ErrWrongBucket, b)
	}
	_, kvs, err := k.handles()
	if err != nil {
		return err
	}
	l := k.own.keyLock(b, key)
	l.Lock()
	defer l.Unlock()
	if e := k.own.remove(b, key); e == nil {
		return nil
	}
	return k.purge(ctx, kvs[b], b, key)
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

// purge removes key with a purge marker that itself expires after
// MarkerTTL, so that deleted keys leave nothing behind for good.
func (k *KV) purge(ctx context.Context, kv jetstream.KeyValue, b Bucket, key string) error {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
	defer cancel()
	if err := kv.Purge(ctx, key, jetstream.PurgeTTL(k.cfg.MarkerTTL)); err != nil {
		return fmt.Errorf("kvwatch: delete %s %s: %w", b, key, err)
	}
	return nil
}

// writeOwnLocked writes e's value with e's TTL: a CAS refresh when the
// last revision is known, else (or when the CAS fails) a claim. e's key
// lock is held.
func (k *KV) writeOwnLocked(ctx context.Context, e *ownEntry) error {
	had := e.rev != 0
	if had {
		rev, err := k.casPublish(ctx, e.b, e.key, e.value, e.rev)
		if err == nil {
			e.rev, e.written = rev, time.Now()
			k.writes.note(e.b, rev)
			return nil
		}
		if !isWrongLastSeq(err) {
			return fmt.Errorf("kvwatch: refresh %s %s: %w", e.b, e.key, err)
		}
		// Expired, deleted, or written by someone else since our last
		// write: claim it again.
		e.rev = 0
	}
	rev, err := k.claim(ctx, e, had)
	if err != nil {
		return fmt.Errorf("kvwatch: publish %s %s: %w", e.b, e.key, err)
	}
	e.rev, e.written = rev, time.Now()
	k.writes.note(e.b, rev)
	return nil
}

// claim creates e's key with its TTL, or, when the key exists, writes over
// the current value with a CAS on its revision. had says whether this KV
// had the key before (a changed value is then a conflict worth a warning;
// otherwise it is most likely what a previous run of this node left).
func (k *KV) claim(ctx context.Context, e *ownEntry, had bool) (uint64, error) {
	_, kvs, err := k.handles()
	if err != nil {
		return 0, err
	}
	kv := kvs[e.b]
	var lastErr error
	for range 3 {
		octx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
		rev, err := kv.Create(octx, e.key, e.value, jetstream.KeyTTL(k.ttl(e.b)))
		cancel()
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, err
		}
		octx, cancel = context.WithTimeout(ctx, k.cfg.OpTimeout)
		cur, err := kv.Get(octx, e.key)
		cancel()
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			lastErr = err
			continue // expired or deleted in between: create again
		}
		if err != nil {
			return 0, err
		}
		rev, err = k.casPublish(ctx, e.b, e.key, e.value, cur.Revision())
		if err == nil {
			switch {
			case had && !bytes.Equal(cur.Value(), e.value):
				k.met.conflicts.Inc()
				k.log.Warn("own key held someone else's value; took it back (two processes with one node ID?)",
					"bucket", e.b, "key", e.key, "their_revision", cur.Revision())
			case !had:
				k.log.Info("took over an existing entry, likely left by an earlier run of this node",
					"bucket", e.b, "key", e.key, "revision", cur.Revision())
			}
			return rev, nil
		}
		if !isWrongLastSeq(err) {
			return 0, err
		}
		lastErr = err
	}
	return 0, fmt.Errorf("%w: %w", ErrConflict, lastErr)
}

// casPublish writes value to key with the entry TTL, if the key's last
// revision is rev: the heartbeat's refresh. Both the TTL and the CAS travel
// in the one message, so the refresh neither makes the key permanent (as
// kv.Put or kv.Update would) nor resurrects a key that expired or changed
// hands meanwhile.
func (k *KV) casPublish(ctx context.Context, b Bucket, key string, value []byte, rev uint64) (uint64, error) {
	js, _, err := k.handles()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
	defer cancel()
	msg := &nats.Msg{Subject: names.KVSubject(bucketName(k.cfg.ClusterName, b), key), Data: value}
	ack, err := js.PublishMsg(ctx, msg,
		jetstream.WithMsgTTL(k.ttl(b)),
		jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// isWrongLastSeq reports a failed CAS: JetStream's "wrong last sequence",
// 10071, or 10164 on replicated streams.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// heartbeat refreshes every own entry each Heartbeat, and at once when
// kicked (after a reconnect), until ctx ends; each Heartbeat it also
// repairs the buckets that lost own entries (checkBuckets). It skips
// rounds while disconnected: those writes could only fail.
func (k *KV) heartbeat(ctx context.Context, ln *link) {
	t := time.NewTicker(k.cfg.heartbeat())
	defer t.Stop()
	var seen [numBuckets]bucketSeen
	if ln.nc.IsConnected() {
		k.checkBuckets(ctx, &seen) // learn the streams' creation times
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ln.nc.IsConnected() {
				// The check first: a refresh re-creates a purged own
				// entry quietly, and the bucket would then look whole
				// while others' purged keys stay in the snapshot.
				k.checkBuckets(ctx, &seen)
				k.refreshAll(ctx, false)
			}
		case <-k.events.refresh:
			if ln.nc.IsConnected() {
				k.refreshAll(ctx, true)
			}
		}
	}
}

// refreshAll writes the own entries that are due (all of them with all, as
// after a reconnect), a few at a time. An entry that is being written
// (Publish) is refreshed after that write, and one withdrawn meanwhile is
// skipped.
func (k *KV) refreshAll(ctx context.Context, all bool) {
	k.own.forEach(k.own.all(), func(e *ownEntry) {
		if !k.own.registered(e) || !(all || k.due(e, time.Now())) {
			return
		}
		if err := k.writeOwnLocked(ctx, e); err != nil && ctx.Err() == nil {
			k.met.heartbeatFailures.Inc()
			k.log.Warn("heartbeat refresh failed", "bucket", e.b, "key", e.key, "err", err)
		}
	})
}

// withdrawAll deletes every own entry and closes the registry, for
// Shutdown. Failures are logged, not returned: the entries expire within
// EntryTTL anyway.
func (k *KV) withdrawAll(ctx context.Context, kvs [numBuckets]jetstream.KeyValue) {
	k.own.forEach(k.own.closeAll(), func(e *ownEntry) {
		if err := k.purge(ctx, kvs[e.b], e.b, e.key); err != nil {
			k.log.Warn("could not delete own entry at shutdown; it expires after EntryTTL",
				"bucket", e.b, "key", e.key, "err", err)
		}
	})
}
