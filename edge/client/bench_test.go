package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/edge/internal/nodetest"
)

// Benchmark data: benchKeys records of 16-byte keys and 100-byte values
// in 16 partitions, as in FACTS.md's request-reply figures.
const (
	benchKeys  = 50_000
	benchParts = 16
	benchBatch = 100
)

func benchKey(i int) []byte { return benchKeyList[i] }

var benchKeyList = func() [][]byte {
	keys := make([][]byte, benchKeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%012d", i))
	}
	return keys
}()

var benchValue = bytes.Repeat([]byte("v"), 100)

// benchSetup is one node with embedded NATS serving the benchmark data, a
// requester connection over TCP, and an echo responder on the node's own
// connection (the baseline: same connections, same payload sizes).
type benchSetup struct {
	nc     *nats.Conn
	client *client.Client
}

func setupBench(b *testing.B) *benchSetup {
	b.Helper()
	root := b.TempDir()
	recs := make([]nodetest.Record, benchKeys)
	for i := range recs {
		recs[i] = nodetest.Record{Key: benchKey(i), Value: benchValue}
	}
	nodetest.WriteVersion(b, root, "bench", "1", benchParts, recs)
	kv := nodetest.StartKV(b, nodetest.NATSConfig(b))
	nodetest.StartNode(b, kv, root, nodetest.Options{})
	// The echo responder shares the node's connection, as the front door
	// does, and answers with a value as long.
	echo, err := kv.Conn().QueueSubscribe("bench.echo", "bench.echo", func(m *nats.Msg) {
		m.Respond(benchValue) //nolint:errcheck // benchmark
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { echo.Unsubscribe() }) //nolint:errcheck // benchmark
	hdr := nats.Header{"Spangle-Status": {"200"}, "Spangle-Version": {"1"}, "Content-Type": {"application/octet-stream"}}
	echoh, err := kv.Conn().QueueSubscribe("bench.echoh", "bench.echoh", func(m *nats.Msg) {
		m.RespondMsg(&nats.Msg{Header: hdr, Data: benchValue}) //nolint:errcheck // benchmark
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { echoh.Unsubscribe() }) //nolint:errcheck // benchmark
	nc := nodetest.Connect(b, kv.ClientURL())
	cfg := client.DefaultConfig()
	cfg.Conn = nc
	cfg.ClusterName = nodetest.Cluster
	c, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(context.Background()) }) //nolint:errcheck // benchmark
	select {
	case <-c.Ready():
	case <-time.After(nodetest.Timeout):
		b.Fatal("client map not ready")
	}
	// Wait until the part subjects answer.
	nodetest.WaitFor(b, "part subjects", func() error {
		if m := c.Map(); len(m.Partitions) == 0 {
			return fmt.Errorf("no partitions entry yet")
		}
		_, err := nc.Request("spangle."+nodetest.Cluster+".part.bench.1.0", benchKey(0), time.Second)
		return err
	})
	return &benchSetup{nc: nc, client: c}
}

// BenchmarkNATS compares lookups through the NATS front door with a bare
// echo responder, at 1 and 64 concurrent requesters. Each sub-benchmark
// reports req/s (keys/s for batches) and p50/p99 latencies in µs.
//
//	echo      nc.Request to a responder answering 100 bytes
//	get       client.Get through spangle.<c>.get.<db> (any node)
//	part      client.Get through spangle.<c>.part.<db>.<v>.<p> (the client partitions)
//	mget100   client.GetMany of 100 keys through spangle.<c>.mget.<db>
func BenchmarkNATS(b *testing.B) {
	env := setupBench(b)
	ctx := context.Background()
	getClient := getOnlyClient(b, env.nc)
	ops := []struct {
		name string
		keys int // per request
		do   func(r *rand.Rand) error
	}{
		{"echo", 1, func(r *rand.Rand) error {
			_, err := env.nc.Request("bench.echo", benchKey(r.IntN(benchKeys)), 5*time.Second)
			return err
		}},
		{"echoh", 1, func(r *rand.Rand) error {
			m, err := env.nc.Request("bench.echoh", benchKey(r.IntN(benchKeys)), 5*time.Second)
			if err == nil && m.Header.Get("Spangle-Status") != "200" {
				err = fmt.Errorf("bad status")
			}
			return err
		}},
		{"rawpart", 1, func(r *rand.Rand) error {
			m, err := env.nc.Request("spangle.test.part.bench.1.0", benchKey(r.IntN(benchKeys)), 5*time.Second)
			if err == nil && m.Header.Get("Spangle-Status") == "" {
				err = fmt.Errorf("bad status")
			}
			return err
		}},
		{"rawpart16", 1, func(r *rand.Rand) error {
			m, err := env.nc.Request(fmt.Sprintf("spangle.test.part.bench.1.%d", r.IntN(16)), benchKey(r.IntN(benchKeys)), 5*time.Second)
			if err == nil && m.Header.Get("Spangle-Status") == "" {
				err = fmt.Errorf("bad status")
			}
			return err
		}},
		{"rawpartctx", 1, func(r *rand.Rand) error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			m, err := env.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: "spangle.test.part.bench.1.0", Data: benchKey(r.IntN(benchKeys))})
			if err == nil && m.Header.Get("Spangle-Status") == "" {
				err = fmt.Errorf("bad status")
			}
			return err
		}},
		{"get", 1, func(r *rand.Rand) error {
			res, err := getClient.Get(ctx, "bench", benchKey(r.IntN(benchKeys)))
			if err == nil && !res.Found {
				err = fmt.Errorf("not found")
			}
			return err
		}},
		{"part", 1, func(r *rand.Rand) error {
			res, err := env.client.Get(ctx, "bench", benchKey(r.IntN(benchKeys)))
			if err == nil && !res.Found {
				err = fmt.Errorf("not found")
			}
			return err
		}},
		{"mget100", benchBatch, func(r *rand.Rand) error {
			keys := make([][]byte, benchBatch)
			for i := range keys {
				keys[i] = benchKey(r.IntN(benchKeys))
			}
			rs, err := env.client.GetMany(ctx, "bench", keys)
			if err == nil && !rs[benchBatch-1].Found {
				err = fmt.Errorf("not found")
			}
			return err
		}},
	}
	for _, conc := range []int{1, 64} {
		for _, op := range ops {
			b.Run(fmt.Sprintf("%s/c=%d", op.name, conc), func(b *testing.B) {
				runConcurrent(b, conc, op.keys, op.do)
			})
		}
	}
}

// getOnlyClient returns a client that is not started, so that it has no
// cluster map and every Get takes the get subject.
func getOnlyClient(b *testing.B, nc *nats.Conn) *client.Client {
	cfg := client.DefaultConfig()
	cfg.Conn = nc
	cfg.ClusterName = nodetest.Cluster
	c, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c // not started: the map stays empty
}

// runConcurrent runs do from conc goroutines until b.N requests are done,
// and reports throughput and latency percentiles.
func runConcurrent(b *testing.B, conc, keysPerOp int, do func(r *rand.Rand) error) {
	b.SetParallelism((conc + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var mu sync.Mutex
	var all []time.Duration
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		lat := make([]time.Duration, 0, 1024)
		for pb.Next() {
			t0 := time.Now()
			if err := do(r); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(t0))
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	if keysPerOp > 1 {
		b.ReportMetric(float64(b.N*keysPerOp)/elapsed.Seconds(), "keys/s")
	}
}
