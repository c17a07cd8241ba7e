package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStatusMetrics checks the gauges derived from Ready and Status: every
// state of every db is reported (the zeros are what an alert on "no
// active version" needs), the replication of the active version, and
// readiness turning 0 on Drain.
func TestStatusMetrics(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "1", 2, 20)
	// Db e has one version, and it cannot be built.
	writeVersion(t, root, "e", "1", 1, 5)
	if err := os.WriteFile(filepath.Join(root, "e", "1", "part-00000"), []byte("not a SequenceFile"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	<-n.Loaded()
	waitFor(t, "e/1 to fail", func() bool { return n.state("e", "1") == StateError })

	names := []string{"spangle_ready", "spangle_db_versions", "spangle_db_underreplicated_partitions",
		"spangle_db_missing_partitions", "spangle_db_target_replication"}
	want := `
# HELP spangle_db_missing_partitions Partitions of the db's active version on this node that no live node holds.
# TYPE spangle_db_missing_partitions gauge
spangle_db_missing_partitions{db="d"} 0
# HELP spangle_db_target_replication Replicas each partition of the db's active version should have (1 for a node alone).
# TYPE spangle_db_target_replication gauge
spangle_db_target_replication{db="d"} 1
# HELP spangle_db_underreplicated_partitions Partitions of the db's active version on this node held by fewer live nodes than the target replication (cluster mode; 0 for a node alone).
# TYPE spangle_db_underreplicated_partitions gauge
spangle_db_underreplicated_partitions{db="d"} 0
# HELP spangle_db_versions Versions of the db on this node, by this node's state (BUILDING, AVAILABLE, ACTIVE, REMOVING, ERROR, REFUSED: refused by the db's guards, waiting for an operator); every state is reported, 0 included.
# TYPE spangle_db_versions gauge
spangle_db_versions{db="d",state="ACTIVE"} 1
spangle_db_versions{db="d",state="AVAILABLE"} 0
spangle_db_versions{db="d",state="BUILDING"} 0
spangle_db_versions{db="d",state="ERROR"} 0
spangle_db_versions{db="d",state="REFUSED"} 0
spangle_db_versions{db="d",state="REMOVING"} 0
spangle_db_versions{db="e",state="ACTIVE"} 0
spangle_db_versions{db="e",state="AVAILABLE"} 0
spangle_db_versions{db="e",state="BUILDING"} 0
spangle_db_versions{db="e",state="ERROR"} 1
spangle_db_versions{db="e",state="REFUSED"} 0
spangle_db_versions{db="e",state="REMOVING"} 0
# HELP spangle_ready 1 while the node is ready (GET /readyz answers 200: initial load done, not draining, the cluster's buckets watched, something to serve), else 0.
# TYPE spangle_ready gauge
spangle_ready 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	if err := n.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP spangle_ready 1 while the node is ready (GET /readyz answers 200: initial load done, not draining, the cluster's buckets watched, something to serve), else 0.
# TYPE spangle_ready gauge
spangle_ready 0
`), "spangle_ready"); err != nil {
		t.Fatal(err)
	}
}
