package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
)

// TestForgedClusterEntries puts what a hostile NATS client could into
// the cluster's KV buckets: a versions entry and partitions entries
// claiming 1e18 and 1e8 partitions, a 65,536-partition entry for a
// version nobody built, and a partitions entry of a node that does not
// exist. The node's status, dashboard and health stay cheap (no
// allocation from the forged counts, no panic), lookups keep working, and
// a client keeps routing.
func TestForgedClusterEntries(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 4, edgetest.Numbered("v1", 40))
	nodes := startCluster(t, clusterOpts{roots: []string{root}, replication: 1, minReplication: 1})
	waitActive(t, nodes, "d", "v1")
	n := nodes[0]

	nc := edgetest.Connect(t, n.KV.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put := func(bucket, key, value string) {
		t.Helper()
		kv, err := js.KeyValue(ctx, "spangle_"+edgetest.Cluster+"_"+bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	all := make([]string, 0, 65536)
	for p := range 65536 {
		all = append(all, fmt.Sprint(p))
	}
	put("nodes", "evil", `{"id":"evil","shard_id":"evil","state":"SERVING","address":"127.0.0.1:1"}`)
	put("versions", "d", `{"db":"d","version":"v9","num_partitions":1000000000000000000,"partitioner":"sequins"}`)
	put("partitions", "d.v1.evil", `{"partitions":[0],"num_partitions":100000000,"partitioner":"sequins","active":true}`)
	put("partitions", "d.v2.evil", `{"partitions":[],"num_partitions":1000000000000000000,"partitioner":"sequins"}`)
	put("partitions", "d.v3.evil", `{"partitions":[`+strings.Join(all, ",")+`],"num_partitions":65536,"partitioner":"sequins","active":true}`)
	put("partitions", "d.v1.ghost", `{"partitions":[0,1,2,3],"num_partitions":4,"partitioner":"sequins","active":true}`)

	// The view counts what it ignores: the two entries of impossible
	// partition counts.
	reg := prometheus.NewRegistry()
	if err := nodes[0].view.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, "the invalid entries counted", func() error {
		if got := counterOf(t, reg, "spangle_cluster_invalid_entries", "bucket", "partitions"); got != 2 {
			return fmt.Errorf("spangle_cluster_invalid_entries{bucket=partitions} = %v, want 2", got)
		}
		return nil
	})

	hc := &http.Client{Timeout: 10 * time.Second}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, path := range []string{"/healthz", "/", "/d/", "/readyz"} {
		for _, accept := range []string{"application/json", "text/html"} {
			req, _ := http.NewRequest("GET", n.HTTPURL+path, nil)
			req.Header.Set("Accept", accept)
			start := time.Now()
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if d := time.Since(start); resp.StatusCode != 200 || d > 3*time.Second { // a page built for 10^18 partitions would never finish
				t.Errorf("%s (%s): %d in %v: %.200s", path, accept, resp.StatusCode, d, body)
			}
			if strings.Contains(string(body), "ghost") || strings.Contains(string(body), "v3") {
				t.Errorf("%s (%s) shows a forged entry: %.300s", path, accept, body)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 64<<20 {
		t.Errorf("status pages allocated %d MiB", grew>>20)
	}

	res, err := n.Get(ctx, "d", []byte("key-7"), node.GetOptions{})
	if err != nil || string(res.Value) != "v1:7" {
		t.Fatalf("lookup: %q %v", res.Value, err)
	}

	c := startClient(t, nc)
	r, err := c.Get(ctx, "d", []byte("key-7"))
	if err != nil || string(r.Value) != "v1:7" {
		t.Fatalf("client lookup: %q %v", r.Value, err)
	}
	for _, p := range c.Map().Partitions {
		if p.NodeID == "ghost" || p.NumPartitions > 65536 {
			t.Errorf("client map holds a forged entry: %s %s %d", p.NodeID, p.Version, p.NumPartitions)
		}
	}
}

// startClient starts a client of the test cluster on nc, closed at
// cleanup.
func startClient(t *testing.T, nc *nats.Conn) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Conn = nc
	cfg.ClusterName = edgetest.Cluster
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}
