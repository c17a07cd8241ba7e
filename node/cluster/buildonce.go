package cluster

import (
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/spangledb/spangle/node"
)

var _ node.BuildOnce = (*Cluster)(nil)

// VersionBuilder returns the address of the node that builds v from the
// source for the whole cluster (build once, issue 35) and whether it is
// this node; ok is false when DisableBuildOnce, or when no node can be
// the builder: every node builds its own partitions.
//
// The builder is the live node (not draining, with a shard ID and an
// address to copy from) of highest weight XXH64(node ID, 0, db, 0,
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

// PeerWait is BuildOnceWait.
func (c *Cluster) PeerWait() time.Duration { return c.cfg.BuildOnceWait }

// builder returns the ID and address of v's builder in s, "" when no
// live node can be.
func (c *Cluster) builder(s *Snapshot, v node.VersionInfo) (string, string) {
	var best, addr string
	var bw uint64
	for _, nd := range s.Live() {
		if nd.ShardID == "" || nd.Address == "" {
			continue
		}
		var d xxhash.Digest
		d.Reset()
		_, _ = d.WriteString(nd.ID)
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(v.DB)
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(v.Version)
		if w := d.Sum64(); best == "" || w > bw || w == bw && nd.ID < best {
			best, bw, addr = nd.ID, w, nd.Address
		}
	}
	return best, addr
}
