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
// uniform and Zipf (0.99) keys, in alternating 25 ms slices as
// BenchmarkNATSPaired does, so that every one sees the same machine. It
// reports each one's rate and the ratios <op>-<keys>-on/off: the cache's
// gain under Zipf, its cost (a miss's) under uniform keys.
func BenchmarkNATSCachePaired(b *testing.B) {
	off := func(c *node.Config) { c.HotCacheBytes = 0 }
	type variant struct {
		name string
		ops  []benchOp
	}
	var variants []variant
	for _, keys := range []struct {
		name string
		key  func(*rand.Rand) []byte
	}{{"uniform", nil}, {"zipf", zipfKey}} {
		for _, cache := range []struct {
			name string
			node func(*node.Config)
		}{{"off", off}, {"on", nil}} {
			ops := setupBenchWith(b, benchSetup{node: cache.node, key: keys.key})
			ops = slices.DeleteFunc(ops, func(op benchOp) bool { return op.name == "echo" })
			variants = append(variants, variant{keys.name + "-" + cache.name, ops})
		}
	}
	const slice = 25 * time.Millisecond
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			rate := map[string]float64{}
			count := map[string]int64{}
			busy := map[string]time.Duration{}
			for range b.N {
				for _, v := range variants {
					for _, op := range v.ops {
						n, d, err := runSlice(conc, slice, op.do)
						if err != nil {
							b.Fatal(err)
						}
						name := op.name + "-" + v.name
						count[name] += n * int64(op.keys)
						busy[name] += d
					}
				}
			}
			for name, n := range count {
				rate[name] = float64(n) / busy[name].Seconds()
				b.ReportMetric(rate[name], name+"-keys/s")
			}
			for _, op := range variants[0].ops {
				for _, keys := range []string{"uniform", "zipf"} {
					b.ReportMetric(rate[op.name+"-"+keys+"-on"]/rate[op.name+"-"+keys+"-off"], op.name+"-"+keys+"-on/off")
				}
			}
		})
	}
}
