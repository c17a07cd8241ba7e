package edge_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/kvcluster"
)

// TestPinFeed: pin entries written to a real versions bucket reach the
// node (a rollback by version, then by "before"), an entry that does not
// decode (both fields, a bad name) is ignored, and deleting the entry
// unpins.
func TestPinFeed(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"v1", "v2", "v3"} {
		edgetest.WriteVersion(t, root, "d", v, 2, edgetest.Numbered(v, 10))
	}
	n := startPlainNode(t, root)
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	feed := kvcluster.NewPinFeed(kv, n, edgetest.Logger())
	feed.Start()
	defer feed.Stop()

	nc := edgetest.Connect(t, kv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bucket, err := js.KeyValue(ctx, "spangle_"+edgetest.Cluster+"_versions")
	if err != nil {
		t.Fatal(err)
	}
	put := func(key, value string) {
		t.Helper()
		if _, err := bucket.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	serves := func(version string) func() error { return servesVersion(n, "d", version) }
	edgetest.WaitFor(t, "v3", serves("v3"))

	put(advert.PinKey("d"), `{"db":"d","version":"v1"}`)
	edgetest.WaitFor(t, "pinned to v1", serves("v1"))
	put(advert.PinKey("d"), `{"db":"d","before":"v3"}`)
	edgetest.WaitFor(t, "pinned to the newest before v3", serves("v2"))

	// Invalid entries change nothing: the last valid pin of d is replaced
	// by an invalid one, which counts as no pin at all.
	put(advert.PinKey("e"), `{"db":"e","version":"v1","before":"v2"}`)
	put(advert.PinKey("d"), `{"db":"d","version":"../v1"}`)
	edgetest.WaitFor(t, "an invalid pin ignored", serves("v3"))
	if pins := n.Pins(); len(pins) != 0 {
		t.Errorf("pins from invalid entries: %v", pins)
	}

	put(advert.PinKey("d"), `{"db":"d","version":"v1"}`)
	edgetest.WaitFor(t, "pinned to v1 again", serves("v1"))
	if err := bucket.Purge(ctx, advert.PinKey("d")); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, "unpinned", serves("v3"))
}
