package kvwatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node/nodetest"
)

// fill writes zeros to a file in dir until the disk is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("filler-%d", time.Now().UnixNano()))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Down to the last byte: 64 KiB writes, then 4 KiB, then single bytes.
	buf := make([]byte, 64<<10)
	for _, n := range []int{64 << 10, 4 << 10, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return p
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

// TestNoBucketCreatedOnFullDisk: a bucket whose stream is gone while the
// embedded server's disk is full is not created again until space is
// back. Without storeRoom the node asks the server to create it on the
// full disk, which fails ("error creating store for stream") or, when the
// write fails at another point, panics nats-server and the process.
func TestNoBucketCreatedOnFullDisk(t *testing.T) {
	disk := nodetest.SmallDisk(t, "16m")
	c := testConfig(t)
	c.EmbeddedStoreDir = filepath.Join(disk, "js")
	c.EmbeddedMinFree = 1 << 20
	k := startKV(t, c)
	var w watched
	for _, b := range k.buckets {
		if b.b == Versions {
			w = b
		}
	}
	js := k.ln.js
	filler := fill(t, disk)
	if err := js.DeleteStream(ctxT(t), names.KVStream(w.name)); err != nil {
		t.Fatal(err)
	}
	filler2 := fill(t, disk) // what the stream's files freed
	_, err := k.ensureBucket(ctxT(t), js, w, c.OpTimeout)
	if err == nil || !strings.Contains(err.Error(), "under embedded min free") {
		t.Fatalf("ensureBucket on a full disk: %v; want the min free refusal", err)
	}
	if !k.emb.srv.Load().Running() {
		t.Fatal("embedded server stopped")
	}
	for _, f := range []string{filler, filler2} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the bucket created again once space is back", func() error {
		_, err := k.ensureBucket(context.Background(), js, w, c.OpTimeout)
		return err
	})
	waitFor(t, 10*time.Second, "a write after space came back", func() error {
		_, err := k.Put(context.Background(), Versions, "after", []byte("x"))
		return err
	})
}
