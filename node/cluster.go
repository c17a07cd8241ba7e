package node

import (
	"context"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// Cluster is the cluster a node is part of, as its version lifecycle sees
// it: what the lifecycle asks ("which partitions do I build?", "may this
// version go active?" — Placement; "who answers for a partition I do not
// hold?" — Peers) and what it tells (Join hands the cluster the node, as
// a Member whose Held versions it follows). Package node/cluster
// implements it; a node whose Config.Cluster is nil runs alone, and this
// package never imports that one.
//
// Cluster mode, step by step:
//
//  1. Start calls Join once the node's ID is known, then the first
//     listing waits for Converge (the live membership has settled);
//  2. a build makes only the partitions Assign names;
//  3. a built version is pending: held, advertised (Active false) and
//     readable by name, and becomes active once MayActivate says every
//     partition has enough replicas, asked again at every Changed;
//  4. lookups of partitions held elsewhere go to the Peers (read.go);
//  5. the version replaced at a switch stays for peers naming it until
//     Retention passes without a request (retention.go);
//  6. Status adds the other nodes' view of each db;
//  7. the cluster may ask the node to load more partitions of its active
//     version (Member.LoadPartitions): healing.
//
// Lock order: db.healMu and db.mu are never held together; the pending
// and active versions change only on the db's loop goroutine.
type Cluster interface {
	Placement
	Peers
	// Join starts the cluster's work for m, the node (healing, routes);
	// called by Start, once. Shutdown ends it.
	Join(m Member)
	// Converge blocks until the membership has settled with this node in
	// it; false if ctx ends first.
	Converge(ctx context.Context) bool
	// Changed returns a channel closed at the next change of the cluster.
	Changed() <-chan struct{}
	// Forget drops what the cluster keeps about v (its routes), no
	// longer held here.
	Forget(db, version string)
	// Status adds the other live nodes' versions of db to ds.
	Status(db string, ds *DBStatus)
	// Shutdown stops what Join started and releases the cluster's
	// resources; it returns ctx's error if ctx ends first.
	Shutdown(ctx context.Context) error
}

// Placement is where a version's partitions live and when it may serve:
// the version lifecycle's questions to the cluster (db.go, cluster.go,
// retention.go). Its methods do not block and are safe for concurrent
// use.
type Placement interface {
	// Assign returns the partitions of v (v.Partitions unset) this node
	// builds, never nil, or an error wrapping ErrPartitionerMismatch when
	// another node built v with another partitioner.
	Assign(v VersionInfo) ([]int, error)
	// MayActivate reports whether v, of which this node holds
	// v.Partitions, has enough replicas cluster-wide to go active, and
	// no other holder refuses it (its guards: checks.go), unless
	// v.Forced.
	MayActivate(v VersionInfo) bool
	// VersionRecords is the records of v: for each partition, those of
	// this node (v.Records) or of another holder's partitions entry;
	// false when a partition's are unknown.
	VersionRecords(v VersionInfo) (int64, bool)
	// Retention is how long a replaced version stays for peers naming it.
	Retention() time.Duration
	// Replication is the replica count a version's status is counted
	// against.
	Replication() int
}

// Peers reads what this node does not hold from the nodes that do: the
// remote side of the read path (read.go's reader, for a partition that
// is not local). It is the one place a new remote read is added: a key
// listing's pages (RemoteLister, list.go) came that way. Safe for
// concurrent use; each call blocks until an answer, a timeout or the end
// of ctx.
type Peers interface {
	// Get looks key up in partition p of v on the other nodes holding it:
	// an error wraps ErrNoReplica or ErrProxyTimeout, or is ctx's. The
	// caller owns key and the returned value.
	Get(ctx context.Context, v VersionInfo, p int, key []byte) (Remote, error)
	RemoteLister
}

// Member is the node as its Cluster sees it once joined: what the
// cluster reads of it (its ID, status name, shard ID, held versions,
// whether it has loaded and whether it is draining) and the one thing it
// asks of it (LoadPartitions: healing). *Node implements it; its methods
// are safe for concurrent use.
type Member interface {
	ID() string
	Name() string
	ShardID() string
	Held() ([]HeldVersion, <-chan struct{})
	Loaded() <-chan struct{}
	Draining() bool
	LoadPartitions(ctx context.Context, db, version string, parts []int) error
}

var _ Member = (*Node)(nil)

// VersionInfo names a version of a db as the cluster sees it.
type VersionInfo struct {
	DB, Version   string
	NumPartitions int
	Partitioner   string // the partitioner's identity
	Partitions    []int  // held by this node; increasing
	// Forced is set when an operator forces the version's activation
	// (a pin with Force): MayActivate then ignores the holders' refusals.
	Forced bool
	// Records are the records of each partition of Partitions, as held
	// here (MayActivate, VersionRecords); nil when not needed.
	Records []int64
}

// Remote is a lookup's answer from another node.
type Remote struct {
	Value []byte
	Found bool
	Peer  string // the node that answered
}

// clustered reports whether the node runs in cluster mode.
func (n *Node) clustered() bool { return n.cfg.Cluster != nil }

// clusterLoop nudges every db at each change of the cluster, so that
// pending versions switch as soon as their replicas appear. It returns
// when the node shuts down.
func (n *Node) clusterLoop() {
	for {
		changed := n.cfg.Cluster.Changed()
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		}
		for _, d := range *n.dbs.Load() {
			d.nudge()
		}
	}
}

// info describes v for the cluster.
func (d *db) info(v *version) VersionInfo {
	m := v.data.Manifest()
	return VersionInfo{DB: d.name, Version: v.name, NumPartitions: v.n, Partitioner: m.Partitioner, Partitions: m.Partitions,
		Records: partitionsRecords(m)}
}

// partitionsRecords is the records of each partition m holds, in the
// order of m.Partitions.
func partitionsRecords(m *blocks.Manifest) []int64 {
	out := make([]int64, len(m.Partitions))
	for i, p := range m.Partitions {
		if i < len(m.PartitionInfo) && m.PartitionInfo[i].Partition == p {
			out[i] = m.PartitionInfo[i].Records // the manifest's order: no search
		} else {
			out[i] = partitionRecords(m, p)
		}
	}
	return out
}
