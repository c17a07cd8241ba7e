package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/spangledb/spangle/internal/backoff"
	"github.com/spangledb/spangle/node/advert"
)

// AdvertKind names the KV bucket an advertised entry goes to.
type AdvertKind uint8

const (
	// AdvertNode is the nodes bucket: key advert.NodeKey(id), an
	// advert.Node kept alive (TTL'd) until withdrawn.
	AdvertNode AdvertKind = iota
	// AdvertPartitions is the partitions bucket: key
	// advert.PartitionsKey(db, version, id), an advert.Partitions kept
	// alive until withdrawn.
	AdvertPartitions
	// AdvertVersion is the versions bucket: key advert.VersionKey(db), an
	// advert.Version written once per activation, permanent. The node never
	// withdraws it.
	AdvertVersion
)

// String returns "node", "partitions" or "version".
func (k AdvertKind) String() string {
	switch k {
	case AdvertNode:
		return "node"
	case AdvertPartitions:
		return "partitions"
	case AdvertVersion:
		return "version"
	}
	return "AdvertKind(?)"
}

// Advertiser stores a node's entries in the cluster's KV buckets. The node
// declares it so that it needs nothing of NATS; kvcluster.Advertiser
// implements it over a kvwatch.KV. Implementations must be safe for
// concurrent use.
type Advertiser interface {
	// Publish makes key of kind hold value. For AdvertNode and
	// AdvertPartitions the entry belongs to this node and stays alive
	// until Withdraw (the implementation refreshes it); for AdvertVersion
	// it is a permanent write. The caller keeps ownership of value. It
	// blocks for at most a bounded time, or until ctx ends.
	Publish(ctx context.Context, kind AdvertKind, key string, value []byte) error
	// Withdraw deletes an entry written by Publish. Withdrawing a key that
	// is not there succeeds.
	Withdraw(ctx context.Context, kind AdvertKind, key string) error
}

// advertKey is one entry an advertiser writes.
type advertKey struct {
	kind AdvertKind
	key  string
}

// advertiser keeps the node's entries in step with its state: one goroutine
// (run) computes the entries the node should have from Held and the node's
// state, writes those that changed, withdraws those that went away, and
// retries failed writes. The read path never waits for it.
type advertiser struct {
	n       *Node
	adv     Advertiser
	log     *slog.Logger
	started time.Time

	// published is what the buckets hold as far as the loop knows. Owned
	// by run; read by withdrawAll only after run has returned.
	published map[advertKey]string

	drainAck chan struct{} // closed by run once it has tried to publish DRAINING
	done     chan struct{} // closed when run returns
}

func newAdvertiser(n *Node) *advertiser {
	return &advertiser{
		n:         n,
		adv:       n.cfg.Advertiser,
		log:       n.log.With("component", "advertiser"),
		started:   time.Now(),
		published: map[advertKey]string{},
		drainAck:  make(chan struct{}),
		done:      make(chan struct{}),
	}
}

