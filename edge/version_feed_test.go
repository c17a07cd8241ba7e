package edge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/kvcluster"
	"github.com/spangledb/spangle/node/source/objstore"
)

// TestObjectStoreChangeFeed: a node serving from a NATS Object Store picks
// up a version published while it runs through the versions bucket alone
// (no Refresh, no refresh period); a half-uploaded version is not picked up.
func TestObjectStoreChangeFeed(t *testing.T) {
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
	defer cancel()
	js, err := jetstream.New(kv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	obs, err := objstore.CreateBucket(ctx, js, "data", 1)
	if err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	publish := func(version string) {
		t.Helper()
		edgetest.WriteVersion(t, local, "db", version, 2, edgetest.Numbered(version, 20))
		if _, err := objstore.Publish(ctx, obs, filepath.Join(local, "db", version), "db", version, objstore.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
		b, _ := advert.Encode(advert.Version{DB: "db", Version: version})
		if _, err := kv.Put(ctx, kvwatch.Versions, advert.VersionKey("db"), b); err != nil {
			t.Fatal(err)
		}
	}
	publish("v1")

	src, err := objstore.New("data", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if err != nil {
		t.Fatal(err)
	}
	n := edgetest.StartNode(t, kv, src.String(), edgetest.Options{Node: func(c *node.Config) {
		c.OpenedSource = src
		c.RefreshPeriod = 0
	}})
	feed := kvcluster.NewVersionFeed(kv, n.Node, edgetest.Logger())
	feed.Start()
	t.Cleanup(feed.Stop)

	get := func(want string) func() error {
		return func() error {
			r, err := n.Get(ctx, "db", []byte("key-3"), node.GetOptions{})
			if err != nil {
				return err
			}
			if got := string(r.Value); got != want {
				return fmt.Errorf("key-3 = %q, want %q", got, want)
			}
			return nil
		}
	}
	edgetest.WaitFor(t, "v1 served", get("v1:3"))

	// Half-uploaded: a newer version's data without _SUCCESS. The listing
	// that finds v2 below sees it and must leave it alone.
	if _, err := obs.PutString(ctx, "db/v9/part-00000", "not a sequence file"); err != nil {
		t.Fatal(err)
	}

	publish("v2")
	edgetest.WaitFor(t, "v2 served after publish", get("v2:3"))
	if r, err := n.Get(ctx, "db", []byte("key-3"), node.GetOptions{}); err != nil || r.Version != "v2" {
		t.Fatalf("active version = %q, %v; want v2 (v9 has no _SUCCESS)", r.Version, err)
	}
}
