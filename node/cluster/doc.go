// Package cluster is cluster mode for one node: it implements node.Cluster,
// the interface the node's version lifecycle declares, over a View of the
// cluster (kvcluster.View reads it from NATS KV). It answers what the
// lifecycle asks (which partitions to build, when a version may go active,
// which peers answer for a partition held elsewhere) and does what the
// lifecycle need not know: waiting for membership to converge at start,
// proxying lookups (package proxy), healing under-replicated partitions
// (asking the node to load them), and merging the peers into the status.
//
// A node that runs alone never imports this package.
package cluster
