// Package kvcluster binds a node to its cluster's NATS KV buckets
// (package kvwatch): View is the cluster view (cluster.View) over the
// nodes and partitions buckets; Advertiser writes the node's own entries
// (node.Advertiser); VersionFeed announces the versions that spangle
// publish records, and PinFeed hands the node the cluster's pins (spangle
// rollback, spangle activate). Each follows kvwatch's snapshots on one
// goroutine, from Start to Stop.
package kvcluster
