package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/spangledb/spangle/kvwatch/names"

	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/plugins/partition"
)

// Map is the cluster map as a NATS client last read it from the KV
// buckets. Its maps and slices are shared: callers must not modify them.
type Map struct {
	// Loaded is false until the buckets have been read whole once.
	Loaded bool
	// Nodes holds the live nodes, by node ID.
	Nodes map[string]advert.Node
	// Partitions holds every node's entry per version, ordered by db,
	// version and node ID.
	Partitions []advert.Partitions
	// Versions holds each db's live version, by db.
	Versions map[string]advert.Version
	// Pins holds the pins of the versions bucket (spangle activate and
	// rollback), by key (advert.PinKey, advert.RegionPinKey): every pin
	// written, whether a node serves its db or not.
	Pins map[string]advert.Pin
}

// Map returns the cluster map (NATS); an empty one over HTTP. It never
// blocks.
func (c *Client) Map() Map {
	m := c.cmap.Load()
	return Map{Loaded: m.loaded, Nodes: m.nodes, Partitions: m.partitions, Versions: m.versions, Pins: m.pins}
}

// clusterMap is one immutable state of the cluster map, with the routes
// lookups use.
type clusterMap struct {
	loaded     bool
	nodes      map[string]advert.Node
	partitions []advert.Partitions
	versions   map[string]advert.Version
	pins       map[string]advert.Pin
	routes     map[string]*route // by db
}

// route is how to reach a db's partitions: its version, N, partitioner and
// part subjects. A nil partitioner means lookups take the get subject.
type route struct {
	version  string
	n        int
	p        partition.Partitioner
	subjects []string // by partition
}

// partSubject returns the part subject of key in db, or "" when the map
// cannot say (unknown db, an empty version, a partitioner this client
// lacks, a failing one).
func (m *clusterMap) partSubject(c *Client, db string, key []byte) string {
	r := m.routes[db]
	if r == nil || r.p == nil || r.n <= 0 {
		return ""
	}
	p, _, err := r.p.Partition(key, r.n)
	if err != nil || p < 0 || p >= r.n {
		return ""
	}
	return r.subjects[p]
}

// mapWatcher reads the nodes, partitions and versions buckets, read-only,
// into immutable clusterMaps. One goroutine (run) owns it.
//
// It polls: every MapRetry it reads the last entry of every key of the
// three buckets (readBucket: batched direct gets, no consumer), and the
// map in use changes when they differ from the last read. Polling rather
// than watching lets a client's NATS account go without JetStream
// (docs/SECURITY.md); a missing bucket, a server restart or an expired
// entry need no special case, since every read is whole.
type mapWatcher struct {
	c    *Client
	last *mapState
}

func newMapWatcher(c *Client) *mapWatcher { return &mapWatcher{c: c} }

