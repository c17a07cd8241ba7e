package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRendezvousGolden pins the ranking: it must never change, or nodes of
// different releases would disagree on who holds what.
func TestRendezvousGolden(t *testing.T) {
	if w := weight("", 0); w != 0x34c96acdcadb1bbb { // XXH64 of 8 zero bytes
		t.Errorf(`weight("", 0) = %#x`, w)
	}
	if w := weight("node-a", 1<<40); w != 0x1536bce05d792160 {
		t.Errorf(`weight("node-a", 1<<40) = %#x`, w)
	}
	ids := []string{"node-a", "node-b", "node-c", "node-d", "node-e"}
	golden := []struct {
		p    int
		want []string
	}{
		{0, []string{"node-e", "node-d", "node-b", "node-c", "node-a"}},
		{1, []string{"node-e", "node-c", "node-a", "node-b", "node-d"}},
		{2, []string{"node-c", "node-a", "node-b", "node-e", "node-d"}},
		{3, []string{"node-d", "node-a", "node-e", "node-c", "node-b"}},
		{4, []string{"node-c", "node-b", "node-a", "node-e", "node-d"}},
		{5, []string{"node-b", "node-a", "node-d", "node-c", "node-e"}},
	}
	for _, g := range golden {
		if got := Order(ids, g.p); !slices.Equal(got, g.want) {
			t.Errorf("Order(%d) = %q, want %q", g.p, got, g.want)
		}
	}
	want := map[string][]int{
		"node-a": {2, 3, 5, 6, 7, 8}, "node-b": {4, 5, 8}, "node-c": {1, 2, 4, 6, 9},
		"node-d": {0, 3, 7, 9}, "node-e": {0, 1},
	}
	for self, w := range want {
		if got := Rendezvous(ids, self, 10, 2); !slices.Equal(got, w) {
			t.Errorf("Rendezvous(%s) = %v, want %v", self, got, w)
		}
	}
}

func nodeIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("node-%02d", i)
	}
	return ids
}

// table returns every (partition, owner) pair of the rendezvous assignment.
func table(ids []string, n, r int) map[[2]string]bool {
	pairs := map[[2]string]bool{}
	for _, self := range ids {
		for _, p := range Rendezvous(ids, self, n, r) {
			pairs[[2]string{fmt.Sprint(p), self}] = true
		}
	}
	return pairs
}

func TestRendezvousConsistentWithOwners(t *testing.T) {
	ids := nodeIDs(7)
	for _, r := range []int{1, 2, 3, 7, 9} {
		for p := 0; p < 50; p++ {
			owners := Owners(ids, p, r)
			if len(owners) != min(r, len(ids)) {
				t.Fatalf("Owners(%d, r=%d) = %v", p, r, owners)
			}
			for _, id := range ids {
				held := slices.Contains(Rendezvous(ids, id, 50, r), p)
				if held != slices.Contains(owners, id) {
					t.Fatalf("p=%d r=%d id=%s: Rendezvous says %v, Owners %v", p, r, id, held, owners)
				}
			}
		}
	}
}

// TestRendezvousMovement: adding an 11th node to 10 moves about 1/11 of
// the assignments, all of them to the new node; removing a node moves only
// the assignments it held.
func TestRendezvousMovement(t *testing.T) {
	const n = 2000
	for _, r := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("replication=%d", r), func(t *testing.T) {
			ten := nodeIDs(10)
			eleven := append(slices.Clone(ten), "node-new")
			before, after := table(ten, n, r), table(eleven, n, r)

			moved := 0
			for pair := range after {
				if !before[pair] {
					moved++
					if pair[1] != "node-new" {
						t.Fatalf("join: %v appeared on an old node", pair)
					}
				}
			}
			frac := float64(moved) / float64(n*r)
			if frac < 0.7/11 || frac > 1.3/11 {
				t.Fatalf("join moved %.4f of the assignments, want about %.4f", frac, 1.0/11)
			}
			t.Logf("join moved %d of %d assignments (%.4f, ideal %.4f)", moved, n*r, frac, 1.0/11)

			// Removing node-03: only its pairs go, each to one other node.
			nine := slices.DeleteFunc(slices.Clone(ten), func(id string) bool { return id == "node-03" })
			gone := table(nine, n, r)
			for pair := range before {
				if !gone[pair] && pair[1] != "node-03" {
					t.Fatalf("leave: %v moved but node-03 did not hold it", pair)
				}
			}
			for pair := range gone {
				if !before[pair] {
					// A replacement: its partition must have been held by node-03.
					if !before[[2]string{pair[0], "node-03"}] {
						t.Fatalf("leave: %v is new but node-03 did not hold partition %s", pair, pair[0])
					}
				}
			}
		})
	}
}

