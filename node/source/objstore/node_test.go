package objstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/source/objstore"
)

// TestNodeBucketRecreatedEmpty: the source's bucket is deleted and
// re-created empty (nats obj add after a loss) while lookups run: the
// node keeps serving every db, marked missing; no lookup fails, no key is
// lost. Before, the first listing of the empty bucket removed every db.
func TestNodeBucketRecreatedEmpty(t *testing.T) {
	const keys = 30
	js, obs := startBucket(t)
	dir := t.TempDir()
	for _, db := range []string{"a", "b"} {
		nodetest.WriteVersion(t, dir, db, "v1", 2, nodetest.Numbered("v1", keys))
		if _, err := objstore.Publish(ctx(t), obs, filepath.Join(dir, db, "v1"), db, "v1", objstore.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := objstore.New("data", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.Source, cfg.OpenedSource = src.String(), src
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RefreshPeriod = 20 * time.Millisecond
	cfg.RequireSuccessFile = true
	cfg.Logger = nodetest.Logger()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	lookup := func(i int) error {
		db, k := []string{"a", "b"}[i%2], i/2
		r, err := n.Get(context.Background(), db, fmt.Appendf(nil, "key-%d", k), node.GetOptions{})
		if want := fmt.Sprintf("v1:%d", k); err != nil || !r.Found || string(r.Value) != want {
			return fmt.Errorf("%s key-%d: %+v, %v; want %s", db, k, r, err, want)
		}
		return nil
	}
	nodetest.WaitFor(t, 30*time.Second, "a and b serving", func() error {
		for i := range 2 * keys {
			if err := lookup(i); err != nil {
				return err
			}
		}
		return nil
	})
	lookups := nodetest.StartLookups(t, 2, 2*keys, lookup)

	if err := js.DeleteObjectStore(ctx(t), "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.CreateBucket(ctx(t), js, "data", 1); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, 30*time.Second, "a and b marked missing", nodetest.True(func() bool {
		st := n.Status()
		return st.DBs["a"].MissingSince != nil && st.DBs["b"].MissingSince != nil
	}))
	before := lookups.Done()
	nodetest.WaitFor(t, 30*time.Second, "more lookups", nodetest.True(func() bool { return lookups.Done() > before+100 }))
	done, failed, first := lookups.Stop()
	if failed != 0 {
		t.Fatalf("%d of %d lookups failed; the first: %v", failed, done, first)
	}
	for i := range 2 * keys {
		if err := lookup(i); err != nil {
			t.Fatalf("key lost: %v", err)
		}
	}
}
