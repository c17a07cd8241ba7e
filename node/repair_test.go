package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/blocks"
)

// damagePartitions overwrites with random bytes, in place (the node's
// mappings see the change), the first 12 KiB of every 32 KiB of every
// partition file of db's version in dataDir past its two meta pages (of
// the page size the first says), and returns how many files. 32 KiB is a
// multiple of every layout's page size (4 KiB, or 32 KiB for s2-blocks
// partitions of 128 KiB of records or more), so that each damage takes a
// page's header.
func damagePartitions(t *testing.T, dataDir, db, version string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, "dbs", db, version, "p-*.bolt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("partition files of %s/%s: %v %v", db, version, files, err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	junk := make([]byte, 12<<10)
	for _, path := range files {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		var meta [28]byte // the page header, the magic, the version, the page size
		if _, err := f.ReadAt(meta[:], 0); err != nil {
			t.Fatal(err)
		}
		page := int64(binary.LittleEndian.Uint32(meta[24:]))
		for off := 2 * page; off+int64(len(junk)) <= st.Size(); off += 32 << 10 {
			for i := range junk {
				junk[i] = byte(r.Uint32())
			}
			if _, err := f.WriteAt(junk, off); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	return len(files)
}

// readAll reads every key of a Numbered version: how many answered right,
// and how many failed with blocks.ErrCorrupt; any other outcome fails.
func readAllKeys(t *testing.T, n *testNode, db, version string, keys int) (right, corrupt int) {
	t.Helper()
	for i := range keys {
		res, err := n.get(t, db, fmt.Sprintf("key-%d", i))
		switch {
		case errors.Is(err, blocks.ErrCorrupt):
			corrupt++
		case err != nil:
			t.Fatalf("key-%d: %v", i, err)
		case res.Found && res.Version == version && string(res.Value) == fmt.Sprintf("%s:%d", version, i):
			right++
		}
	}
	return right, corrupt
}

// TestRepairWhileServing damages the pages of a serving version's files:
// lookups that reach them fail with ErrCorrupt instead of crashing the
// process (bbolt panics on such pages), the version is counted, marked in
// the status and rebuilt from the source under its own name, and every
// key reads right again, without a restart.
func TestRepairWhileServing(t *testing.T) {
	const keys = 20000
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 4, keys)
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	if right, _ := readAllKeys(t, n, "d", "v1", keys); right != keys {
		t.Fatalf("before damage: %d of %d keys right", right, keys)
	}

	damagePartitions(t, n.data, "d", "v1")
	_, corrupt := readAllKeys(t, n, "d", "v1", keys)
	if corrupt == 0 {
		t.Fatal("no lookup met the damaged pages")
	}
	waitFor(t, "every key right again", func() bool {
		right, _ := readAllKeys(t, n, "d", "v1", keys)
		return right == keys
	})
	if got := testutil.ToFloat64(n.metrics.corrupt.WithLabelValues("d", "serving")); got != 1 {
		t.Errorf("spangle_corrupt_versions_total{where=serving} = %v, want 1", got)
	}
	st := n.Status().DBs["d"].Versions["v1"].Nodes[n.Name()]
	if st.State != StateActive || !st.Current {
		t.Errorf("after repair: %+v", st)
	}
}

// TestRepairAtOpen damages the files of a version while the node is
// stopped: the restarted node does not serve the damaged copy (the
// manifest's checksums catch it), counts it, rebuilds it and serves it.
func TestRepairAtOpen(t *testing.T) {
	const keys = 5000
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 4, keys)
	data := filepath.Join(t.TempDir(), "data")
	n := newTestNode(t, root, func(c *Config) { c.DataDir = data })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	if err := n.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	damagePartitions(t, data, "d", "v1")

	reg := prometheus.NewRegistry()
	n = newTestNode(t, root, func(c *Config) { c.DataDir = data; c.Registerer = reg })
	waitFor(t, "v1 active again", func() bool { return n.activeVersion("d") == "v1" })
	if right, corrupt := readAllKeys(t, n, "d", "v1", keys); right != keys || corrupt != 0 {
		t.Fatalf("after restart: %d of %d right, %d corrupt", right, keys, corrupt)
	}
	if got := testutil.ToFloat64(n.metrics.corrupt.WithLabelValues("d", "open")); got != 1 {
		t.Errorf("spangle_corrupt_versions_total{where=open} = %v, want 1", got)
	}
}

// TestRepairRetried: when rebuilding a damaged version fails (its source
// files are damaged too), the damaged copy keeps serving what it can and
// the repair is tried again after RetryFailedAfter, on the db loop's
// timer, until the source is whole again.
func TestRepairRetried(t *testing.T) {
	const keys = 20000
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 4, keys)
	n := newTestNode(t, root, func(c *Config) { c.RetryFailedAfter = 20 * time.Millisecond })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })

	sources, err := filepath.Glob(filepath.Join(root, "d", "v1", "part-*"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("source files: %v %v", sources, err)
	}
	for _, path := range sources {
		must0(t, os.WriteFile(path, []byte("not a SequenceFile"), 0o644))
	}
	damagePartitions(t, n.data, "d", "v1")
	if _, corrupt := readAllKeys(t, n, "d", "v1", keys); corrupt == 0 {
		t.Fatal("no lookup met the damaged pages")
	}
	waitFor(t, "the failed rebuild in the status", func() bool {
		st := n.Status().DBs["d"].Versions["v1"].Nodes[n.Name()]
		return strings.Contains(st.Error, "rebuilding failed")
	})

	writeVersion(t, root, "d", "v1", 4, keys)
	waitFor(t, "every key right again", func() bool {
		right, _ := readAllKeys(t, n, "d", "v1", keys)
		return right == keys
	})
}
