package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestBuildRefusedWithoutSpace: on a data dir with 8 MiB of disk, a
// version of 12 MiB is refused before its build starts, with the reason
// in its status; the version already serving keeps serving, and the
// disk is left as it was.
func TestBuildRefusedWithoutSpace(t *testing.T) {
	disk := nodetest.SmallDisk(t, "8m")
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 2, 20)
	n := newTestNode(t, root, func(c *Config) { c.DataDir = filepath.Join(disk, "data") })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	before, err := blocks.FreeBytes(disk)
	if err != nil {
		t.Fatal(err)
	}

	big := make([]nodetest.Record, 1200)
	for i := range big {
		big[i] = nodetest.Record{Key: []byte(fmt.Sprint("key-", i)), Value: bytes.Repeat([]byte{byte(i)}, 10<<10)}
	}
	nodetest.WriteVersion(t, root, "d", "v2", 4, big)
	n.Refresh()
	waitFor(t, "v2 refused", func() bool {
		return n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()].State == StateError
	})
	st := n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()]
	if !strings.Contains(st.Error, "MiB are free") {
		t.Fatalf("v2: %+v", st)
	}
	if after, _ := blocks.FreeBytes(disk); after < before-64<<10 {
		t.Errorf("the refused build used %d KiB of the disk", (before-after)>>10)
	}
	if right, _ := readAllKeys(t, n, "d", "v1", 20); right != 20 || n.activeVersion("d") != "v1" {
		t.Fatalf("v1 serves %d of 20 keys, active %q", right, n.activeVersion("d"))
	}
	if _, err := os.Stat(filepath.Join(disk, "data", "dbs", "d", "v2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("v2's directory: %v", err)
	}
}