func TestRendezvousBalance(t *testing.T) {
	ids := nodeIDs(10)
	const n, r = 5000, 2
	for _, id := range ids {
		got := len(Rendezvous(ids, id, n, r))
		if want := n * r / len(ids); got < want*8/10 || got > want*12/10 {
			t.Errorf("%s holds %d partitions, want about %d", id, got, want)
		}
	}
}

func TestRendezvousEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		ids  []string
		self string
		n, r int
		want []int
	}{
		{"alone", nil, "x", 3, 2, []int{0, 1, 2}},
		{"replication above members", []string{"a", "b"}, "a", 3, 5, []int{0, 1, 2}},
		{"no partitions", []string{"a", "b"}, "a", 0, 1, nil},
		{"replication 0", []string{"a", "b"}, "a", 3, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Rendezvous(tt.ids, tt.self, tt.n, tt.r); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := Owners([]string{"a"}, 0, 0); got != nil {
		t.Errorf("Owners r=0 = %v", got)
	}
	if got := Order(nil, 3); len(got) != 0 {
		t.Errorf("Order(nil) = %v", got)
	}
	if got := Order([]string{"b", "a", "b", "a"}, 1); len(got) != 2 {
		t.Errorf("Order with duplicates = %v", got)
	}
}

// checkRendezvousInvariance checks that Rendezvous, Order and Owners
// depend only on the set of ids.
func checkRendezvousInvariance(t *testing.T, ids []string, n, r int, rng *rand.Rand) {
	t.Helper()
	shuffled := slices.Clone(ids)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if len(ids) > 0 {
		shuffled = append(shuffled, ids[rng.IntN(len(ids))]) // a duplicate
	}
	for p := range n {
		if a, b := Order(ids, p), Order(shuffled, p); !slices.Equal(a, b) {
			t.Fatalf("Order(%d) differs: %q vs %q", p, a, b)
		}
		if a, b := Owners(ids, p, r), Owners(ids, p, r); !slices.Equal(a, b) {
			t.Fatalf("Owners(%d) not deterministic: %q vs %q", p, a, b)
		}
	}
	counts := make([]int, n)
	u := slices.Compact(slices.Sorted(slices.Values(ids)))
	for _, self := range u {
		a, b := Rendezvous(ids, self, n, r), Rendezvous(shuffled, self, n, r)
		if !slices.Equal(a, b) {
			t.Fatalf("Rendezvous(%q) differs with input order: %v vs %v", self, a, b)
		}
		for _, p := range a {
			counts[p]++
		}
	}
	if len(u) > 0 && r > 0 {
		for p, c := range counts {
			if c != min(r, len(u)) {
				t.Fatalf("partition %d held %d times, want %d (ids %q, r %d)", p, c, min(r, len(u)), ids, r)
			}
		}
	}
}

func TestRendezvousInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		ids := nodeIDs(1 + rng.IntN(12))
		checkRendezvousInvariance(t, ids, 1+rng.IntN(40), 1+rng.IntN(5), rng)
	}
}

func BenchmarkRendezvous(b *testing.B) {
	for _, n := range []int{64, 1024, 16384} {
		ids := nodeIDs(30)
		b.Run(fmt.Sprintf("nodes=30/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				Rendezvous(ids, "node-17", n, 3)
			}
		})
	}
	b.Run("Order/nodes=30", func(b *testing.B) {
		ids := nodeIDs(30)
		for b.Loop() {
			Order(ids, 12345)
		}
	})
}
