// Package kvcluster binds a node to its cluster's NATS KV buckets
// (package kvwatch): View is the cluster view (cluster.View) over the
// nodes and partitions buckets; Advertiser writes the node's own entries
// (node.Advertiser); VersionFeed announces the versions that spangle
// publish records, and PinFeed hands the node the cluster's pins (spangle
// rollback, spangle activate). Each follows kvwatch's snapshots on one
// goroutine, from Start to Stop.
//
// # Caveats
//
//   - Entries that do not decode, or that name a node without a node
//     entry of the same run, are ignored and counted
//     (spangle_cluster_invalid_entries): any NATS client with write access
//     to the buckets can write them.
//   - PinFeed acts only once the KV has loaded every bucket once, and
//     never on a stale snapshot (an empty view would unpin every db).
//     VersionFeed announces whatever it sees: an announcement only makes
//     the node list its source sooner.
package kvcluster
