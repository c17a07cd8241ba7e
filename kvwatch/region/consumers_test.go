package region

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// TestEnsureHubConsumers: the hub's consumers for a region are made once
// (a second run makes none), refused before their stream exists, and one
// of the same name delivering elsewhere is an error, not reused.
func TestEnsureHubConsumers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := natstest.RunServer(t, &server.Options{JetStreamDomain: "hub"})
	js := natstest.JetStream(t, s.ClientURL())
	streams := MirroredStreams("c", []string{"data"})
	if _, err := EnsureHubConsumers(ctx, js, "ra", streams); !errors.Is(err, ErrNoStream) {
		t.Fatalf("before the buckets exist: %v, want ErrNoStream", err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "spangle_c_versions"}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"}); err != nil {
		t.Fatal(err)
	}
	if created, err := EnsureHubConsumers(ctx, js, "ra", streams); err != nil || len(created) != 2 {
		t.Fatalf("created %v, %v: want both", created, err)
	}
	if created, err := EnsureHubConsumers(ctx, js, "ra", streams); err != nil || len(created) != 0 {
		t.Fatalf("again: created %v, %v: want none", created, err)
	}
	other := HubConsumer("rb", "OBJ_data")
	other.DeliverSubject = "elsewhere"
	if _, err := js.CreatePushConsumer(ctx, "OBJ_data", other); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureHubConsumers(ctx, js, "rb", streams); err == nil {
		t.Error("a consumer of rb's name delivering elsewhere was taken")
	}
	if err := EnsureRegionsBucket(ctx, js, "c"); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRegionsBucket(ctx, js, "c"); err != nil {
		t.Fatalf("again: %v", err)
	}
}

// TestMirrorSourceSwitch: a mirror made without the hub's consumers is not
// taken for one with them, nor the reverse (a mirror's source cannot
// change): the node's error says to delete it.
func TestMirrorSourceSwitch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := natstest.RunServer(t, &server.Options{JetStreamDomain: "ra"})
	js := natstest.JetStream(t, s.ClientURL())
	plain := Config{Name: "ra", HubDomain: "hub"}
	durable := plain
	durable.HubConsumers = true
	if err := plain.EnsureObjectMirror(ctx, js, "data", 1); err != nil {
		t.Fatal(err)
	}
	if err := durable.EnsureObjectMirror(ctx, js, "data", 1); !errors.Is(err, ErrNotMirror) {
		t.Errorf("a plain mirror taken with hub_consumers: %v", err)
	}
	// No hub here: a new mirror through the hub's consumer is not made
	// before the hub resets that consumer (resetSource).
	if _, err := EnsureVersionsMirror(ctx, js, durable.VersionsMirror("spangle_c_versions", "", 1), "hub"); !errors.Is(err, ErrHub) {
		t.Errorf("a mirror through the hub's consumer made without the hub: %v", err)
	}
	if _, err := js.CreateKeyValue(ctx, durable.VersionsMirror("spangle_c_versions", "", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureVersionsMirror(ctx, js, durable.VersionsMirror("spangle_c_versions", "", 1), "hub"); err != nil {
		t.Errorf("the same, there: %v", err)
	}
	if _, err := EnsureVersionsMirror(ctx, js, plain.VersionsMirror("spangle_c_versions", "", 1), "hub"); !errors.Is(err, ErrNotMirror) {
		t.Errorf("a mirror through the hub's consumer taken without hub_consumers: %v", err)
	}
	st, err := js.Stream(ctx, "KV_spangle_c_versions")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config.Mirror.Consumer; c == nil || c.Name != ConsumerName("ra") || c.DeliverSubject != DeliverSubject("ra", "KV_spangle_c_versions") {
		t.Errorf("the mirror's consumer: %+v", c)
	}
}