// run reads the buckets every MapRetry until ctx ends.
func (w *mapWatcher) run(ctx context.Context) {
	t := time.NewTicker(w.c.cfg.MapRetry)
	defer t.Stop()
	for {
		if err := w.read(ctx); err != nil && ctx.Err() == nil {
			w.c.log.Debug("cluster map unavailable; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read reads the three buckets whole and publishes them when they
// changed. The map in use changes only once all three have been read.
func (w *mapWatcher) read(ctx context.Context) error {
	c := w.c
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	api := names.APIPrefix(c.cfg.Domain)
	st := newMapState()
	for i, kind := range names.Kinds {
		bucket := names.KVBucket(c.cfg.ClusterName, kind)
		entries, err := readBucket(ctx, c.cfg.Conn, api, names.KVStream(bucket), names.KVSubject(bucket, ""))
		if err != nil {
			return fmt.Errorf("client: bucket %s: %w", kind, err)
		}
		for _, e := range entries {
			if err := st.apply(i, e); err != nil && (w.last == nil || w.last.raw[i][e.key] != string(e.value)) {
				c.log.Warn("ignoring a cluster map entry", "key", e.key, "err", err)
			}
		}
	}
	if w.last != nil && w.last.equal(st) {
		return nil
	}
	w.last = st
	w.publish(st)
	return nil
}

// publish makes st the client's map, if it changed.
func (w *mapWatcher) publish(st *mapState) {
	c := w.c
	m := &clusterMap{
		loaded:   true,
		nodes:    maps.Clone(st.nodes),
		versions: maps.Clone(st.versions),
		pins:     maps.Clone(st.pins),
		routes:   map[string]*route{},
	}
	keys := slices.Sorted(maps.Keys(st.partitions))
	m.partitions = make([]advert.Partitions, 0, len(keys))
	for _, k := range keys {
		// An entry of a node without a node entry (a dead node's, or a
		// forged one), or of an earlier run of a node, is skipped.
		if p := st.partitions[k]; m.nodes[p.NodeID].ID != "" && advert.SameRun(m.nodes[p.NodeID], p) {
			m.partitions = append(m.partitions, p)
		}
	}
	// A db's route: its versions entry, else the newest active version
	// advertised in the partitions bucket. An entry without partitions is
	// an announcement (spangle publish) no node has activated yet.
	for db, v := range m.versions {
		if v.NumPartitions > 0 {
			m.routes[db] = c.newRoute(db, v.Version, v.NumPartitions, v.Partitioner)
		}
	}
	for _, p := range m.partitions {
		if v, ok := m.versions[p.DB]; (ok && v.NumPartitions > 0) || !p.Active {
			continue
		}
		if r := m.routes[p.DB]; r == nil || r.version < p.Version {
			m.routes[p.DB] = c.newRoute(p.DB, p.Version, p.NumPartitions, p.Partitioner)
		}
	}
	c.cmap.Store(m)
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
}

func (c *Client) newRoute(db, version string, n int, partitioner string) *route {
	r := &route{version: version, n: n, p: c.partitioner(partitioner)}
	if n > 0 {
		prefix := names.PartPrefix(c.cfg.ClusterName, db, version)
		r.subjects = make([]string, n)
		for i := range r.subjects {
			r.subjects[i] = prefix + strconv.Itoa(i)
		}
	}
	return r
}

// mapState is one read of the buckets.
type mapState struct {
	nodes      map[string]advert.Node
	partitions map[string]advert.Partitions
	versions   map[string]advert.Version
	pins       map[string]advert.Pin
	raw        [len(names.Kinds)]map[string]string // the values read, to tell a change
}

func newMapState() *mapState {
	st := &mapState{
		nodes:      map[string]advert.Node{},
		partitions: map[string]advert.Partitions{},
		versions:   map[string]advert.Version{},
		pins:       map[string]advert.Pin{},
	}
	for i := range st.raw {
		st.raw[i] = map[string]string{}
	}
	return st
}

// equal reports whether st and o read the same values.
func (st *mapState) equal(o *mapState) bool {
	for i := range st.raw {
		if !maps.Equal(st.raw[i], o.raw[i]) {
			return false
		}
	}
	return true
}

// apply applies the last entry of one key of bucket b (0 nodes, 1
// partitions, 2 versions). An entry that does not decode is dropped
// (the error says why).
func (st *mapState) apply(b int, e kvEntry) error {
	if e.del {
		return nil
	}
	key := e.key
	st.raw[b][key] = string(e.value)
	var err error
	switch b {
	case 0:
		var n advert.Node
		if n, err = advert.DecodeNode(key, e.value); err == nil {
			st.nodes[key] = n
		}
	case 1:
		var p advert.Partitions
		if p, err = advert.DecodePartitions(key, e.value); err == nil {
			st.partitions[key] = p
		}
	case 2:
		if _, _, ok := advert.ParsePinKey(key); ok {
			var p advert.Pin
			if p, err = advert.DecodePin(key, e.value); err == nil && len(st.pins) < advert.MaxPins {
				st.pins[key] = p
			}
			break
		}
		var v advert.Version
		if v, err = advert.DecodeVersion(key, e.value); err == nil {
			st.versions[key] = v
		}
	}
	return err
}
