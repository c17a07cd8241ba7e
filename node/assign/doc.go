// Package assign decides which nodes hold which partitions of a version.
// It is a leaf package of pure functions: no clocks, no I/O, no state, and
// nothing else of spangle's.
//
// # Model
//
// A version has n partitions, numbered 0 to n-1, and each should be held
// by replication nodes. Every node computes the same answer from the same
// membership, so no coordination is needed beyond agreeing on who is a
// member. Two strategies place partitions; both have the signature of
// Func, so a node picks one by name (ByName):
//
//   - Sequential is sequins' algorithm, exactly: the list
//     [p0×R, p1×R, …] dealt round-robin over the sorted unique shard IDs.
//     It spreads partitions evenly, but adding or removing one member
//     reshuffles almost everything, which is harmless because a version's
//     assignment is computed once, when the version appears.
//   - Rendezvous is highest-random-weight hashing: each partition ranks
//     every member by a hash of (member, partition) and the first R hold
//     it. A member joining or leaving moves only about 1/members of the
//     assignments, the ones it takes or gives up. Order gives a
//     partition's full ranking and Owners its first R.
//
// Both are usually fed shard IDs, so that nodes sharing a shard ID hold
// the same partitions (sequins' way of replacing a node).
//
// Two rules adjust an assignment:
//
//   - MaxReplicationFilter is sequins' max_replication: when a node
//     creates a version it drops the partitions that already have enough
//     replicas elsewhere.
//   - Heal re-replicates the active version: a partition that has stayed
//     below its replication for heal_after is loaded by the next live
//     nodes in rendezvous order (over node IDs) that do not hold it, a
//     bounded number at a time per node. sequins never re-replicated.
//
// # Rendezvous hash
//
// The weight of member id for partition p is XXH64 (seed 0, as
// github.com/cespare/xxhash/v2 computes it) of the bytes of id followed
// by p as an unsigned 64-bit big-endian integer. A higher weight ranks
// first; equal weights rank by id, ascending. XXH64 is a fixed,
// specified algorithm, so the ranking is the same in every process, on
// every platform and under every Go version; TestRendezvousGolden pins it.
//
// # Caveats
//
//   - The answers are only as consistent as the membership the nodes
//     feed in: two nodes with different views of the cluster compute
//     different assignments. spangle fixes a version's assignment when
//     the version is created (as sequins did) and relies on min_replication
//     and Heal to cover the gaps.
//   - IDs are opaque strings compared byte-wise; "10" sorts before "2".
//   - Sequential and Rendezvous always count self as a member, even when
//     the list omits it (sequins' "peers plus self").
//   - Heal's bound is per node. A node whose bound is full still ranks as
//     a candidate, so a partition it should heal waits for it rather than
//     passing to the next node.
package assign
