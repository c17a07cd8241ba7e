package cluster

import (
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/assign"
)

var _ node.BuildOnce = (*Cluster)(nil)

// VersionBuilder returns the address of the node that builds v from the
// source for the whole cluster (build once, issue 35) and whether it is
// this node; ok is false when DisableBuildOnce, or when no node can be
// the builder: every node builds its own partitions.
//
// The builder is the live node (not draining, with a shard ID, an
// address to copy from, and partitions of v assigned) of highest weight XXH64(node ID, 0, db, 0,
// version): every node computes the same from the same view, and a
// cluster's dbs are built by different nodes. A node that does not see
// itself in the view is not the builder.
func (c *Cluster) VersionBuilder(v node.VersionInfo) (builder string, self, ok bool) {
	if c.cfg.DisableBuildOnce || c.n == nil {
		return "", false, false
	}
	id, addr := c.builder(c.snapshot(), v)
	return addr, id == c.n.ID(), id != ""
}

// BuilderFailed returns why v's builder (VersionBuilder) failed to
// build it, as its node entry says, and whether it did (build once):
// its peers then build their own partitions rather than wait
// BuildOnceWait. A builder whose entry is gone (shut down, or expired:
// killed) is no longer the builder: VersionBuilder names the next.
func (c *Cluster) BuilderFailed(v node.VersionInfo) (string, bool) {
	if c.cfg.DisableBuildOnce || c.n == nil {
		return "", false
	}
	s := c.snapshot()
	id, _ := c.builder(s, v)
	nd, ok := s.node(id)
	if !ok {
		return "", false
	}
	f, ok := nd.BuildFailed[v.DB]
	if !ok || f.Version != v.Version {
		return "", false
	}
	return f.Reason, true
}

// BuildOnceMinBytes is the configured BuildOnceMinBytes.
func (c *Cluster) BuildOnceMinBytes() int64 { return c.cfg.BuildOnceMinBytes }

// PeerWait is BuildOnceWait.
func (c *Cluster) PeerWait() time.Duration { return c.cfg.BuildOnceWait }

// builder returns the ID and address of v's builder in s, "" when no
// live node can be.
func (c *Cluster) builder(s *Snapshot, v node.VersionInfo) (string, string) {
	var shards, ids []string
	for _, nd := range s.Live() {
		if nd.ShardID != "" {
			shards = append(shards, nd.ShardID)
		}
	}
	fn, _ := assign.ByName(c.cfg.Assignment) // checked by Validate
	addrs := map[string]string{}
	for _, nd := range s.Live() {
		// A node assigned no partition of v builds nothing of it.
		if nd.ShardID != "" && nd.Address != "" && len(fn(shards, nd.ShardID, v.NumPartitions, c.cfg.Replication)) > 0 {
			ids = append(ids, nd.ID)
			addrs[nd.ID] = nd.Address
		}
	}
	id := Builder(ids, v.DB, v.Version)
	return id, addrs[id]
}

// Builder returns which of the node IDs ids builds db's version when
// they are the live nodes (build once): the one of highest XXH64 of its
// ID, a zero byte, db, a zero byte and version (ties to the smaller ID),
// so that a cluster's dbs and versions are built by different nodes. ""
// when ids is empty.
func Builder(ids []string, db, version string) string {
	var best string
	var bw uint64
	for _, id := range ids {
		var d xxhash.Digest
		d.Reset()
		_, _ = d.WriteString(id)
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(db)
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(version)
		if w := d.Sum64(); best == "" || w > bw || w == bw && id < best {
			best, bw = id, w
		}
	}
	return best
}
