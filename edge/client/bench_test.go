package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
)

// Benchmark data: benchKeys records of 16-byte keys and 100-byte values in
// 16 partitions, as in FACTS.md's request-reply figures.
const (
	benchKeys  = 50_000
	benchParts = 16
	benchBatch = 100
)

var (
	benchValue   = bytes.Repeat([]byte("v"), 100)
	benchKeyList = func() [][]byte {
		keys := make([][]byte, benchKeys)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "key-%012d", i)
		}
		return keys
	}()
)

// benchOp is one kind of request a benchmark makes: do makes one request
// of keys keys.
type benchOp struct {
	name string
	keys int
	do   func(r *rand.Rand) error
}

// setupBench starts one node with embedded NATS serving the benchmark
// data, as spangle serve runs it (GC at 400%), and returns the operations
// to compare, all over one requester connection (TCP) to that server:
//
//	echo     nc.Request to a bare responder answering 100 bytes, on the
//	         node's own connection (the front door's): the baseline
//	get      client.Get through spangle.<c>.get.<db> (any node)
//	part     client.Get through spangle.<c>.part.<db>.<v>.<p>
//	mget100  client.GetMany of 100 keys through spangle.<c>.mget.<db>
func setupBench(b *testing.B) []benchOp { return setupBenchOn(b, false) }

// setupBenchOn is setupBench; with accounts, the embedded server has users
// (kvwatch's NATS accounts, docs/SECURITY.md): the echo responder and its
// requester are in the cluster's account, the lookups come from a client
// login, answered in its own account by the node's responder login
// (kvwatch.KV.LookupConn; its map reads cross service imports).
func setupBenchOn(b *testing.B, accounts bool) []benchOp {
	b.Helper()
	return setupBenchWith(b, benchSetup{accounts: accounts})
}

// benchSetup shapes setupBenchWith.
type benchSetup struct {
	accounts bool                    // setupBenchOn's
	node     func(*node.Config)      // adjusts the node's configuration; nil: the defaults
	key      func(*rand.Rand) []byte // the key of a lookup; nil: uniform over the benchmark's keys
}

// setupBenchWith is setupBenchOn, shaped by s.
func setupBenchWith(b *testing.B, s benchSetup) []benchOp {
	b.Helper()
	accounts := s.accounts
	key := s.key
	if key == nil {
		key = func(r *rand.Rand) []byte { return benchKeyList[r.IntN(benchKeys)] }
	}
	old := debug.SetGCPercent(200) // spangle serve's default
	b.Cleanup(func() { debug.SetGCPercent(old) })
	root := b.TempDir()
	recs := make([]edgetest.Record, benchKeys)
	for i := range recs {
		recs[i] = edgetest.Record{Key: benchKeyList[i], Value: benchValue}
	}
	edgetest.WriteVersion(b, root, "bench", "1", benchParts, recs)
	kcfg := edgetest.NATSConfig(b)
	var nodeLogin, clientLogin []nats.Option
	if accounts {
		kcfg.EmbeddedUsers = []kvwatch.User{
			{Name: "bench-node", Password: "pw", Role: kvwatch.RoleNode},
			{Name: "bench-client", Password: "pw", Role: kvwatch.RoleClient},
		}
		nodeLogin = []nats.Option{nats.UserInfo("bench-node", "pw")}
		clientLogin = []nats.Option{nats.UserInfo("bench-client", "pw")}
	}
	kv := edgetest.StartKV(b, kcfg)
	edgetest.StartNode(b, kv, root, edgetest.Options{Node: s.node})
	echo, err := kv.Conn().QueueSubscribe("bench.echo", "bench.echo", func(m *nats.Msg) {
		m.Respond(benchValue) //nolint:errcheck // benchmark
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { echo.Unsubscribe() }) //nolint:errcheck // benchmark

	nc := edgetest.Connect(b, kv.ClientURL(), nodeLogin...)
	cc := nc
	if accounts {
		cc = edgetest.Connect(b, kv.ClientURL(), clientLogin...)
	}
	cfg := client.DefaultConfig()
	cfg.Conn = cc
	cfg.ClusterName = edgetest.Cluster
	partClient, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := partClient.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { partClient.Close(context.Background()) }) //nolint:errcheck // benchmark
	// Not started: without a cluster map, every Get takes the get subject.
	getClient, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	edgetest.WaitFor(b, "part subjects in the map and answering", func() error {
		if m := partClient.Map(); len(m.Partitions) == 0 || m.Versions["bench"].Version != "1" {
			return fmt.Errorf("not in the map yet")
		}
		_, err := cc.Request("spangle."+edgetest.Cluster+".part.bench.1.0", benchKeyList[0], time.Second)
		return err
	})

	ctx := context.Background()
	get := func(c *client.Client) func(r *rand.Rand) error {
		return func(r *rand.Rand) error {
			res, err := c.Get(ctx, "bench", key(r))
			if err == nil && !res.Found {
				err = fmt.Errorf("not found")
			}
			return err
		}
	}
	return []benchOp{
		{"echo", 1, func(r *rand.Rand) error {
			_, err := nc.Request("bench.echo", key(r), 5*time.Second)
			return err
		}},
		{"get", 1, get(getClient)},
		{"part", 1, get(partClient)},
		{"mget100", benchBatch, func(r *rand.Rand) error {
			keys := make([][]byte, benchBatch)
			for i := range keys {
				keys[i] = key(r)
			}
			rs, err := partClient.GetMany(ctx, "bench", keys)
			if err == nil && !rs[benchBatch-1].Found {
				err = fmt.Errorf("not found")
			}
			return err
		}},
	}
}

