package assign

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestHeal(t *testing.T) {
	live := nodeIDs(6)
	// rank[p][i] is the i-th node of partition p's rendezvous order.
	rank := func(p, i int) string { return Order(live, p)[i] }
	const after = time.Minute
	long := 2 * after

	tests := []struct {
		name  string
		self  func() string
		in    HealInput // Self and Live are filled in
		want  []int
		notes string
	}{
		{
			name: "fully replicated: nothing",
			self: func() string { return rank(0, 2) },
			in: HealInput{Partitions: []PartitionState{
				{Holders: []string{rank(0, 0), rank(0, 1)}, Under: 0},
			}},
		},
		{
			name: "under, but not for heal_after yet",
			self: func() string { return rank(0, 1) },
			in: HealInput{Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}, Under: after - time.Second},
			}},
		},
		{
			name: "under long enough: the first non-holder loads it",
			self: func() string { return rank(0, 1) },
			in: HealInput{Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}, Under: after},
			}},
			want: []int{0},
		},
		{
			name: "one missing: the second non-holder waits",
			self: func() string { return rank(0, 2) },
			in: HealInput{Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}, Under: long},
			}},
		},
		{
			name: "holders ahead in the order are skipped",
			self: func() string { return rank(0, 2) },
			in: HealInput{Replication: 3, Partitions: []PartitionState{
				{Holders: []string{rank(0, 1), rank(0, 0)}, Under: long},
			}},
			want: []int{0},
		},
		{
			name: "two missing: the first two non-holders load it",
			self: func() string { return rank(0, 2) },
			in: HealInput{Replication: 3, Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}, Under: long},
			}},
			want: []int{0},
		},
		{
			name: "two missing: the third non-holder waits",
			self: func() string { return rank(0, 3) },
			in: HealInput{Replication: 3, Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}, Under: long},
			}},
		},
		{
			name: "self holds it already",
			self: func() string { return rank(0, 3) },
			in: HealInput{Partitions: []PartitionState{
				{Holders: []string{rank(0, 3)}, Under: long},
			}},
		},
		{
			name: "dead holders do not count",
			self: func() string { return rank(0, 1) },
			in: HealInput{Partitions: []PartitionState{
				{Holders: []string{"gone-1", "gone-2", rank(0, 0)}, Under: long},
			}},
			want: []int{0},
		},
		{
			name: "duplicate holder counts once",
			self: func() string { return rank(0, 1) },
			in: HealInput{Partitions: []PartitionState{
				{Holders: []string{rank(0, 0), rank(0, 0)}, Under: long},
			}},
			want: []int{0},
		},
		{
			name: "a holder behind self does not make room",
			self: func() string { return rank(0, 1) },
			in: HealInput{Replication: 2, Partitions: []PartitionState{
				{Holders: []string{rank(0, 5)}, Under: long},
			}},
		},
		{
			name: "lost partition: the first two load it",
			self: func() string { return rank(0, 1) },
			in: HealInput{Partitions: []PartitionState{
				{Holders: nil, Under: long},
			}},
			want: []int{0},
		},
		{
			name: "already healing here: not again",
			self: func() string { return rank(0, 1) },
			in: HealInput{Healing: []int{0}, MaxConcurrent: 5, Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}, Under: long},
			}},
		},
		{
			name: "bound reached by work in progress",
			self: func() string { return rank(1, 0) },
			in: HealInput{Healing: []int{7, 8}, MaxConcurrent: 2, Partitions: []PartitionState{
				{}, {Holders: nil, Under: long},
			}},
		},
		{
			name: "heal_after 0: at once",
			self: func() string { return rank(0, 1) },
			in: HealInput{HealAfter: -1, Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}},
			}},
			want: []int{0},
		},
		{
			name: "healing off",
			self: func() string { return rank(0, 1) },
			in: HealInput{MaxConcurrent: -1, Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}, Under: long},
			}},
		},
		{
			name: "replication above live nodes: every live node",
			self: func() string { return rank(0, 5) },
			in: HealInput{Replication: 10, Partitions: []PartitionState{
				{Holders: []string{rank(0, 0)}, Under: long},
			}},
			want: []int{0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Self, in.Live = tt.self(), live
			if in.Replication == 0 {
				in.Replication = 2
			}
			if in.HealAfter == 0 {
				in.HealAfter = after
			} else if in.HealAfter < 0 {
				in.HealAfter = 0
			}
			if in.MaxConcurrent == 0 {
				in.MaxConcurrent = 4
			}
			if got := Heal(in); !slices.Equal(got, tt.want) {
				t.Errorf("Heal = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHealPriority: with a bound of 2, the partitions with the fewest
// live replicas go first, then the ones under longest.
func TestHealPriority(t *testing.T) {
	live := []string{"self"}
	parts := []PartitionState{
		{Holders: []string{"x"}, Under: time.Hour},     // 1 replica, under longest
		{Holders: nil, Under: time.Minute},             // lost
		{Holders: []string{"x"}, Under: 2 * time.Hour}, // 1 replica, under longer still
		{Holders: nil, Under: time.Minute},             // lost, higher number
	}
	got := Heal(HealInput{
		Self: "self", Live: append(live, "x"), Replication: 2,
		HealAfter: time.Second, MaxConcurrent: 3, Partitions: parts,
	})
	// Two nodes: "self" is the only non-holder, so it takes everything,
	// in priority order, bounded to 3.
	if want := []int{1, 3, 2}; !slices.Equal(got, want) {
		t.Fatalf("Heal = %v, want %v", got, want)
	}
}

// TestHealClusterWide runs Heal on every live node over one snapshot: each
// under-replicated partition is picked up by exactly as many nodes as it
// misses (or every non-holder when there are fewer), and never by a
// holder.
func TestHealClusterWide(t *testing.T) {
	live := nodeIDs(8)
	const n, r = 200, 3
	parts := make([]PartitionState, n)
	for p := range parts {
		// Holders: the rendezvous owners, some of them dead or gone.
		owners := Owners(append(slices.Clone(live), "dead-1", "dead-2"), p, r)
		parts[p] = PartitionState{Holders: owners[:p%(r+1)%len(owners)], Under: time.Hour}
	}
	picked := make([]int, n)
	for _, self := range live {
		got := Heal(HealInput{
			Self: self, Live: live, Replication: r, HealAfter: time.Minute,
			MaxConcurrent: n, Partitions: parts,
		})
		for _, p := range got {
			if slices.Contains(parts[p].Holders, self) {
				t.Fatalf("%s holds %d but heals it", self, p)
			}
			picked[p]++
		}
	}
	for p, st := range parts {
		liveHeld := 0
		for _, h := range st.Holders {
			if slices.Contains(live, h) {
				liveHeld++
			}
		}
		want := min(r-liveHeld, len(live)-liveHeld)
		if picked[p] != want {
			t.Fatalf("partition %d (live holders %d): picked by %d nodes, want %d", p, liveHeld, picked[p], want)
		}
	}
}

func TestHealDoesNotModifyInput(t *testing.T) {
	in := HealInput{
		Self: "b", Live: []string{"c", "b", "a"}, Replication: 2, MaxConcurrent: 2,
		Healing: []int{3, 1}, Partitions: []PartitionState{{Holders: []string{"c", "a"}}},
	}
	Heal(in)
	if !slices.Equal(in.Live, []string{"c", "b", "a"}) || !slices.Equal(in.Healing, []int{3, 1}) ||
		!slices.Equal(in.Partitions[0].Holders, []string{"c", "a"}) {
		t.Fatalf("input modified: %+v", in)
	}
}

func BenchmarkHeal(b *testing.B) {
	live := nodeIDs(30)
	for _, n := range []int{64, 4096} {
		parts := make([]PartitionState, n)
		for p := range parts {
			parts[p] = PartitionState{Holders: Owners(live, p, 2)[:1], Under: time.Hour}
		}
		b.Run(fmt.Sprintf("nodes=30/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				Heal(HealInput{Self: "node-07", Live: live, Replication: 2, HealAfter: time.Minute, MaxConcurrent: 4, Partitions: parts})
			}
		})
	}
}
