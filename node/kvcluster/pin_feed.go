package kvcluster

import (
	"log/slog"
	"maps"

	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
)

// Pinner is what a PinFeed sets; *node.Node implements it.
type Pinner interface {
	SetPins(map[string]node.Pin) error
}

// PinFeed follows the pins of the versions bucket (advert.Pin entries,
// written by `spangle activate` and `spangle rollback`) and hands the
// whole set to a node at each change, so that every node of a cluster
// holds the same pins. It acts only on current snapshots, after the KV's
// first full load: an empty view of a bucket not yet read must not clear
// the pins a node kept. Undecodable entries are skipped and logged.
//
// In a region (kvwatch.KV.Region) the bucket is the region's mirror of the
// hub's, and a db's region pin for this region (advert.RegionPinKey)
// comes before its pin for all; other regions' pins are ignored.
type PinFeed struct {
	follower
	to  Pinner
	log *slog.Logger

	warned map[string]uint64 // the run goroutine's: bad entries logged, by key → revision
}

// NewPinFeed returns a feed from kv's versions bucket to to; it starts
// nothing. A nil log discards.
func NewPinFeed(kv *kvwatch.KV, to Pinner, log *slog.Logger) *PinFeed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PinFeed{follower: newFollower(kv), to: to, log: log.With("component", "pin_feed"), warned: map[string]uint64{}}
}

// Start subscribes to the KV's snapshots; it may be called before the KV
// has started. It is idempotent.
func (f *PinFeed) Start() { f.start(f.run) }

// Stop cancels the subscription and waits for the goroutine. It is
// idempotent; without Start it does nothing.
func (f *PinFeed) Stop() { f.stop() }

func (f *PinFeed) run(ch <-chan *kvwatch.Snapshot) {
	// Snapshots before the first full load are not the cluster's pins.
	for ready := f.kv.Ready(); ready != nil; {
		select {
		case <-ready:
			ready = nil
		case _, ok := <-ch:
			if !ok {
				return
			}
		}
	}
	var last map[string]node.Pin
	f.apply(f.kv.Snapshot(), &last)
	for s := range ch {
		f.apply(s, &last)
	}
}

// apply hands the pins of s to the node when they differ from last.
func (f *PinFeed) apply(s *kvwatch.Snapshot, last *map[string]node.Pin) {
	if s.Stale() {
		return
	}
	pins := map[string]node.Pin{}
	regional := map[string]bool{} // dbs pinned by a region pin of ours
	here := f.kv.Region().Name
	s.Range(kvwatch.Versions, "", func(key string, e kvwatch.Entry) bool {
		_, region, ok := advert.ParsePinKey(key)
		if !ok || region != "" && region != here {
			return true
		}
		p, err := advert.DecodePin(key, e.Value)
		if err != nil {
			if f.warned[key] != e.Revision { // once per write, not per snapshot
				f.warned[key] = e.Revision
				f.log.Warn("ignoring a pin entry", "key", key, "err", err)
			}
			return true
		}
		if region == "" && regional[p.DB] {
			return true // the region's pin wins
		}
		regional[p.DB] = region != ""
		pins[p.DB] = node.Pin{Version: p.Version, Before: p.Before, Force: p.Force}
		return true
	})
	if *last != nil && maps.Equal(*last, pins) {
		return
	}
	*last = pins
	if err := f.to.SetPins(pins); err != nil {
		f.log.Error("cannot keep the cluster's pins", "err", err)
	}
}
