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

// refreshParallelism bounds the concurrent background writes of own
// entries: a heartbeat round's, a repair's and the deletes of Shutdown.
const refreshParallelism = 8

// ownEntry is a TTL'd entry this KV publishes and keeps alive. Its fields
// are the own loop's (own_loop.go): only its goroutine reads or writes
// them; a write's worker is given a copy (ownWrite).
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
// blocks for at most a few OpTimeouts, after any write of the same key
// asked for before, or until ctx ends (which cuts the write short; the
// entry stays registered). The caller keeps ownership of value.
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
	return k.own.publish(ctx, b, key, value)
}

// Withdraw deletes the own entry key of bucket b and stops refreshing it.
// Withdrawing a key this KV does not publish does nothing and returns nil.
// When the delete fails the entry still disappears, EntryTTL after its
// last refresh. Like Publish it runs after the writes of key asked for
// before, and waits for them until ctx ends.
func (k *KV) Withdraw(ctx context.Context, b Bucket, key string) error {
	if !b.valid() || !b.TTL() {
		return fmt.Errorf("%w: Withdraw takes Nodes or Partitions, not %s", ErrWrongBucket, b)
	}
	if _, _, err := k.handles(); err != nil {
		return err
	}
	return k.own.withdraw(ctx, b, key)
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

// ownWrite is a write of an own entry as a worker of the own loop does
// it: a copy of the entry's key, value and last revision.
type ownWrite struct {
	b     Bucket
	key   string
	value []byte // shared with the entry, never modified
	rev   uint64
}

// writeOwn writes w's value with its TTL on ln: a CAS refresh when the
// last revision is known, else (or when the CAS fails) a claim. It
// returns the entry's revision afterwards as far as this KV knows: the
// new one; after a failure the old one, or 0 when the CAS found the key
// expired or someone else's.
func (k *KV) writeOwn(ctx context.Context, ln *link, w ownWrite) (uint64, error) {
	had := w.rev != 0
	if had {
		rev, err := k.casPublish(ctx, ln, w.b, w.key, w.value, w.rev)
		if err == nil {
			k.writes.note(w.b, rev)
			return rev, nil
		}
		if !isWrongLastSeq(err) {
			return w.rev, fmt.Errorf("kvwatch: refresh %s %s: %w", w.b, w.key, err)
		}
		// Expired, deleted, or written by someone else since our last
		// write: claim it again.
	}
	rev, err := k.claim(ctx, ln, w, had)
	if err != nil {
		return 0, fmt.Errorf("kvwatch: publish %s %s: %w", w.b, w.key, err)
	}
	k.writes.note(w.b, rev)
	return rev, nil
}

// claim creates e's key with its TTL, or, when the key exists, writes over
// the current value with a CAS on its revision. had says whether this KV
// had the key before (a changed value is then a conflict worth a warning;
// otherwise it is most likely what a previous run of this node left).
func (k *KV) claim(ctx context.Context, ln *link, e ownWrite, had bool) (uint64, error) {
	kv := ln.kvs[e.b]
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
		rev, err = k.casPublish(ctx, ln, e.b, e.key, e.value, cur.Revision())
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
func (k *KV) casPublish(ctx context.Context, ln *link, b Bucket, key string, value []byte, rev uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
	defer cancel()
	msg := &nats.Msg{Subject: names.KVSubject(bucketName(k.cfg.ClusterName, b), key), Data: value}
	ack, err := ln.js.PublishMsg(ctx, msg,
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

// heartbeat is the clock of the own entries: each Heartbeat it has the
// own loop refresh those that are due, and all of them at once when
// kicked (after a reconnect), until ctx ends; each Heartbeat, first, it
// repairs the buckets that lost own entries (checkBuckets). It skips
// rounds while disconnected: those writes could only fail. It waits for
// each round, so rounds never overlap.
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
				k.own.refresh(ctx, false)
			}
		case <-k.events.refresh:
			if ln.nc.IsConnected() {
				k.own.refresh(ctx, true)
			}
		}
	}
}
