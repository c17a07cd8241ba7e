package assign

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// splitIDs turns a fuzzed string into a list of IDs (comma-separated).
func splitIDs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// FuzzSequential: every partition goes to exactly min(replication, unique
// ids) members, and Sequential agrees with the literal sequins reference.
func FuzzSequential(f *testing.F) {
	f.Add("1,2,3", uint8(5), uint8(2))
	f.Add("1,2,3,4,5", uint8(5), uint8(3))
	f.Add("10,2,2,1", uint8(9), uint8(7))
	f.Add("", uint8(3), uint8(1))
	f.Add("a", uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, idList string, n8, r8 uint8) {
		ids := splitIDs(idList)
		if len(ids) == 0 {
			return
		}
		n, r := int(n8)%64, int(r8)%16
		u := slices.Compact(slices.Sorted(slices.Values(ids)))
		counts := make([]int, n)
		for _, self := range u {
			got := Sequential(ids, self, n, r)
			if !slices.IsSorted(got) {
				t.Fatalf("not sorted: %v", got)
			}
			if want := sequinsReference(ids, self, n, r); !slices.Equal(got, want) && r > 0 {
				t.Fatalf("Sequential(%q, %q, %d, %d) = %v, reference %v", ids, self, n, r, got, want)
			}
			for _, p := range got {
				counts[p]++
			}
		}
		for p, c := range counts {
			if c != min(r, len(u)) {
				t.Fatalf("partition %d assigned %d times, want %d", p, c, min(r, len(u)))
			}
		}
	})
}

// FuzzRendezvous: deterministic, independent of input order and
// duplicates, and every partition held min(replication, unique ids) times.
func FuzzRendezvous(f *testing.F) {
	f.Add("a,b,c", uint8(10), uint8(2), uint64(1))
	f.Add("node-1,node-2,node-1", uint8(3), uint8(1), uint64(7))
	f.Add("x", uint8(4), uint8(3), uint64(0))
	f.Add(",,\x00,\xff", uint8(5), uint8(2), uint64(9))
	f.Fuzz(func(t *testing.T, idList string, n8, r8 uint8, seed uint64) {
		ids := splitIDs(idList)
		if len(ids) > 64 {
			return
		}
		checkRendezvousInvariance(t, ids, int(n8)%32, int(r8)%8, rand.New(rand.NewPCG(seed, 0)))
	})
}