// run keeps the entries in step until ctx ends. After a failed write it
// tries again after a pause that doubles from 50ms up to
// Config.AdvertiseRetry, with jitter (internal/backoff).
func (a *advertiser) run(ctx context.Context) {
	defer close(a.done)
	loaded, drain := a.n.readyCh, a.n.drainCh
	acked := false
	failures := 0
	pause := backoff.New(min(50*time.Millisecond, a.n.cfg.AdvertiseRetry), a.n.cfg.AdvertiseRetry)
	for {
		held, changed := a.n.Held()
		state := advert.StateStarting
		if loaded == nil {
			state = advert.StateServing
		}
		if drain == nil {
			state = advert.StateDraining
		}
		if a.reconcile(ctx, a.desired(held, state)) {
			if failures >= 5 {
				a.log.Info("this node's entries are written again", "failures", failures)
			}
			failures = 0
			pause.Reset()
		} else {
			failures++
			if failures == 5 {
				a.log.Warn("cannot write this node's entries; still trying", "failures", failures)
			}
		}
		if state == advert.StateDraining && !acked {
			acked = true
			close(a.drainAck)
		}
		var retry <-chan time.Time
		var timer *time.Timer
		if failures > 0 {
			timer = time.NewTimer(pause.Next())
			retry = timer.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-a.n.entryChanged:
		case <-loaded:
			loaded = nil
		case <-drain:
			drain = nil
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// desired returns the entries the node should have: its node entry, a
// partitions entry per held version, and a versions entry per active one.
func (a *advertiser) desired(held []HeldVersion, state string) map[advertKey]string {
	n := a.n
	want := make(map[advertKey]string, 1+2*len(held))
	put := func(kind AdvertKind, key string, entry any) {
		b, err := advert.Encode(entry)
		if err != nil { // cannot happen with these types
			a.log.Error("encode entry", "kind", kind, "key", key, "err", err)
			return
		}
		want[advertKey{kind, key}] = string(b)
	}
	put(AdvertNode, advert.NodeKey(n.id), advert.Node{
		ID:            n.id,
		Name:          n.advertName(),
		ShardID:       n.shardID(),
		Address:       n.cfg.AdvertiseAddress,
		State:         state,
		Started:       a.started.UTC(),
		BinaryVersion: n.cfg.BinaryVersion,
		Pins:          n.pinStates(),
		BuildFailed:   n.buildFailures(),
	})
	for _, h := range held {
		put(AdvertPartitions, advert.PartitionsKey(h.DB, h.Version, n.id), advert.Partitions{
			DB:            h.DB,
			Version:       h.Version,
			NodeID:        n.id,
			ShardID:       n.shardID(),
			NodeStarted:   a.started.UTC(),
			Partitions:    h.Partitions,
			NumPartitions: h.NumPartitions,
			Partitioner:   h.Partitioner,
			Address:       n.cfg.AdvertiseAddress,
			Subjects:      n.cfg.AdvertiseSubjects,
			Active:        h.Active,
			Refused:       h.Refused,
			Records:       h.Records,
		})
		if h.Active {
			put(AdvertVersion, advert.VersionKey(h.DB), advert.Version{
				DB:            h.DB,
				Version:       h.Version,
				NumPartitions: h.NumPartitions,
				Partitioner:   h.Partitioner,
				NodeID:        n.id,
				ActiveAt:      h.ActiveAt.UTC(),
			})
		}
	}
	return want
}

// reconcile writes the entries of want that differ from what was
// published and withdraws the published ones not in want (versions
// entries are only forgotten: other nodes may still serve the db). It
// reports whether every write succeeded.
func (a *advertiser) reconcile(ctx context.Context, want map[advertKey]string) bool {
	ok := true
	for k, v := range want {
		if old, had := a.published[k]; had && old == v {
			continue
		}
		if err := a.adv.Publish(ctx, k.kind, k.key, []byte(v)); err != nil {
			if ctx.Err() == nil {
				a.log.Debug("publish failed", "kind", k.kind, "key", k.key, "err", err)
			}
			ok = false
			continue
		}
		a.published[k] = v
	}
	for k := range a.published {
		if _, keep := want[k]; keep {
			continue
		}
		if k.kind == AdvertVersion {
			delete(a.published, k)
			continue
		}
		if err := a.adv.Withdraw(ctx, k.kind, k.key); err != nil {
			if ctx.Err() == nil {
				a.log.Debug("withdraw failed", "kind", k.kind, "key", k.key, "err", err)
			}
			ok = false
			continue
		}
		delete(a.published, k)
	}
	return ok
}

// withdrawAll deletes every entry of this node, partitions entries first,
// for Shutdown; run must have returned. Failures are logged: the entries
// expire anyway.
func (a *advertiser) withdrawAll(ctx context.Context) error {
	var errs []error
	for _, kind := range []AdvertKind{AdvertPartitions, AdvertNode} {
		for k := range a.published {
			if k.kind != kind {
				continue
			}
			if err := a.adv.Withdraw(ctx, k.kind, k.key); err != nil {
				a.log.Warn("cannot withdraw entry; it will expire", "kind", k.kind, "key", k.key, "err", err)
				errs = append(errs, err)
				continue
			}
			delete(a.published, k)
		}
	}
	return errors.Join(errs...)
}

// nodeEntryChanged has the advertiser write the node entry again: what
// it carries besides the node's state changed (pinStates,
// buildFailures). It never blocks.
func (n *Node) nodeEntryChanged() {
	select {
	case n.entryChanged <- struct{}{}:
	default: // the advertiser has yet to take the last one
	}
}

// shardID is the shard ID published: Config.ShardID, else the node ID.
func (n *Node) shardID() string {
	if n.cfg.ShardID != "" {
		return n.cfg.ShardID
	}
	return n.id
}

// advertName is the node's name in its node entry: its status name, but
// for an unclustered node left with the default name ("localhost", as
// every such node is) its address, so that the nodes of one NATS server
// (spangle status --nats, --regions) have names of their own.
func (n *Node) advertName() string {
	if name := n.Name(); name != DefaultConfig().Name {
		return name
	}
	return StatusName(n.cfg.AdvertiseAddress, n.id)
}
