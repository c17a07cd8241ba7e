package assign

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// weight is id's rendezvous weight for partition p: XXH64, seed 0, of the
// bytes of id followed by p as a big-endian uint64 (see the package doc).
func weight(id string, p int) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(id)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(p))
	_, _ = d.Write(b[:])
	return d.Sum64()
}

// before reports whether id a (weight wa) ranks before id b (weight wb).
func before(a string, wa uint64, b string, wb uint64) bool {
	return wa > wb || wa == wb && a < b
}

// Order returns every unique ID of ids ranked for partition p by
// rendezvous hashing: highest weight first. Healing walks it: the first
// live nodes not holding p are the ones to load it. The order depends only
// on the set of IDs, not on their order or repetition in ids. ids is not
// modified or retained; the result is a new slice.
func Order(ids []string, p int) []string {
	type ranked struct {
		id string
		w  uint64
	}
	u := slices.Clone(ids)
	slices.Sort(u)
	u = slices.Compact(u)
	rs := make([]ranked, len(u))
	for i, id := range u {
		rs[i] = ranked{id, weight(id, p)}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	for i, r := range rs {
		u[i] = r.id
	}
	return u
}

// Owners returns the first min(replication, unique IDs) IDs of
// Order(ids, p): the members that hold partition p, highest weight first.
// It returns nil when replication ≤ 0. ids is not modified or retained.
func Owners(ids []string, p, replication int) []string {
	if replication <= 0 {
		return nil
	}
	o := Order(ids, p)
	return o[:min(replication, len(o))]
}

// Rendezvous returns the partitions, in increasing order, whose Owners
// among ids plus self include self: the rendezvous counterpart of
// Sequential, with the same signature. Each partition goes to
// min(replication, members) distinct members, and a member joining or
// leaving moves only the assignments it takes or gives up. It returns nil
// when n ≤ 0 or replication ≤ 0. ids is not modified or retained.
func Rendezvous(ids []string, self string, n, replication int) []int {
	if n <= 0 || replication <= 0 {
		return nil
	}
	others := members(ids, self)
	others = slices.DeleteFunc(others, func(id string) bool { return id == self })
	if replication > len(others) {
		out := make([]int, n)
		for p := range out {
			out[p] = p
		}
		return out
	}
	var out []int
	for p := 0; p < n; p++ {
		ws := weight(self, p)
		ahead := 0
		for _, id := range others {
			if before(id, weight(id, p), self, ws) {
				if ahead++; ahead == replication {
					break
				}
			}
		}
		if ahead < replication {
			out = append(out, p)
		}
	}
	return out
}
