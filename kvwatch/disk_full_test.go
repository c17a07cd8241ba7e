package kvwatch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/node/nodetest"
)

// fill writes zeros to a file in dir until the disk is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			return p
		}
	}
}

// TestEmbeddedDiskFull: the embedded server's store fills its disk, so
// JetStream turns itself off; once space is back the KV writes again
// without a restart of the process.
func TestEmbeddedDiskFull(t *testing.T) {
	disk := nodetest.SmallDisk(t, "16m")
	c := testConfig(t)
	c.EmbeddedStoreDir = filepath.Join(disk, "js")
	c.EmbeddedRecoverCheck = 100 * time.Millisecond
	c.EmbeddedMinFree = 1 << 20
	k := startKV(t, c)
	ctx := ctxT(t)
	if _, err := k.Put(ctx, Versions, "before", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, disk)
	var failed error
	for i := 0; i < 2000 && failed == nil; i++ {
		_, failed = k.Put(ctx, Versions, fmt.Sprint("db", i), make([]byte, 4<<10))
	}
	if failed == nil {
		t.Fatal("writes never failed on a full disk")
	}
	t.Logf("write on a full disk: %v; JetStream enabled: %v", failed, k.emb.srv.Load().JetStreamEnabled())
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, 10*time.Second, "a write after space came back", func() error {
		_, err := k.Put(ctx, Versions, "after", []byte("x"))
		return err
	})
	t.Logf("writes again %v after space came back", time.Since(start))
	if got := testutil.ToFloat64(k.met.embeddedRestarts); got != 1 {
		t.Errorf("spangle_kvwatch_embedded_restarts_total = %v, want 1", got)
	}
	// The entry written before the disk filled is still there, and the
	// new one reaches the snapshot.
	waitFor(t, 3*time.Second, "entry written after", hasValue(k, Versions, "after", "x"))
	waitFor(t, 3*time.Second, "entry written before", hasValue(k, Versions, "before", "kept"))
}
