package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natsconn"
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
}

// Map returns the cluster map (NATS); an empty one over HTTP. It never
// blocks.
func (c *Client) Map() Map {
	m := c.cmap.Load()
	return Map{Loaded: m.loaded, Nodes: m.nodes, Partitions: m.partitions, Versions: m.versions}
}

// clusterMap is one immutable state of the cluster map, with the routes
// lookups use.
type clusterMap struct {
	loaded     bool
	nodes      map[string]advert.Node
	partitions []advert.Partitions
	versions   map[string]advert.Version
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
type mapWatcher struct {
	c *Client
}

func newMapWatcher(c *Client) *mapWatcher { return &mapWatcher{c: c} }

// errReconnected ends a watch after the connection came back: the
// watchers are re-created and the buckets read again, since a watcher
// stays silent for seconds after a server restart.
var errReconnected = errors.New("client: NATS reconnected")

// run watches until ctx ends, starting over after failures and
// reconnects (every MapRetry at most).
func (w *mapWatcher) run(ctx context.Context) {
	for {
		err := w.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, errReconnected) {
			w.c.log.Debug("cluster map unavailable; retrying", "err", err)
			t := time.NewTimer(w.c.cfg.MapRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// watch binds the buckets and applies their updates until ctx ends, a
// watcher fails, or the connection reconnects. The map in use changes
// only once the buckets have been read whole.
func (w *mapWatcher) watch(ctx context.Context) error {
	c := w.c
	nc := c.cfg.Conn
	reconnects := nc.Stats().Reconnects
	js, err := natsconn.JetStream(nc, natsconn.Options{Domain: c.cfg.Domain})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var updates [len(names.Kinds)]<-chan jetstream.KeyValueEntry
	for i, b := range names.Kinds {
		bctx, bcancel := context.WithTimeout(ctx, c.cfg.Timeout)
		kv, err := js.KeyValue(bctx, names.KVBucket(c.cfg.ClusterName, b))
		bcancel()
		if err != nil {
			return fmt.Errorf("client: bucket %s: %w", b, err)
		}
		kw, err := kv.WatchAll(ctx)
		if err != nil {
			return fmt.Errorf("client: watch %s: %w", b, err)
		}
		defer kw.Stop() //nolint:errcheck // ends with ctx anyway
		updates[i] = kw.Updates()
	}
	st := newMapState()
	var initial [3]bool
	loaded := false
	tick := time.NewTicker(c.cfg.MapRetry)
	defer tick.Stop()
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		var b int
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if nc.Stats().Reconnects != reconnects {
				return errReconnected
			}
			continue
		case e, ok = <-updates[0]:
			b = 0
		case e, ok = <-updates[1]:
			b = 1
		case e, ok = <-updates[2]:
			b = 2
		}
		if !ok {
			return fmt.Errorf("client: watcher of %s closed", names.Kinds[b])
		}
		if e == nil {
			initial[b] = true
		} else {
			st.apply(c, b, e)
		}
		if !loaded && initial == [3]bool{true, true, true} {
			loaded = true
		}
		if loaded {
			w.publish(st)
		}
	}
}

// publish makes st the client's map, if it changed.
func (w *mapWatcher) publish(st *mapState) {
	if !st.dirty {
		return
	}
	st.dirty = false
	c := w.c
	m := &clusterMap{
		loaded:   true,
		nodes:    maps.Clone(st.nodes),
		versions: maps.Clone(st.versions),
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

// mapState is the watcher's working copy of the buckets.
type mapState struct {
	nodes      map[string]advert.Node
	partitions map[string]advert.Partitions
	versions   map[string]advert.Version
	dirty      bool
}

func newMapState() *mapState {
	return &mapState{
		nodes:      map[string]advert.Node{},
		partitions: map[string]advert.Partitions{},
		versions:   map[string]advert.Version{},
		dirty:      true,
	}
}

// apply applies one update of bucket b (0 nodes, 1 partitions, 2
// versions). Entries that do not decode are dropped, and logged.
func (st *mapState) apply(c *Client, b int, e jetstream.KeyValueEntry) {
	key := e.Key()
	del := e.Operation() != jetstream.KeyValuePut
	var err error
	switch b {
	case 0:
		delete(st.nodes, key)
		if !del {
			var n advert.Node
			if n, err = advert.DecodeNode(key, e.Value()); err == nil {
				st.nodes[key] = n
			}
		}
	case 1:
		delete(st.partitions, key)
		if !del {
			var p advert.Partitions
			if p, err = advert.DecodePartitions(key, e.Value()); err == nil {
				st.partitions[key] = p
			}
		}
	case 2:
		delete(st.versions, key)
		if !del {
			var v advert.Version
			if v, err = advert.DecodeVersion(key, e.Value()); err == nil {
				st.versions[key] = v
			}
		}
	}
	if err != nil {
		c.log.Warn("ignoring a cluster map entry", "key", key, "err", err)
	}
	st.dirty = true
}
