// Package kvwatch is spangle's only contact with NATS JetStream: it keeps
// a node's own entries alive in the cluster's buckets and mirrors every
// bucket into an immutable local snapshot. It replaces the ZooKeeper
// ephemeral nodes and watches of sequins. Its subpackages serve the rest
// of spangle, clients and tools included: names owns every bucket, key
// and subject name, and natsconn opens every NATS connection and
// JetStream handle (a domain, credentials, TLS); the edge client reads
// the buckets itself, read-only, through both.
//
// # Model
//
// A cluster (Config.ClusterName) has three kinds of bucket (Bucket),
// named by names.KVBucket:
//
//   - Nodes: key names.NodeKey(nodeID), one TTL'd entry per live node;
//   - Partitions: key names.PartitionKey(db, version, nodeID), one TTL'd
//     entry per node and version it serves;
//   - Versions: key names.VersionKey(db), the newest published version,
//     permanent, and names.PinKey(db), a db's pin.
//
// The buckets a KV binds and watches are a list (watchedBuckets), one per
// kind today; the watch loop selects over whatever the list holds.
//
// A KV publishes the node's own entries (Publish, Withdraw) and writes
// permanent ones (Put, Delete). It never reads the buckets on request:
// one watcher per bucket feeds a Snapshot, which readers get with
// KV.Snapshot, a lock-free atomic load. Nothing here is meant for the
// read path, and nothing on the read path needs it: readers only read
// snapshots, which stay readable, unchanged, while NATS is away.
//
// The life of a KV is New (starts nothing) → Start (embedded server when
// Config.URLs is empty, connection, buckets, heartbeat, watchers) → Ready
// (closed once every bucket is loaded) → Shutdown (idempotent, bounded,
// its steps listed in its comment). Conn gives other packages the
// connection (the NATS front door); ClientURL gives tools the embedded
// server's address.
//
// # The embedded server
//
// With no URLs, Start runs a nats-server with JetStream inside the process,
// listening on Config.EmbeddedListen so that other processes and tools can
// connect, and optionally routed to other embedded servers as a cluster.
// The KV's own client reaches it in-process (no TCP), through a provider
// that reads the current server from an atomic pointer: a client handed
// the server instance directly is bound to it and never reconnects to a
// replacement.
//
// # Regions
//
// With Config.Region (package kvwatch/region) the server — the embedded
// one, or the one at URLs — is a region's: its JetStream domain is the
// region's name (checked at Start), and the embedded one is a leafnode of
// the hub. Nodes and Partitions are the region's own buckets; Versions is
// the region's mirror of the hub's versions bucket, created by Start and
// read-only here (Put and Delete return ErrMirror: a write to a mirror
// would go to the hub). A goroutine asks the hub's JetStream every
// HubCheckInterval and logs when it stops or starts answering
// (spangle_kvwatch_hub_connected); nothing waits on it.
//
// # TTL'd entries
//
// JetStream gives keys a time to live only in buckets with a limit-marker
// TTL (LimitMarkerTTL, set from Config.MarkerTTL), and only on creation
// (KeyTTL). Refreshing is where the obvious ways fail: kv.Put and
// kv.Update on a key created with a TTL make it permanent, so a node that
// refreshed that way would never leave the membership after a crash. The
// heartbeat instead publishes to the key's subject, $KV.<bucket>.<key>,
// with a message TTL and an expected last sequence per subject in the one
// message: a compare-and-set on the revision this KV last wrote, carrying
// the TTL. When the CAS fails — the key expired (a late heartbeat, an
// outage) or someone else wrote it — the key is created again, or written
// over with a CAS on the current revision: keys embed the node ID, so the
// node owns them. Taking a key back from someone else is logged and
// counted; two processes sharing a node ID show up that way.
//
// TTLs are whole seconds (JetStream truncates them and refuses less than
// one), hence the rule on Config.EntryTTL. On expiry JetStream writes a
// marker (header Nats-Marker-Reason), which watchers receive as a purge: it
// removes the key from the snapshot, typically within 250 ms of the TTL.
// A bucket-wide TTL would expire keys silently, without markers, so it is
// not used.
//
// Deletes (Withdraw, Delete, Shutdown) are purges whose marker itself
// expires after MarkerTTL, so deleted keys leave nothing behind for good.
//
// # Own entries and their concurrency contract
//
// One goroutine, the own loop, owns the node's own entries: every write of
// them — Publish, Withdraw, the heartbeat's refreshes, a repair's rewrites
// and the deletes of Shutdown — is a request to it that carries a channel
// for the answer. It runs the writes of one key one after the other, in
// the order asked (the last Publish wins; a Withdraw's delete and the next
// Publish's create never overlap), and the writes of different keys at
// once. It does no I/O itself, so it takes a request at once; the
// caller's context bounds its wait and the write it asked for (a
// published entry stays registered either way, for the heartbeat).
//
// # Watchers and their concurrency contract
//
// One goroutine owns the watchers. It applies their updates in
// order, batches those already waiting into one new snapshot, and swaps it
// in atomically; a snapshot is never modified after that, so a reader may
// keep one as long as it likes. Revisions-only changes (heartbeat
// refreshes) produce a new snapshot but no notification.
//
// Subscribe delivers snapshots, in order, from that one goroutine, which
// never waits for a consumer: each subscriber has a one-slot channel whose
// unread snapshot is replaced by the newer one (and the drop counted), so a
// slow consumer skips intermediate states but always ends with the latest.
// A watcher over a bucket with history 1 reports the latest state of each
// key, not every change, so consumers must reason about states anyway.
//
// # Outages
//
// The client never stops reconnecting, and fails calls at once while
// disconnected instead of buffering them (a buffered write would land late,
// out of order). While disconnected, Snapshot.Stale is true: expiry markers
// cannot arrive, so an entry whose node died meanwhile is still in the
// snapshot, and no decision should rest on an entry's absence or presence
// as a sign of life. Reads go on from the snapshot.
//
// On reconnect the heartbeat re-puts every own entry at once, and each
// watcher is re-created from the last revision it applied plus one
// (ResumeFromRevision). An old watcher would stay open but silent for
// 10-20 s after a server restart, until its ordered consumer gives up on
// missed heartbeats; a resumed one delivers what changed during the
// outage, a version published meanwhile included, and then live updates.
// Snapshot.Stale clears when every watcher has caught up. After an outage
// longer than MarkerTTL/2, or when a bucket turns out to be behind the last
// revision seen (its stream was re-created), the watcher loads the bucket
// whole instead and replaces the map in one step, since markers of keys
// deleted meanwhile may be gone.
//
// A bucket deleted, purged or re-created under a running KV loses its
// entries, and a purge sends watchers nothing. Each Heartbeat the KV looks
// at every bucket (one STREAM.INFO each). A bucket found gone at two
// looks in a row is created again (not at once: a nats-server that has
// just forgotten a deleted stream may still be moving its files, and a
// stream created then recovers them as they vanish). When one it holds
// entries in was gone, was created again, or no longer holds the
// revision of one of its writes, it writes all its entries in that bucket
// again at once, reloads the bucket whole, logs it and counts
// it (spangle_kvwatch_bucket_repairs_total). Versions entries come back
// only where the key is absent, so a newer version stays.
//
// A watcher that stalls while connected — in a cluster, when the server
// hosting its consumer goes away — is noticed because an own write
// acknowledged more than OpTimeout ago has not come back through it; all
// watchers are then re-created the same way.
//
// # Caveats
//
//   - Self-repair costs one STREAM.INFO per bucket per Heartbeat, and
//     restores only this KV's own entries: others' permanent keys lost to
//     a purge (pins, announcements) stay lost. A purge is recognised by
//     an own write's revision leaving the stream, so a bucket purged
//     while this KV held nothing there is reloaded by no one until a
//     watcher restarts.
//   - Membership is only as fresh as the connection: while Stale, dead
//     nodes' entries linger. Callers decide what to do in that window
//     (spangle keeps serving its last assignment).
//   - A stall of a watcher is detected through own writes. A node with no
//     own entries, or a stall confined to the Versions bucket's consumer,
//     can still see up to 10-20 s of silence after a cluster member goes
//     away.
//   - Replicas must match the deployment (1 on one server, 3 on three):
//     JetStream refuses R3 on a single server (10074), and Start then
//     fails when its context ends, the JetStream error included.
//   - Start updates the buckets' configuration to this node's Config: nodes
//     of one cluster must agree on Replicas and MarkerTTL.
//   - Config.EntryTTL trades failure detection against load: the node
//     entry is written every Heartbeat (EntryTTL/3 by default); partitions
//     entries live PartitionsTTL and are refreshed about every third of it,
//     so a heartbeat is one write per node. Watchers leave the snapshot as
//     it is for a refresh (the same value written again).
//   - With several embedded servers in one process (tests), each KV's client
//     only ever connects to its own server.
package kvwatch
