package assign

import (
	"fmt"
	"slices"
	"testing"
)

// sequinsReference is sequins' algorithm written out literally (ids
// sorted and unique, the toAssign list dealt round-robin), to check
// Sequential against.
func sequinsReference(shardIDs []string, self string, n, replication int) []int {
	ids := members(shardIDs, self)
	var toAssign []int
	for p := 0; p < n; p++ {
		for range replication {
			toAssign = append(toAssign, p)
		}
	}
	var out []int
	for i, p := range toAssign {
		if ids[i%len(ids)] == self && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func TestSequential(t *testing.T) {
	tests := []struct {
		name        string
		ids         []string
		n, r        int
		want        map[string][]int
		description string
	}{
		{
			name: "sequins 3 nodes replication 2",
			ids:  []string{"1", "2", "3"}, n: 5, r: 2,
			want: map[string][]int{"1": {0, 1, 3, 4}, "2": {0, 2, 3}, "3": {1, 2, 4}},
		},
		{
			name: "sequins 5 nodes replication 3",
			ids:  []string{"1", "2", "3", "4", "5"}, n: 5, r: 3,
			want: map[string][]int{"1": {0, 1, 3}, "2": {0, 2, 3}, "3": {0, 2, 4}, "4": {1, 2, 4}, "5": {1, 3, 4}},
		},
		{
			name: "input order and duplicates do not matter",
			ids:  []string{"3", "1", "2", "1", "3", "3"}, n: 5, r: 2,
			want: map[string][]int{"1": {0, 1, 3, 4}, "2": {0, 2, 3}, "3": {1, 2, 4}},
		},
		{
			name: "string order: 10 sorts before 2",
			ids:  []string{"2", "10"}, n: 3, r: 1,
			want: map[string][]int{"10": {0, 2}, "2": {1}},
		},
		{
			name: "replication above nodes: everything, once",
			ids:  []string{"a", "b"}, n: 3, r: 5,
			want: map[string][]int{"a": {0, 1, 2}, "b": {0, 1, 2}},
		},
		{
			name: "replication equals nodes",
			ids:  []string{"a", "b", "c"}, n: 2, r: 3,
			want: map[string][]int{"a": {0, 1}, "b": {0, 1}, "c": {0, 1}},
		},
		{
			name: "single node",
			ids:  []string{"solo"}, n: 4, r: 2,
			want: map[string][]int{"solo": {0, 1, 2, 3}},
		},
		{
			name: "more nodes than copies: some get nothing",
			ids:  []string{"1", "2", "3", "4"}, n: 1, r: 2,
			want: map[string][]int{"1": {0}, "2": {0}, "3": nil, "4": nil},
		},
		{
			name: "no partitions",
			ids:  []string{"1", "2"}, n: 0, r: 2,
			want: map[string][]int{"1": nil, "2": nil},
		},
		{
			name: "replication 0",
			ids:  []string{"1", "2"}, n: 3, r: 0,
			want: map[string][]int{"1": nil, "2": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for self, want := range tt.want {
				got := Sequential(tt.ids, self, tt.n, tt.r)
				if !slices.Equal(got, want) {
					t.Errorf("Sequential(%q, %q, %d, %d) = %v, want %v", tt.ids, self, tt.n, tt.r, got, want)
				}
			}
		})
	}
}

// TestSequentialSelfCounted: a node missing from the list counts itself,
// as sequins did ("peers plus self"): it gets what it would get listed.
func TestSequentialSelfCounted(t *testing.T) {
	ids := []string{"1", "2", "3"}
	got := Sequential(ids, "4", 5, 2)
	want := Sequential(append(slices.Clone(ids), "4"), "4", 5, 2)
	if !slices.Equal(got, want) || len(got) == 0 {
		t.Fatalf("unlisted self: got %v, want %v (non-empty)", got, want)
	}
	// The listed nodes' view without "4" differs: a caller must include
	// every member for the nodes to agree.
	if slices.Equal(Sequential(ids, "1", 5, 2), Sequential(append(slices.Clone(ids), "4"), "1", 5, 2)) {
		t.Fatal("membership change did not change the assignment")
	}
}

func TestSequentialMatchesReference(t *testing.T) {
	for l := 1; l <= 7; l++ {
		ids := make([]string, l)
		for i := range ids {
			ids[i] = fmt.Sprint(i + 1)
		}
		for n := 0; n <= 12; n++ {
			for r := 1; r <= 9; r++ {
				for _, self := range ids {
					got, want := Sequential(ids, self, n, r), sequinsReference(ids, self, n, r)
					if !slices.Equal(got, want) {
						t.Fatalf("Sequential(%v, %s, %d, %d) = %v, reference %v", ids, self, n, r, got, want)
					}
				}
			}
		}
	}
}

func TestSequentialDoesNotModifyInput(t *testing.T) {
	ids := []string{"3", "1", "2", "1"}
	Sequential(ids, "2", 5, 2)
	if !slices.Equal(ids, []string{"3", "1", "2", "1"}) {
		t.Fatalf("ids modified: %v", ids)
	}
}

func TestByName(t *testing.T) {
	for _, name := range []string{NameSequential, NameRendezvous} {
		f, err := ByName(name)
		if err != nil || f == nil {
			t.Fatalf("ByName(%q) = %v, %v", name, f, err)
		}
	}
	if _, err := ByName("ring"); err == nil {
		t.Fatal("ByName(ring) succeeded")
	}
}

func BenchmarkSequential(b *testing.B) {
	for _, n := range []int{64, 1024, 16384} {
		ids := make([]string, 30)
		for i := range ids {
			ids[i] = fmt.Sprint(i + 1)
		}
		b.Run(fmt.Sprintf("nodes=30/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				Sequential(ids, "17", n, 3)
			}
		})
	}
}
