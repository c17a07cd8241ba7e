package node

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/node/nodetest"
)

// TestSparkeyStreamedMetric serves sequins' own Sparkey test files (two
// partitions, sorted logs: both written straight from them) and a
// SequenceFile version in another db:
// spangle_build_streamed_partitions_total counts 2 for the first, 0 for
// the second. Without the count in the build's progress it is 0 for both.
func TestSparkeyStreamedMetric(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "spk", "v1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spk := filepath.Join("..", "blocks", "sparkey", "testdata", "sequins")
	for _, name := range []string{"part0-file0", "part0-file1", "part1"} {
		for _, ext := range []string{".spl", ".spi.sz"} {
			b, err := os.ReadFile(filepath.Join(spk, name+ext))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name+ext), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writeVersion(t, root, "seq", "v1", 2, 20)

	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	waitFor(t, "both dbs active", func() bool { return n.activeVersion("spk") == "v1" && n.activeVersion("seq") == "v1" })
	if r, err := n.get(t, "spk", "Dylan"); err != nil || string(r.Value) != "Thomas" {
		t.Fatalf("spk/Dylan: %q, %v", r.Value, err)
	}
	for db, want := range map[string]float64{"spk": 2, "seq": 0} {
		if got := nodetest.Metric(t, reg, "spangle_build_streamed_partitions_total", "db", db); got != want {
			t.Errorf("%s: %v partitions streamed, want %v", db, got, want)
		}
	}
}
