// Package names owns every name spangle gives to things in NATS: the rule
// that db, version, node and cluster names follow, the KV buckets and
// their streams, the keys of their entries, and the subjects of the NATS
// front door and of JetStream's API. It imports nothing of spangle, so
// every package — blocks, the sources, the node, the edge client, the
// CLI — checks and builds names here rather than with a copy of its own.
//
// # Model
//
// A name (Valid) is one or more of [-_a-zA-Z0-9]: it is one KV key token,
// one subject token and one path element at once, so a db or version name
// can be all three without escaping.
//
// A cluster's buckets are KVBucket(cluster, kind) for the kinds Nodes,
// Partitions and Versions; their streams are KVStream(bucket), and a key's
// subject is KVSubject(bucket, key). Keys: NodeKey, PartitionKey,
// VersionKey, PinKey.
//
// The NATS front door answers GetSubject, MGetSubject and PartSubject,
// all under Prefix(cluster).
//
// JetStream's API lives under APIPrefix(domain): "$JS.API" in the
// account's own JetStream, "$JS.<domain>.API" to reach the JetStream of
// another domain (a region, a hub) across leafnodes. A bucket is the
// pair of its domain and its name; the same name may exist in several
// domains (a bucket and its mirror).
//
// # Caveats
//
//   - Valid has no length limit; node/advert bounds the names it decodes
//     from entries to MaxLen.
//   - KVBucket sanitises the cluster name (Sanitize), so two cluster names
//     differing only in invalid characters share buckets; spangle's
//     configuration refuses such cluster names (Valid) before they get
//     here.
package names
