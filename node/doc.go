// Package node is a spangle node's data plane: for each db it discovers
// versions in a Source, builds the partitions this node holds (package
// blocks), switches lookups to a new version atomically, retires the old
// one, and answers lookups — locally, or in cluster mode through the
// Cluster it is given. It speaks no wire format: the front doors (package edge) call
// Get, GetMany, Status and Held.
//
// # Model
//
// A Node owns a data dir (blocks.Store), a Source (a local directory, or
// one injected through Config.OpenedSource such as node/source/objstore's NATS
// Object Store), and one goroutine per db that lists versions, builds the
// newest one newer than the active one, and switches to it. The refresh
// loop lists the source at start, every Config.RefreshPeriod, on Refresh
// (SIGHUP) and on Announce (a published version).
//
// The read path loads a db's active version from an atomic pointer and
// never waits on a build, on the source or on NATS. A version retired
// while a lookup holds it answers blocks.ErrClosed, and the lookup retries
// on its successor, so that no lookup fails and none sees an older version
// than one it could have seen before. Answers of keys asked again come
// from the answer cache (cache.go, Config.HotCacheBytes), one for every
// door and for local and proxied answers alike, whose entries are named
// by the version that answered and dropped with it.
//
// In cluster mode (Config.Cluster, implemented by package node/cluster) a
// node builds only the partitions the Cluster assigns it, switches once
// the Cluster says every partition has enough replicas, sends lookups of
// partitions it does not hold to the Cluster, keeps a replaced version for
// peers until the Cluster's Retention passes without a request for it, and
// loads the partitions the Cluster asks it to heal (LoadPartitions). The
// package never imports node/cluster: a node alone leaves Config.Cluster
// nil. Any node with an Advertiser writes what it holds (Held) there.
//
// Main types: Node (New, Start, Loaded, Ready, Refresh, Drain, Shutdown;
// Get, GetMany, List, Status, Held, LoadPartitions), Config and DBConfig, and
// the interfaces it declares for what it needs: Cluster (Placement for
// the version lifecycle, Peers for remote reads; Join hands it the node
// as a Member) and Advertiser (sources are package node/source's).
//
// List (list.go) pages through a db's keys in order: a k-way merge of
// the partitions' ordered reads (blocks.Version.View) and, in cluster
// mode, of the pages of the partitions held elsewhere (RemoteLister,
// asked first); a cursor (cursor.go, HMAC'd with Config.CursorKey) pins
// the version, and once that version is gone the next page is
// ErrVersionGone. Where a page left its local partitions is kept, within
// Config.ListPositionBytes, for the next page asked here
// (list_positions.go): it continues them instead of seeking again.
//
// # Caveats
//
//   - A version that failed to build is retried after RetryFailedAfter,
//     doubling up to 32 times that, and at once on Refresh (SIGHUP).
//   - Without RequireSuccessFile, a version is built as soon as it is
//     listed: a job still writing its files gets a partial version.
//   - Healing covers the active version only; a pending or retired
//     version that loses replicas stays short. A node whose healing is
//     off (DisableHeal) still ranks as a candidate for the partitions it
//     would heal, which then stay short (node/assign.Heal's rule). One
//     heal load runs at a time per db; it shares MaxParallelLoads with
//     builds.
//   - A listing page seeks every partition it reads again (the cursor
//     holds the last key, not positions), and a page that fans out waits
//     for its slowest holder.
package node
