package client_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/spangledb/spangle/node"
)

// zipfTheta is the skew of the Zipf loads, spangle-bench's.
const zipfTheta = 0.99

// zipfCDF is the cumulative distribution of key ranks under Zipf
// (zipfTheta) over the benchmark's keys.
var zipfCDF = func() []float64 {
	cdf := make([]float64, benchKeys)
	sum := 0.0
	for i := range cdf {
		sum += 1 / math.Pow(float64(i+1), zipfTheta)
		cdf[i] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	return cdf
}()

// zipfKey returns a key of Zipf-distributed rank.
func zipfKey(r *rand.Rand) []byte {
	i, _ := slices.BinarySearch(zipfCDF, r.Float64())
	return benchKeyList[min(i, benchKeys-1)]
}

// BenchmarkNATSCachePaired runs the NATS lookups (get, part, mget100) of
// nodes with the answer cache off and on (the default size), under
// uniform and Zipf (0.99) keys, one sub-benchmark each
// (c=<requesters>/<op>-<keys>), in 25 ms slices as BenchmarkNATSPaired
// does: the cache off right beside on, which of the two goes first
// alternating by round, so that each pair sees the same machine. It
// reports each one's rate and CPU time per key, on/off of keys/s — the
// cache's gain under Zipf, its cost (a miss's) under uniform keys — and
// cpu-on/off of the process's CPU time per key (client, NATS server and
// node: one process), which other processes on the machine move less
// than rates.
func BenchmarkNATSCachePaired(b *testing.B) {
	off := func(c *node.Config) { c.HotCacheBytes = 0 }
	// pairs[i] is one lookup under one distribution of keys, off and on.
	type pair struct {
		name    string
		off, on benchOp
	}
	var pairs []pair
	for _, keys := range []struct {
		name string
		key  func(*rand.Rand) []byte
	}{{"uniform", nil}, {"zipf", zipfKey}} {
		setup := func(node func(*node.Config)) []benchOp {
			ops := setupBenchWith(b, benchSetup{node: node, key: keys.key})
			return slices.DeleteFunc(ops, func(op benchOp) bool { return op.name == "echo" })
		}
		offOps, onOps := setup(off), setup(nil)
		for i := range offOps {
			pairs = append(pairs, pair{offOps[i].name + "-" + keys.name, offOps[i], onOps[i]})
		}
	}
	const slice = 25 * time.Millisecond
	for _, conc := range []int{1, 64} {
		for _, p := range pairs {
			b.Run(fmt.Sprintf("c=%d/%s", conc, p.name), func(b *testing.B) {
				var count [2]int64
				var busy, cpu [2]time.Duration
				run := func(i int, op benchOp) {
					c0 := processCPU()
					n, d, err := runSlice(conc, slice, op.do)
					if err != nil {
						b.Fatal(err)
					}
					cpu[i] += processCPU() - c0
					count[i] += n * int64(op.keys)
					busy[i] += d
				}
				for round := range b.N {
					if round%2 == 0 {
						run(0, p.off)
						run(1, p.on)
					} else {
						run(1, p.on)
						run(0, p.off)
					}
				}
				var rate, perKey [2]float64
				for i, name := range []string{"off", "on"} {
					rate[i] = float64(count[i]) / busy[i].Seconds()
					perKey[i] = float64(cpu[i].Nanoseconds()) / float64(count[i])
					b.ReportMetric(rate[i], name+"-keys/s")
					b.ReportMetric(perKey[i], name+"-cpu-ns/key")
				}
				b.ReportMetric(rate[1]/rate[0], "on/off")
				b.ReportMetric(perKey[1]/perKey[0], "cpu-on/off")
			})
		}
	}
}
