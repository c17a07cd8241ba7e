package assign

import "slices"

// Sequential is sequins' partition assignment (PR #128): ids is the
// sorted, unique list of shardIDs plus self (byte-wise string order, so
// "10" < "2"); the list [0×replication, 1×replication, …, (n-1)×replication]
// is dealt round-robin over it, element i going to ids[i % len(ids)]; the
// result is the partitions dealt to self at least once, in increasing
// order.
//
// Each partition therefore goes to min(replication, len(ids)) distinct
// members; with replication ≥ len(ids) every member holds everything.
// self is counted even when shardIDs omits it, as sequins counted "peers
// plus self". It returns nil when n ≤ 0 or replication ≤ 0. shardIDs is
// not modified or retained; the result is a new slice.
func Sequential(shardIDs []string, self string, n, replication int) []int {
	if n <= 0 || replication <= 0 {
		return nil
	}
	ids := members(shardIDs, self)
	k, _ := slices.BinarySearch(ids, self)
	l := len(ids)
	copies := min(replication, l) // further copies land on members already dealt
	var out []int
	for p := 0; p < n; p++ {
		// The copies of p are elements p*replication … p*replication+copies-1,
		// dealt to consecutive members starting at first.
		first := (p % l) * (replication % l) % l
		if (k-first+l)%l < copies {
			out = append(out, p)
		}
	}
	return out
}
