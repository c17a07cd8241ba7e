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
//
// Main types: Cluster (New, Join, Shutdown), Config, View and Snapshot.
//
// # Caveats
//
//   - Every decision reads the View's latest snapshot: a node whose view
//     lags (stale) does not heal, and its assignment follows the members
//     it sees.
//   - Healing covers the active version only, one load per db at a time,
//     HealMaxParallel partitions per node; a failed load waits HealAfter.
//   - A holder that leaves the view stays a proxy target, as a last
//     resort, for HealAfter: its entries may have expired during a NATS
//     outage while it still serves.
package cluster
