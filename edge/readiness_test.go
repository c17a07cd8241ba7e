package edge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node"
)

// TestReadyzConsumerFlood (issue 32): consumers made by someone else fill
// a KV stream's consumer limit, so a node starting then cannot watch the
// bucket: its /readyz is 503 saying why, spangle_ready is 0 and its
// status gives the reason; once the consumers are deleted its watcher
// starts and it is ready again. Before, /readyz said ok while the node
// could not follow pins or the cluster. It fails without the readiness
// check.
func TestReadyzConsumerFlood(t *testing.T) {
	const limit = 8
	cfg := edgetest.NATSConfig(t)
	cfg.MaxConsumers = limit
	first := edgetest.StartKV(t, cfg)
	nc := edgetest.Connect(t, first.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
	defer cancel()
	stream := names.KVStream(names.KVBucket(edgetest.Cluster, names.Versions))
	var flood []string
	for i := 0; ; i++ {
		name := fmt.Sprintf("flood%d", i)
		_, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckNonePolicy})
		if errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if flood = append(flood, name); len(flood) > limit {
			t.Fatalf("%d consumers made: the stream's limit is not %d", len(flood), limit)
		}
	}

	// A second node, on the same server, starts now.
	second := edgetest.NATSConfig(t, first.ClientURL())
	second.MaxConsumers = limit
	kv, err := kvwatch.New(second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
		defer cancel()
		kv.Shutdown(ctx)
	})
	if err := kv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 2, edgetest.Numbered("v1", 10))
	reg := prometheus.NewRegistry()
	n := edgetest.StartNode(t, kv, root, edgetest.Options{Node: func(c *node.Config) { c.Registerer = reg }})

	readyz := func() (int, string) {
		resp, err := http.Get(n.HTTPURL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	edgetest.WaitFor(t, "not ready", func() error {
		if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "watch:") || !strings.Contains(body, "maximum consumers") {
			return fmt.Errorf("/readyz %d %q", code, body)
		}
		return nil
	})
	if got := gaugeValue(t, reg, "spangle_ready"); got != 0 {
		t.Errorf("spangle_ready = %v while not ready", got)
	}
	if st := n.Status(); !strings.Contains(st.WatchError, names.KVBucket(edgetest.Cluster, names.Versions)) {
		t.Errorf("status watch_error %q: want the bucket", st.WatchError)
	}

	for _, name := range flood {
		if err := js.DeleteConsumer(ctx, stream, name); err != nil {
			t.Fatal(err)
		}
	}
	edgetest.WaitFor(t, "ready again", func() error {
		if code, body := readyz(); code != http.StatusOK {
			return fmt.Errorf("/readyz %d %q", code, body)
		}
		return nil
	})
	if got := gaugeValue(t, reg, "spangle_ready"); got != 1 {
		t.Errorf("spangle_ready = %v once ready", got)
	}
	if st := n.Status(); st.WatchError != "" {
		t.Errorf("status watch_error %q once watching", st.WatchError)
	}
}

// gaugeValue returns the value of the unlabelled gauge name in reg.
func gaugeValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
