package kvwatch

import "testing"

func TestBucketNames(t *testing.T) {
	tests := []struct {
		cluster string
		b       Bucket
		want    string
	}{
		{"spangle", Nodes, "spangle_spangle_nodes"},
		{"prod-eu", Partitions, "spangle_prod-eu_partitions"},
		{"a.b c/d", Versions, "spangle_a_b_c_d_versions"},
		{"ünï", Nodes, "spangle__n__nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.cluster, func(t *testing.T) {
			if got := bucketName(tt.cluster, tt.b); got != tt.want {
				t.Errorf("bucketName(%q, %v) = %q, want %q", tt.cluster, tt.b, got, tt.want)
			}
		})
	}
	if Bucket(9).String() != "Bucket(9)" || Bucket(9).valid() {
		t.Error("invalid bucket")
	}
	if !Nodes.TTL() || !Partitions.TTL() || Versions.TTL() {
		t.Error("TTL buckets are Nodes and Partitions")
	}
}
