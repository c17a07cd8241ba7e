// Package region places a spangle cluster in one region of a hub, with
// NATS's own tools: leafnodes, JetStream domains and stream mirrors.
//
// # Model
//
// A hub is a NATS server (or cluster) with JetStream in domain HubDomain
// ("hub"), where batch jobs publish: the Object Store bucket of the
// versions, the versions KV bucket (announcements and pins). A region is
// a spangle cluster as it always was — its nodes, their membership and
// partitions buckets, assignment, healing, proxied lookups — whose NATS
// server has JetStream domain Name and is a leafnode of the hub. In the
// region's domain, the nodes create (idempotently, EnsureObjectMirror,
// EnsureVersionsMirror) a mirror of the hub's Object Store bucket
// (ObjectMirror: stream OBJ_<bucket> mirroring the hub's through
// "$JS.<hub>.API") and of the hub's versions bucket (VersionsMirror).
// They read these mirrors as if they were the buckets themselves, so:
//
//   - a version crosses the leafnode link once per region, whatever the
//     region's node count;
//   - a region cut off from the hub serves what its mirrors and data dirs
//     hold, and the mirrors catch up when the link returns (nats-server
//     retries a mirror's consumer with a backoff of 10 s per failed
//     attempt, at most 2 min);
//   - nothing of a region's membership reaches another: its buckets live
//     in its own domain, and the link denies "$KV.>" and the NATS front
//     door's "spangle.>" both ways (Deny), so lookups never leave it.
//
// Config is the [region] table. Remote makes the leafnode remote of an
// embedded server (deployment (a)); a region running its own NATS server
// (deployment (b)) writes the same remote in that server's configuration.
// CheckDomain checks that the region's server has the region's domain,
// CheckHub that the hub's JetStream answers through the leafnode.
// Announce keeps the region's TTL'd entry in the hub's bucket of regions,
// which Regions lists: how the hub knows its regions. With
// Config.HubConsumers the mirrors use durable consumers the hub keeps for
// the region (HubConsumer, EnsureHubConsumers), so that a region's login
// at a hub with accounts (kvwatch.HubAccountsConfig) needs no consumer
// rights there.
//
// The package imports nothing of spangle but kvwatch/names and
// kvwatch/natsconn; kvwatch uses it.
//
// # Caveats
//
//   - A mirror created before its source exists retries with nats-server's
//     backoff: publish once at the hub before regions start, or expect the
//     first version to arrive up to two minutes late.
//   - nats.go sends a write to a mirrored KV bucket to its origin: the
//     region's nodes never write the versions mirror (kvwatch refuses it),
//     and the hub's leafnode permissions should refuse it too
//     (docs/SECURITY.md).
//   - Objects deleted at the hub leave their chunks in a region's mirror
//     until the mirror's own limits remove them: a mirror does not replay
//     the hub's purges.
package region
