package kvwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Self-repair. A bucket deleted, purged or re-created under a running KV
// (an operator's mistake, a leaked login, a server that lost its store)
// loses this KV's entries, and a purge sends watchers nothing: without
// repair the node would be missing from the cluster map until its next
// refresh (a third of PartitionsTTL for partitions entries) and its
// version entries never come back. The heartbeat therefore looks at every
// bucket once per Heartbeat, before refreshing (one STREAM.INFO each; at
// its start too, to learn the streams' creation times), and when one it
// holds entries in is gone, was created again, or no longer holds the
// revision of one of this KV's writes, it writes every entry of this KV
// in that bucket again at once and has the watch loop reload the bucket
// whole (the snapshot would otherwise keep purged keys of others for
// good). Versions entries (Put) come back only where the key is absent,
// and only while the watcher has seen no other write of the key since
// (putLog.saw): a newer version written by another node or a
// publisher stays, and is not replaced by ours after a purge; the KV
// forgets its own (another node's activation replaces the entry all
// the time: that is not a loss, and is neither logged nor counted).

// bucketSeen is what the heartbeat last saw of a bucket's stream.
type bucketSeen struct {
	created time.Time
	// gone is set when the stream was found missing and not created
	// again yet: a bucket is created again only when found missing at two
	// checks in a row, a Heartbeat apart. A single nats-server (2.15.2)
	// forgets a deleted stream before it moves the stream's files away: a
	// stream created in that moment recovers the old files while they go
	// (the server logs "TTL state is outdated" and "message block data
	// missing", then panicked or kept a broken stream, and JetStream
	// stopped answering). A Heartbeat later the files are gone.
	gone bool
}

// ownRevisions returns the revisions of this KV's writes in bucket b that
// are still meant to be there (0 for an entry not written yet).
func (k *KV) ownRevisions(ctx context.Context, b Bucket) []uint64 {
	if b == Versions {
		return k.puts.revisions()
	}
	return k.own.revisions(ctx, b)
}

// checkBuckets looks at each bucket and repairs those that lost this KV's
// entries. seen is the heartbeat's memory of the streams, indexed by
// Bucket.
func (k *KV) checkBuckets(ctx context.Context, seen *[numBuckets]bucketSeen) {
	js, kvs, err := k.handles()
	if err != nil {
		return
	}
	for _, w := range k.buckets {
		// Buckets without own entries are looked at too: a re-creation
		// shows by the stream's creation time, which must be known
		// before it happens.
		revs := k.ownRevisions(ctx, w.b)
		reason, err := k.bucketReset(ctx, js, kvs[w.b], w, revs, &seen[w.b])
		if err != nil {
			if ctx.Err() == nil {
				k.log.Debug("bucket check failed", "bucket", w.b.String(), "err", err)
			}
			continue
		}
		if reason != "" && len(revs) > 0 {
			k.repairBucket(ctx, w.b, reason)
		}
	}
}

// bucketReset returns why bucket w lost this KV's writes ("deleted",
// "recreated", "purged"), or "" when it did not. A deleted bucket is
// created again here (the watch loop waits for it), a check after it was
// found missing (see bucketSeen).
func (k *KV) bucketReset(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, w watched, revs []uint64, seen *bucketSeen) (string, error) {
	octx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
	st, err := kv.Status(octx)
	cancel()
	if bucketMissing(err) {
		if !seen.gone {
			seen.gone = true // created again at the next check (see bucketSeen)
			return "", err
		}
		if _, err := k.ensureBucket(ctx, js, w, k.cfg.OpTimeout); err != nil {
			return "", fmt.Errorf("re-create: %w", err)
		}
		seen.created, seen.gone = time.Time{}, false
		k.log.Warn("bucket missing; created it again", "bucket", w.b.String())
		return "deleted", nil
	}
	seen.gone = false
	if err != nil {
		return "", err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return "", nil
	}
	si := bs.StreamInfo()
	prev := seen.created
	seen.created = si.Created
	if !prev.IsZero() && !si.Created.Equal(prev) {
		return "recreated", nil
	}
	for _, rev := range revs {
		if rev != 0 && (rev < si.State.FirstSeq || rev > si.State.LastSeq) {
			return "purged", nil
		}
	}
	return "", nil
}

// bucketMissing reports whether err says that a bucket's stream is
// missing.
func bucketMissing(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound)
}

// repairBucket writes every entry of this KV in bucket b again, logs it,
// counts it, and has the watch loop reload b whole.
func (k *KV) repairBucket(ctx context.Context, b Bucket, reason string) {
	var n, failed int
	if b == Versions {
		n, failed = k.repairPuts(ctx)
	} else {
		n, failed = k.own.rewrite(ctx, b)
	}
	if reason == "purged" && n == 0 && failed == 0 {
		// Only Versions entries other writers replaced since: nothing
		// was lost, nothing to say.
		return
	}
	k.met.bucketRepairs.WithLabelValues(b.String(), reason).Inc()
	k.log.Warn("bucket lost this node's entries; wrote them again", "bucket", b.String(), "reason", reason,
		"entries", n, "failed", failed)
	k.watch.requestReload(b)
}

// repairPuts creates again the Versions entries of this KV that are
// absent, and forgets those another writer replaced. It returns how many
// it wrote and how many writes failed.
func (k *KV) repairPuts(ctx context.Context) (n, failed int) {
	_, kvs, err := k.handles()
	if err != nil {
		return 0, 0
	}
	for key, p := range k.puts.all() {
		if !k.puts.start(key, p) {
			continue
		}
		octx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
		rev, err := kvs[Versions].Create(octx, key, p.value)
		cancel()
		k.puts.end(key, p, rev, err)
		switch {
		case err == nil:
			n++
			k.writes.note(Versions, rev)
		case !errors.Is(err, jetstream.ErrKeyExists):
			failed++
			k.log.Warn("cannot write a versions entry again", "key", key, "err", err)
		}
	}
	return n, failed
}