// BenchmarkNATS measures each operation (see setupBench) at 1 and 64
// concurrent requesters, one sub-benchmark each, reporting req/s (and
// keys/s for batches) and p50/p99 latencies in µs.
func BenchmarkNATS(b *testing.B) {
	ops := setupBench(b)
	for _, conc := range []int{1, 64} {
		for _, op := range ops {
			b.Run(fmt.Sprintf("%s/c=%d", op.name, conc), func(b *testing.B) {
				// conc goroutines share b.N requests (RunParallel would
				// start at least GOMAXPROCS of them).
				var mu sync.Mutex
				var lat []time.Duration
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := rand.New(rand.NewPCG(rand.Uint64(), 1))
						own := make([]time.Duration, 0, 1024)
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							if err := op.do(r); err != nil {
								b.Error(err)
								return
							}
							own = append(own, time.Since(t0))
						}
						mu.Lock()
						lat = append(lat, own...)
						mu.Unlock()
					}()
				}
				wg.Wait()
				b.StopTimer()
				s := summarize(lat, b.Elapsed())
				b.ReportMetric(s.perSecond, "req/s")
				if op.keys > 1 {
					b.ReportMetric(s.perSecond*float64(op.keys), "keys/s")
				}
				b.ReportMetric(s.p50, "p50-µs")
				b.ReportMetric(s.p99, "p99-µs")
			})
		}
	}
}

// BenchmarkNATSPaired runs the operations in alternating 25 ms slices, one
// round (b.N rounds) giving each one slice, so that every operation sees
// the same machine: a noisy neighbour slows all of them alike. It reports
// each one's req/s (keys/s for batches) and the ratios the targets are
// about: part/echo (≥ 0.85), get/echo, and mget100-keys/part (≥ 10).
func BenchmarkNATSPaired(b *testing.B) {
	ops := setupBench(b)
	const slice = 25 * time.Millisecond
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			count := make([]int64, len(ops))
			busy := make([]time.Duration, len(ops))
			for range b.N {
				for i, op := range ops {
					n, d, err := runSlice(conc, slice, op.do)
					if err != nil {
						b.Fatal(err)
					}
					count[i] += n
					busy[i] += d
				}
			}
			rate := map[string]float64{}
			for i, op := range ops {
				rate[op.name] = float64(count[i]) * float64(op.keys) / busy[i].Seconds()
				unit := "req/s"
				if op.keys > 1 {
					unit = "keys/s"
				}
				b.ReportMetric(rate[op.name], op.name+"-"+unit)
			}
			b.ReportMetric(rate["part"]/rate["echo"], "part/echo")
			b.ReportMetric(rate["get"]/rate["echo"], "get/echo")
			b.ReportMetric(rate["mget100"]/rate["part"], "mget100/part-keys")
		})
	}
}

// runSlice runs do from conc goroutines for d and returns the requests
// done and the time taken.
func runSlice(conc int, d time.Duration, do func(r *rand.Rand) error) (int64, time.Duration, error) {
	var n atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	start := time.Now()
	deadline := start.Add(d)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for time.Now().Before(deadline) {
				if err := do(r); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		return 0, 0, *err
	}
	return n.Load(), time.Since(start), nil
}

type latencySummary struct {
	perSecond, p50, p99 float64
}

// summarize returns the throughput and the percentiles, in µs, of lat.
func summarize(lat []time.Duration, elapsed time.Duration) latencySummary {
	if len(lat) == 0 || elapsed <= 0 {
		return latencySummary{}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e3
	}
	return latencySummary{perSecond: float64(len(lat)) / elapsed.Seconds(), p50: pct(0.50), p99: pct(0.99)}
}

// BenchmarkNATSAccountsPaired runs the lookups of two nodes in
// alternating 25 ms slices, as BenchmarkNATSPaired does: one whose
// embedded server has no users (one account), one whose server has users,
// with the lookups coming from a client login and answered in its
// account. Every other round runs the slices in reverse order, so that
// neither node of a pair always goes first. It reports each one's req/s
// and the ratios <op>-acct/<op>.
func BenchmarkNATSAccountsPaired(b *testing.B) {
	plain, acct := setupBenchOn(b, false), setupBenchOn(b, true)
	ops := make([]benchOp, 0, 2*len(plain))
	for i := range plain {
		if plain[i].name == "echo" {
			continue
		}
		a := acct[i]
		a.name += "-acct"
		ops = append(ops, plain[i], a)
	}
	const slice = 25 * time.Millisecond
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			count := make([]int64, len(ops))
			busy := make([]time.Duration, len(ops))
			for round := range b.N {
				for j := range ops {
					i := j
					if round%2 == 1 {
						i = len(ops) - 1 - j
					}
					n, d, err := runSlice(conc, slice, ops[i].do)
					if err != nil {
						b.Fatal(err)
					}
					count[i] += n
					busy[i] += d
				}
			}
			rate := map[string]float64{}
			for i, op := range ops {
				rate[op.name] = float64(count[i]) * float64(op.keys) / busy[i].Seconds()
				b.ReportMetric(rate[op.name], op.name+"-per-s")
			}
			for _, op := range plain {
				if op.name != "echo" {
					b.ReportMetric(rate[op.name+"-acct"]/rate[op.name], op.name+"-acct/"+op.name)
				}
			}
		})
	}
}
