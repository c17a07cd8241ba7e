package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/assign"
	"github.com/spangledb/spangle/node/proxy"
)

// Cluster is cluster mode for one node: it implements node.Cluster over a
// View. Create it with New, pass it as node.Config.Cluster; the node calls
// Join at Start and Shutdown at its own.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	proxy *proxy.Proxy
	parts partClient // peer copies of partition files (partfiles.go)
	slots *healSlots
	// routes remembers each version's last seen holders (get.go).
	routes sync.Map // "db.version" → *route

	n      node.Member // set by Join
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // Join's goroutines
	// healDone is closed when the heal loop returns, or by Join when
	// healing is off.
	healDone chan struct{}
	// jobDone wakes the heal loop when a load ends; buffered 1, signals
	// merge.
	jobDone chan struct{}

	joinOnce, shutdownOnce sync.Once
	shutdownDone           chan struct{} // closed once Shutdown has released everything
	shutdownErr            error         // read after shutdownDone
}

var _ node.Cluster = (*Cluster)(nil)

// New validates cfg and returns the cluster side of a node; it starts
// nothing.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pc := proxy.DefaultConfig()
	pc.Timeout = cfg.ProxyTimeout
	pc.StageTimeout = cfg.stageTimeout()
	pc.ListTimeout = cfg.ProxyListTimeout
	pc.MaxBatchKeys = cfg.ProxyBatchKeys
	pc.MaxConnsPerPeer = cfg.ProxyConnsPerPeer
	pc.PeerToken = cfg.PeerToken
	pc.TLS = cfg.PeerTLS
	pc.Logger = log.With("component", "proxy")
	pc.Registerer = cfg.Registerer
	p, err := proxy.New(pc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", node.ErrConfig, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cluster{cfg: cfg, log: log, proxy: p, slots: newHealSlots(cfg.HealMaxParallel), ctx: ctx, cancel: cancel,
		healDone: make(chan struct{}), jobDone: make(chan struct{}, 1), shutdownDone: make(chan struct{})}, nil
}

// Join starts, for n, the heal loop (unless DisableHeal) and the loop
// that keeps the routes of its versions current at every view change.
func (c *Cluster) Join(n node.Member) {
	c.joinOnce.Do(func() {
		c.n = n
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.routesLoop()
		}()
		if c.cfg.DisableHeal {
			close(c.healDone)
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer close(c.healDone)
			c.healLoop()
		}()
	})
}

// Shutdown stops what Join started, waiting for a heal load to end, and
// the proxy. If ctx ends first it returns ctx's error, and the release
// completes in the background once the cancelled goroutines return.
func (c *Cluster) Shutdown(ctx context.Context) error {
	c.shutdownOnce.Do(func() {
		c.cancel()
		go func() { // owned: closes shutdownDone
			defer close(c.shutdownDone)
			c.wg.Wait()
			c.shutdownErr = c.proxy.Shutdown(context.Background()) // its requests have their own timeouts
			c.parts.close()
		}()
	})
	select {
	case <-c.shutdownDone:
		return c.shutdownErr
	case <-ctx.Done():
		return fmt.Errorf("cluster: shutdown: %w (the release completes in the background)", ctx.Err())
	}
}

// snapshot returns the View's current snapshot.
func (c *Cluster) snapshot() *Snapshot {
	s, _ := c.cfg.View.Cluster()
	if s == nil {
		return emptySnapshot
	}
	return s
}

// Changed returns a channel closed at the View's next change.
func (c *Cluster) Changed() <-chan struct{} {
	_, changed := c.cfg.View.Cluster()
	return changed
}

// Retention is VersionRemoveTimeout.
func (c *Cluster) Retention() time.Duration { return c.cfg.VersionRemoveTimeout }

// Replication is the configured replica count.
func (c *Cluster) Replication() int { return c.cfg.Replication }

// Converge blocks until the View is current, holds this node's entry, and
// its live membership has not changed for TimeToConverge. It returns false
// if ctx ends first.
func (c *Cluster) Converge(ctx context.Context) bool {
	ttc := c.cfg.TimeToConverge
	self := c.n.ID()
	t := time.NewTimer(ttc)
	defer t.Stop()
	last, good := "", false
	for {
		s, changed := c.cfg.View.Cluster()
		if s == nil {
			s = emptySnapshot
		}
		ok := !s.Stale() && s.hasNode(self)
		if m := s.membership(); m != last || ok != good {
			last, good = m, ok
			t.Reset(ttc)
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		case <-t.C:
			if good {
				c.log.Info("cluster membership converged", "nodes", len(s.Live()), "time_to_converge", ttc)
				return true
			}
			t.Reset(ttc)
		}
	}
}

// routesLoop updates the routes of every version the node holds at each
// view change, so that a holder leaving the view is remembered from then
// on, even for a version nobody asked for meanwhile.
func (c *Cluster) routesLoop() {
	for {
		changed := c.Changed()
		select {
		case <-c.ctx.Done():
			return
		case <-changed:
		}
		held, _ := c.n.Held()
		for _, h := range held {
			c.routeFor(h.DB, h.Version)
		}
	}
}

