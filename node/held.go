package node

import (
	"slices"
	"strings"
	"time"
)

// HeldVersion is a version this node can answer lookups from.
type HeldVersion struct {
	DB      string
	Version string
	// NumPartitions is the version's partition count (N).
	NumPartitions int
	// Partitions lists the partitions held here, increasing. The slice is
	// shared: callers must not modify it.
	Partitions []int
	// Partitioner is the identity the version was built with.
	Partitioner string
	// Active is true for the db's active version, the one unpinned
	// lookups read; false for a version kept only for lookups naming it.
	Active bool
	// ActiveAt is when the version became readable here.
	ActiveAt time.Time
	// Refused is why the db's guards refuse the version here (checks.go),
	// "" when they do not or an operator forced it: the cluster
	// activates it nowhere while a holder refuses it.
	Refused string
	// Records are the records of each partition of Partitions. Shared,
	// as Partitions.
	Records []int64
}

// heldView is one published state of the held versions. It is never
// modified; changed is closed when the next one replaces it.
type heldView struct {
	versions []HeldVersion
	changed  chan struct{}
}

func newHeldView(vs []HeldVersion) *heldView {
	return &heldView{versions: vs, changed: make(chan struct{})}
}

// Held returns the versions this node can answer lookups from, ordered by
// db then version, and a channel that is closed at the next change of that
// list. It never blocks and is safe for concurrent use; the caller must
// not modify the returned slice.
//
// This is how other parts follow the node's versions (the NATS front
// door's partition subscriptions, the advertiser): call Held, act on the
// list, wait for the channel, call Held again. A consumer that is slow
// misses intermediate states, never the latest one, and the node never
// waits for it.
func (n *Node) Held() ([]HeldVersion, <-chan struct{}) {
	v := n.held.Load()
	return v.versions, v.changed
}

// heldChanged recomputes the held versions from the dbs' active, pending
// and retired versions and publishes them if they changed. It is called
// by db.set, at every change of a db's versions (versions.go), after a
// heal load adds partitions, and after dbs come and go.
func (n *Node) heldChanged() {
	n.heldMu.Lock()
	defer n.heldMu.Unlock()
	var vs []HeldVersion
	for name, d := range *n.dbs.Load() {
		// A pending version is held (peers read it by name) before it is
		// active; retired ones are kept for peers naming them.
		cur := d.current()
		active := cur.active
		for _, v := range append([]*version{active, cur.pending}, cur.retired...) {
			if v == nil || (v != active && active != nil && active.name == v.name) {
				continue
			}
			m := v.data.Manifest()
			vs = append(vs, HeldVersion{
				DB:            name,
				Version:       v.name,
				NumPartitions: m.NumPartitions,
				Partitions:    m.Partitions,
				Partitioner:   m.Partitioner,
				Active:        v == active,
				ActiveAt:      v.modified,
				Refused:       v.state.advertRefusal(),
				Records:       partitionsRecords(m),
			})
		}
	}
	slices.SortFunc(vs, func(a, b HeldVersion) int {
		if c := strings.Compare(a.DB, b.DB); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	old := n.held.Load()
	if slices.EqualFunc(old.versions, vs, sameHeld) {
		return
	}
	n.held.Store(newHeldView(vs))
	close(old.changed)
}

func sameHeld(a, b HeldVersion) bool {
	return a.DB == b.DB && a.Version == b.Version && a.NumPartitions == b.NumPartitions &&
		a.Partitioner == b.Partitioner && a.Active == b.Active && a.ActiveAt.Equal(b.ActiveAt) &&
		slices.Equal(a.Partitions, b.Partitions) && a.Refused == b.Refused && slices.Equal(a.Records, b.Records)
}
