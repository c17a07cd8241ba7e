package assign

import (
	"cmp"
	"slices"
	"time"
)

// HealInput is what Heal decides from: one node's view of a db's active
// version. Heal does not modify or retain any of its slices.
type HealInput struct {
	// Self is this node's ID. It counts as live even if Live omits it.
	Self string
	// Live are the IDs of the nodes that can take work (in the nodes
	// bucket and not draining). Healing ranks them by Order; holders that
	// are not live do not count as replicas.
	Live []string
	// Replication is the target number of replicas per partition.
	// Heal returns nil when it is ≤ 0.
	Replication int
	// HealAfter is how long a partition must have been below Replication
	// before it is healed; ≤ 0 heals at once.
	HealAfter time.Duration
	// MaxConcurrent bounds the partitions this node loads for healing at
	// once, Healing included. Heal returns nil when it is ≤ 0 (healing
	// off).
	MaxConcurrent int
	// Healing are the partitions this node is loading for healing now.
	// They are neither returned again nor counted as replicas.
	Healing []int
	// Partitions has one entry per partition of the version, indexed by
	// partition number.
	Partitions []PartitionState
}

// PartitionState is the replication of one partition of the active
// version.
type PartitionState struct {
	// Holders are the IDs of the nodes advertising the partition. Heal
	// needs who, not only how many: the nodes to load a partition are the
	// first ones in rendezvous order that do not hold it already.
	Holders []string
	// Under is how long the partition has been below Replication live
	// replicas (0 if it is not, or has just dropped).
	Under time.Duration
}

// Heal returns the partitions this node should start loading now to bring
// the active version back to its replication, most urgent first (fewest
// live replicas, then longest under, then lowest number).
//
// A partition p with c live holders, c < Replication, that has been under
// for at least HealAfter is loaded by the first Replication-c nodes of
// Order(Live, p) that do not hold it. Every node runs the same rule on
// the same snapshot, so exactly the missing number of nodes pick p up,
// and they are the ones that would rank first for p anyway; while they
// load it, they stay first and nobody else does. At most MaxConcurrent
// partitions are loading on this node at once: the result has at most
// MaxConcurrent-len(Healing) entries. A partition with no live holder at
// all is healed like any other (from the source, which still has it).
func Heal(in HealInput) []int {
	if in.Replication <= 0 || in.MaxConcurrent <= 0 {
		return nil
	}
	healing := slices.Clone(in.Healing)
	slices.Sort(healing)
	healing = slices.Compact(healing)
	budget := in.MaxConcurrent - len(healing)
	if budget <= 0 {
		return nil
	}
	live := members(in.Live, in.Self) // sorted, for BinarySearch

	type need struct {
		p, replicas int
		under       time.Duration
	}
	var needs []need
	holders := make([]string, 0, in.Replication)
	for p, st := range in.Partitions {
		if st.Under < in.HealAfter {
			continue
		}
		if _, busy := slices.BinarySearch(healing, p); busy {
			continue
		}
		holders = liveHolders(holders[:0], st.Holders, live)
		if len(holders) >= in.Replication || slices.Contains(holders, in.Self) {
			continue
		}
		// Rank self among the live nodes that do not hold p.
		ws := weight(in.Self, p)
		ahead, missing := 0, in.Replication-len(holders)
		for _, id := range live {
			if id == in.Self || slices.Contains(holders, id) {
				continue
			}
			if before(id, weight(id, p), in.Self, ws) {
				if ahead++; ahead == missing {
					break
				}
			}
		}
		if ahead < missing {
			needs = append(needs, need{p, len(holders), st.Under})
		}
	}
	slices.SortFunc(needs, func(a, b need) int {
		if c := cmp.Compare(a.replicas, b.replicas); c != 0 {
			return c
		}
		if c := cmp.Compare(b.under, a.under); c != 0 {
			return c
		}
		return cmp.Compare(a.p, b.p)
	})
	var out []int
	for _, n := range needs[:min(budget, len(needs))] {
		out = append(out, n.p)
	}
	return out
}

// liveHolders appends to dst the unique IDs of holders that are in live
// (sorted) and returns it.
func liveHolders(dst, holders, live []string) []string {
	for _, h := range holders {
		if _, ok := slices.BinarySearch(live, h); ok && !slices.Contains(dst, h) {
			dst = append(dst, h)
		}
	}
	return dst
}