// Assign returns the partitions of v this node should build: the
// assignment over the live nodes' shard IDs plus its own, less those over
// MaxReplication elsewhere. It refuses v when another node already
// advertises it built with a different partitioner: the two would place
// keys differently, and lookups routed by one would miss on the other.
func (c *Cluster) Assign(v node.VersionInfo) ([]int, error) {
	s := c.snapshot()
	self := c.n.ID()
	for _, h := range s.Holders(v.DB, v.Version) {
		if h.NodeID != self && h.Partitioner != "" && h.Partitioner != v.Partitioner {
			return nil, fmt.Errorf("%w: %s/%s: this node's partitioner is %s, but node %s built it with %s",
				node.ErrPartitionerMismatch, v.DB, v.Version, v.Partitioner, h.NodeID, h.Partitioner)
		}
	}
	var ids []string
	for _, nd := range s.Live() {
		if nd.ShardID != "" {
			ids = append(ids, nd.ShardID)
		}
	}
	fn, _ := assign.ByName(c.cfg.Assignment) // checked by Validate
	ps := fn(ids, c.n.ShardID(), v.NumPartitions, c.cfg.Replication)
	remote := c.remoteReplicas(s, v)
	ps = assign.MaxReplicationFilter(ps, func(p int) int { return remote[p] }, c.cfg.Replication, c.cfg.MaxReplication)
	if ps == nil {
		ps = []int{}
	}
	return ps, nil
}

// MayActivate reports whether every partition of v has MinReplication
// replicas: this node's (v.Partitions) and the other nodes'; and, unless
// v.Forced, whether no other holder refuses it (its guards), so that the
// nodes agree: a version one holder refuses goes active nowhere.
func (c *Cluster) MayActivate(v node.VersionInfo) bool {
	s := c.snapshot()
	if !v.Forced {
		for _, h := range s.Holders(v.DB, v.Version) {
			if h.NodeID != c.n.ID() && h.Refused != "" {
				c.log.Debug("version not switched to: a holder refuses it", "db", v.DB, "version", v.Version,
					"node", h.NodeID, "refused", h.Refused)
				return false
			}
		}
	}
	counts := c.remoteReplicas(s, v)
	for _, q := range v.Partitions {
		if q >= 0 && q < len(counts) {
			counts[q]++
		}
	}
	if i := slices.IndexFunc(counts, func(n int) bool { return n < c.cfg.MinReplication }); i >= 0 {
		c.log.Debug("version not switched to yet: under-replicated", "db", v.DB, "version", v.Version,
			"partition", i, "replicas", counts[i], "min_replication", c.cfg.MinReplication)
		return false
	}
	return true
}

// VersionRecords is the records of v: for each partition, this node's
// count (v.Records) or another holder's, from its partitions entry;
// false when a partition's are unknown (no holder, or one of an older
// release that does not publish them).
func (c *Cluster) VersionRecords(v node.VersionInfo) (int64, bool) {
	known := make([]int64, v.NumPartitions)
	for i := range known {
		known[i] = -1
	}
	for i, p := range v.Partitions {
		if i < len(v.Records) && p >= 0 && p < len(known) {
			known[p] = v.Records[i]
		}
	}
	self := c.n.ID()
	for _, h := range c.snapshot().Holders(v.DB, v.Version) {
		if h.NodeID == self || h.NumPartitions != v.NumPartitions || h.Partitioner != v.Partitioner || len(h.Records) != len(h.Partitions) {
			continue
		}
		for i, p := range h.Partitions {
			if p >= 0 && p < len(known) && known[p] < 0 {
				known[p] = h.Records[i]
			}
		}
	}
	var total int64
	for _, r := range known {
		if r < 0 {
			return 0, false
		}
		total += r
	}
	return total, true
}

// remoteReplicas counts, per partition of v, the other nodes that
// advertise it with v's partitioner.
func (c *Cluster) remoteReplicas(s *Snapshot, v node.VersionInfo) []int {
	counts := make([]int, v.NumPartitions)
	c.remoteHoldings(s, v, func(_ string, p int) { counts[p]++ })
	return counts
}

// remoteHoldings calls fn for each partition p (0 ≤ p < v.NumPartitions)
// of v that another node's partitions entry lists, for entries of as many
// partitions, built with v's partitioner.
func (c *Cluster) remoteHoldings(s *Snapshot, v node.VersionInfo, fn func(node string, p int)) {
	self := c.n.ID()
	for _, h := range s.Holders(v.DB, v.Version) {
		if h.NodeID == self || h.NumPartitions != v.NumPartitions || h.Partitioner != v.Partitioner {
			continue
		}
		for _, p := range h.Partitions {
			if p >= 0 && p < v.NumPartitions {
				fn(h.NodeID, p)
			}
		}
	}
}
