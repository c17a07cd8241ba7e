package kvwatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// TestWatchErrorConsumerLimit: a KV whose bucket's stream has no room for
// another consumer (its limit taken by others) cannot watch it: WatchError
// says so, naming the bucket and the server's refusal, while the KV is not
// ready; once there is room the watcher starts and WatchError is nil. It
// fails without WatchError (the readiness of issue 32 reads it).
func TestWatchErrorConsumerLimit(t *testing.T) {
	s := natstest.RunServer(t, nil)
	js := natstest.JetStream(t, s.ClientURL())
	first := startKV(t, testConfig(t, s.ClientURL()))
	if err := first.WatchError(); err != nil {
		t.Fatalf("a KV that watches: WatchError = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := "KV_" + bucketName("test", Versions)
	setMaxConsumers := func(n func(have int) int) {
		t.Helper()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := info.Config
		cfg.MaxConsumers = n(info.State.Consumers)
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatalf("update %s: %v", stream, err)
		}
	}
	// No room beyond the consumers the stream has (first's watcher).
	setMaxConsumers(func(have int) int { return have })

	second := newKV(t, testConfig(t, s.ClientURL()))
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

	setMaxConsumers(func(int) int { return -1 })
	waitReady(t, second)
	waitFor(t, 10*time.Second, "WatchError nil", func() error { return second.WatchError() })
}
