package cluster

import (
	"testing"
	"time"

	"github.com/spangledb/spangle/node/advert"
)

// TestSnapshotJoinsRuns: a partitions entry counts only with a node entry
// of the run that wrote it: an earlier run's (left by a restarted node,
// alive for PartitionsTTL) and a node-less one are dropped.
func TestSnapshotJoinsRuns(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	nodes := []advert.Node{{ID: "a", Started: t1}, {ID: "b", Started: t1}, {ID: "c"}}
	parts := []advert.Partitions{
		{DB: "d", Version: "v1", NodeID: "a", NodeStarted: t1, Partitions: []int{0}},
		{DB: "d", Version: "v0", NodeID: "a", NodeStarted: t0, Partitions: []int{1}}, // the earlier run's
		{DB: "d", Version: "v1", NodeID: "b", Partitions: []int{1}},                  // no run named: kept
		{DB: "d", Version: "v1", NodeID: "c", NodeStarted: t0, Partitions: []int{2}}, // node names no run: kept
		{DB: "d", Version: "v1", NodeID: "gone", NodeStarted: t1, Partitions: []int{3}},
	}
	s := NewSnapshot(nodes, parts, false)
	var got []string
	for _, h := range s.Holders("d", "v1") {
		got = append(got, h.NodeID)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("holders of d.v1: %v, want [a b c]", got)
	}
	if hs := s.Holders("d", "v0"); len(hs) != 0 {
		t.Errorf("holders of d.v0 (an earlier run's entry): %v, want none", hs)
	}
}
