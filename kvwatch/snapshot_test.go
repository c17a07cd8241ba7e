package kvwatch

import (
	"fmt"
	"github.com/spangledb/spangle/kvwatch/names"
	"testing"
)

func TestSnapshotRange(t *testing.T) {
	s := &Snapshot{}
	s.buckets[Partitions] = map[string]Entry{
		"db.v1.n1": {Value: []byte("a")},
		"db.v1.n2": {Value: []byte("b")},
		"db.v2.n1": {Value: []byte("c")},
		"dc.v1.n1": {Value: []byte("d")},
	}
	tests := []struct {
		prefix string
		limit  int
		want   string
	}{
		{"", 0, "[db.v1.n1 db.v1.n2 db.v2.n1 dc.v1.n1]"},
		{names.PartitionPrefix("db", "v1"), 0, "[db.v1.n1 db.v1.n2]"},
		{"db.", 0, "[db.v1.n1 db.v1.n2 db.v2.n1]"},
		{"db.", 2, "[db.v1.n1 db.v1.n2]"},
		{"zz", 0, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			var got []string
			s.Range(Partitions, tt.prefix, func(key string, _ Entry) bool {
				got = append(got, key)
				return tt.limit == 0 || len(got) < tt.limit
			})
			if fmt.Sprint(got) != tt.want {
				t.Errorf("Range(%q) = %v, want %s", tt.prefix, got, tt.want)
			}
		})
	}
	keys := s.Keys(Partitions)
	keys[0] = "changed"
	if s.Keys(Partitions)[0] != "db.v1.n1" {
		t.Error("Keys returned the snapshot's own slice")
	}
	if s.Len(Partitions) != 4 || s.Len(Nodes) != 0 || s.Len(Bucket(5)) != 0 {
		t.Error("Len")
	}
	if _, ok := s.Get(Bucket(5), "x"); ok {
		t.Error("Get on an invalid bucket")
	}
}

func TestSnapshotZero(t *testing.T) {
	var s Snapshot
	if s.Connected() || !s.Stale() || s.Len(Nodes) != 0 || len(s.Keys(Versions)) != 0 || s.Revision(Nodes) != 0 {
		t.Error("zero snapshot: want empty, disconnected and stale")
	}
	if _, ok := s.Get(Nodes, "n"); ok {
		t.Error("zero snapshot has a key")
	}
	s.Range(Nodes, "", func(string, Entry) bool { t.Error("zero snapshot ranges"); return true })
}
