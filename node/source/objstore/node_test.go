package objstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natstest"
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
		publishVersion(t, obs, dir, db, "v1", keys)
	}
	n := startNode(t, js, 20*time.Millisecond)
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

// publishVersion writes version of db, keys records (nodetest.Numbered)
// in two files, under dir and publishes it to obs.
func publishVersion(t *testing.T, obs jetstream.ObjectStore, dir, db, version string, keys int) {
	t.Helper()
	nodetest.WriteVersion(t, dir, db, version, 2, nodetest.Numbered(version, keys))
	if _, err := objstore.Publish(ctx(t), obs, filepath.Join(dir, db, version), db, version, objstore.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startNode starts a node on the bucket "data" of js, listing it every
// refresh (0: only when asked), and waits until it has loaded.
func startNode(t *testing.T, js jetstream.JetStream, refresh time.Duration) *node.Node {
	t.Helper()
	src, err := objstore.New("data", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.Source, cfg.OpenedSource = src.String(), src
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RefreshPeriod = refresh
	cfg.RequireSuccessFile = true
	cfg.Logger = nodetest.Logger()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	return n
}

// TestNodeAnnouncementListsOnce: one announcement, with four dbs each
// holding a new version, lists the bucket once. Before, the node's
// refresh listed it (ListDBs), then every db (ListVersions) and every
// build (ListFiles): 9 listings.
func TestNodeAnnouncementListsOnce(t *testing.T) {
	const keys = 10
	dbs := []string{"a", "b", "c", "d"}
	s := natstest.RunServer(t, nil)
	js := natstest.JetStream(t, s.ClientURL())
	obs, err := objstore.CreateBucket(ctx(t), js, "data", 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, db := range dbs {
		publishVersion(t, obs, dir, db, "v1", keys)
	}
	n := startNode(t, js, 0)
	serving := func(version string) func() error {
		return func() error {
			for _, db := range dbs {
				r, err := n.Get(context.Background(), db, []byte("key-1"), node.GetOptions{})
				if want := version + ":1"; err != nil || !r.Found || string(r.Value) != want {
					return fmt.Errorf("%s key-1: %+v, %v; want %s", db, r, err, want)
				}
			}
			return nil
		}
	}
	nodetest.WaitFor(t, 30*time.Second, "every db serving v1", serving("v1"))
	for _, db := range dbs {
		publishVersion(t, obs, dir, db, "v2", keys)
	}
	api := countAPI(t, s.ClientURL())
	n.Announce("a", "v2")
	nodetest.WaitFor(t, 30*time.Second, "every db serving v2", serving("v2"))
	listings, infos := api.counts(t)
	t.Logf("one announcement, %d dbs: %d listings, %d stream-info requests", len(dbs), listings, infos)
	if listings != 1 {
		t.Fatalf("one announcement listed the bucket %d times; want 1", listings)
	}
}

// apiCounts counts the JetStream API requests on the stream of the
// bucket "data", as a client of the server sees them.
type apiCounts struct {
	nc              *nats.Conn
	msgs            chan *nats.Msg
	listings, infos int64
}

// countAPI counts, from now, the listings of the bucket "data" (each
// creates an ordered consumer on its stream's metadata subjects) and its
// stream-info requests.
func countAPI(t *testing.T, url string) *apiCounts {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// Channel subscriptions: the connection's reader puts each message
	// in msgs before it reads the PONG of a later Flush, so counts sees
	// every request routed before it. (A callback runs on a goroutine of
	// its own, maybe after Flush returned: a count read then missed a
	// listing under load.)
	c := &apiCounts{nc: nc, msgs: make(chan *nats.Msg, 4096)}
	for _, subj := range []string{
		"$JS.API.CONSUMER.CREATE.OBJ_data",
		"$JS.API.CONSUMER.CREATE.OBJ_data.>",
		"$JS.API.STREAM.INFO.OBJ_data",
	} {
		if _, err := nc.ChanSubscribe(subj, c.msgs); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// counts returns the requests counted so far: those the server routed
// before this call.
func (c *apiCounts) counts(t *testing.T) (listings, infos int64) {
	t.Helper()
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.nc.LastError(); err != nil {
		t.Fatal(err) // a slow consumer: requests lost
	}
	for {
		select {
		case m := <-c.msgs:
			c.count(m)
		default:
			return c.listings, c.infos
		}
	}
}

// count counts m: a listing's consumer reads the metadata subjects; a
// download's reads an object's chunks.
func (c *apiCounts) count(m *nats.Msg) {
	if strings.HasPrefix(m.Subject, "$JS.API.STREAM.INFO.") {
		c.infos++
		return
	}
	var req struct {
		Config jetstream.ConsumerConfig `json:"config"`
	}
	if json.Unmarshal(m.Data, &req) == nil && req.Config.FilterSubject == "$O.data.M.>" {
		c.listings++
	}
}
