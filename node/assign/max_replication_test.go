package assign

import (
	"slices"
	"testing"
)

func TestMaxReplicationFilter(t *testing.T) {
	remote := map[int]int{0: 0, 1: 1, 2: 2, 3: 3}
	count := func(p int) int { return remote[p] }
	tests := []struct {
		name     string
		assigned []int
		r, max   int
		want     []int
	}{
		{"off: max 0 (sequins default)", []int{0, 1, 2, 3}, 2, 0, []int{0, 1, 2, 3}},
		{"off: max below replication", []int{0, 1, 2, 3}, 3, 2, []int{0, 1, 2, 3}},
		{"max equals replication", []int{0, 1, 2, 3}, 2, 2, []int{0, 1}},
		{"max above replication", []int{0, 1, 2, 3}, 2, 3, []int{0, 1, 2}},
		{"order kept", []int{3, 0, 2, 1}, 1, 2, []int{0, 1}},
		{"nothing assigned", nil, 2, 2, nil},
		{"everything dropped", []int{2, 3}, 2, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.assigned)
			got := MaxReplicationFilter(in, count, tt.r, tt.max)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if !slices.Equal(in, tt.assigned) {
				t.Errorf("assigned modified: %v", in)
			}
		})
	}
}

func TestMaxReplicationFilterOffDoesNotCall(t *testing.T) {
	called := false
	MaxReplicationFilter([]int{0, 1}, func(int) int { called = true; return 0 }, 2, 0)
	if called {
		t.Fatal("remoteReplicas called with the rule off")
	}
}
