package kvwatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
)

// flood creates consumers on stream until JetStream refuses one for its
// consumer limit, and returns their names.
func flood(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var made []string
	for i := 0; ; i++ {
		name := fmt.Sprintf("flood%d", i)
		_, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckNonePolicy})
		if errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
			return made
		}
		if err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
		made = append(made, name)
	}
}

// TestWatchErrorConsumerLimit (issue 32): the nodes create their buckets'
// streams with MaxConsumers; once others have taken every consumer of a
// stream, a KV starting then cannot watch it: WatchError says so, naming
// the bucket and the server's refusal, while the KV is not ready; once
// the flood's consumers are deleted the watcher starts and WatchError is
// nil. It fails without WatchError (the node's readiness reads it).
func TestWatchErrorConsumerLimit(t *testing.T) {
	s := natstest.RunServer(t, nil)
	js := natstest.JetStream(t, s.ClientURL())
	cfg := testConfig(t, s.ClientURL())
	cfg.MaxConsumers = 6
	first := startKV(t, cfg)
	if err := first.WatchError(); err != nil {
		t.Fatalf("a KV that watches: WatchError = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range allBuckets {
		st, err := js.Stream(ctx, names.KVStream(bucketName("test", b)))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.MaxConsumers; got != 6 {
			t.Errorf("%s: MaxConsumers %d, want 6", b, got)
		}
	}
	stream := names.KVStream(bucketName("test", Versions))
	made := flood(t, js, stream)
	if len(made) >= 6 {
		t.Fatalf("%d consumers made beside the watcher: MaxConsumers not applied", len(made))
	}

	second := newKV(t, cfg)
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "WatchError", func() error {
		if second.WatchError() == nil {
			return errors.New("WatchError is nil")
		}
		return nil
	})
	if msg := second.WatchError().Error(); !strings.Contains(msg, bucketName("test", Versions)) || !strings.Contains(msg, "maximum consumers") {
		t.Errorf("WatchError = %q: want the bucket and the server's reason", msg)
	}
	select {
	case <-second.Ready():
		t.Fatal("ready without a watcher of the versions bucket")
	default:
	}

	for _, name := range made {
		if err := js.DeleteConsumer(ctx, stream, name); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, second)
	waitFor(t, 10*time.Second, "WatchError nil", func() error { return second.WatchError() })
}

// TestConsumerLimitOnExistingBuckets: a bucket created without the bound
// (by spangle publish, or before it existed), or with another, gets the
// configured one when a node starts; a limit below the consumers a stream
// has keeps them and refuses new ones (checked on a real server: the
// bound can be set on an existing stream).
func TestConsumerLimitOnExistingBuckets(t *testing.T) {
	s := natstest.RunServer(t, nil)
	js := natstest.JetStream(t, s.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := testConfig(t, s.ClientURL())
	cfg.MaxConsumers = 3
	for _, w := range watchedBuckets("test") {
		if _, err := js.CreateKeyValue(ctx, cfg.bucketConfig(w)); err != nil {
			t.Fatal(err)
		}
	}
	stream := names.KVStream(bucketName("test", Versions))
	var made []string
	for i := range 5 {
		name := fmt.Sprintf("early%d", i)
		if _, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckNonePolicy}); err != nil {
			t.Fatal(err)
		}
		made = append(made, name)
	}
	k := newKV(t, cfg)
	if err := k.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, b := range allBuckets {
		st, err := js.Stream(ctx, names.KVStream(bucketName("test", b)))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.MaxConsumers; got != 3 {
			t.Errorf("%s: MaxConsumers %d, want 3", b, got)
		}
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n < 5 {
		t.Errorf("%d consumers left on %s, want the 5 made before the bound", n, stream)
	}
	// The KV's own watcher of Versions cannot start until there is room.
	waitFor(t, 10*time.Second, "WatchError", func() error {
		if k.WatchError() == nil {
			return errors.New("WatchError is nil")
		}
		return nil
	})
	for _, name := range made {
		if err := js.DeleteConsumer(ctx, stream, name); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, k)
}
