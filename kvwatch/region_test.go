package kvwatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/kvwatch/region"
)

// TestRegion runs a KV whose embedded server is region ra of a hub: the
// server has the region's domain and is a leafnode of the hub, Versions is
// the mirror of the hub's bucket (its entries arrive, writes are refused),
// the nodes bucket is the region's own (the hub has none), and the hub
// check reports the hub.
func TestRegion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaf := freePort(t)
	o := &server.Options{ServerName: "hub", JetStreamDomain: "hub"}
	o.LeafNode.Host, o.LeafNode.Port, o.LeafNode.NoAdvertise = "127.0.0.1", leaf, true
	hub := natstest.RunServer(t, o)
	hjs := natstest.JetStream(t, hub.ClientURL())
	hkv, err := hjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucketName("test", Versions)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hkv.Put(ctx, "d", []byte("from the hub")); err != nil {
		t.Fatal(err)
	}

	c := testConfig(t)
	c.Region = region.DefaultConfig()
	c.Region.Name, c.Region.Hub = "ra", fmt.Sprintf("nats-leaf://127.0.0.1:%d", leaf)
	c.Region.HubCheckInterval = 100 * time.Millisecond
	k := startKV(t, c)
	waitFor(t, 20*time.Second, "the hub's entry in the mirror", hasValue(k, Versions, "d", "from the hub"))
	if _, err := hkv.Put(ctx, "d.pin.ra", []byte("pin")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "a later entry", hasValue(k, Versions, "d.pin.ra", "pin"))
	if _, err := k.Put(ctx, Versions, "d", []byte("x")); !errors.Is(err, ErrMirror) {
		t.Errorf("Put to the mirror: %v, want ErrMirror", err)
	}
	if err := k.Delete(ctx, Versions, "d"); !errors.Is(err, ErrMirror) {
		t.Errorf("Delete in the mirror: %v, want ErrMirror", err)
	}
	if err := k.Publish(ctx, Nodes, "n1", []byte("node")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "own entry", hasValue(k, Nodes, "n1", "node"))
	if _, err := hjs.KeyValue(ctx, bucketName("test", Nodes)); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("the hub has a nodes bucket: %v", err)
	}
	waitFor(t, 5*time.Second, "the hub check", func() error {
		if got := testutil.ToFloat64(k.met.hubConnected); got != 1 {
			return fmt.Errorf("hub_connected %v", got)
		}
		return nil
	})
	if e, _ := hkv.Get(ctx, "d"); string(e.Value()) != "from the hub" {
		t.Errorf("the hub's entry changed: %q", e.Value())
	}
}

// TestRegionWrongDomain: with [nats] url, a server whose JetStream domain
// is not the region's name stops Start with an error saying so.
func TestRegionWrongDomain(t *testing.T) {
	s := natstest.RunServer(t, &server.Options{JetStreamDomain: "elsewhere"})
	c := testConfig(t, s.ClientURL())
	c.Region = region.DefaultConfig()
	c.Region.Name = "ra"
	k := newKV(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Start(ctx); err == nil || !errors.Is(err, region.ErrInvalidConfig) {
		t.Fatalf("Start: %v, want the domain refused", err)
	}
}
