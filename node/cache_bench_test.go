package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkCache compares, in alternating rounds of one process, lookups
// on a node with the answer cache off and on (the default size): Get
// and GetMany of 100 keys, under uniform and Zipf (0.99) keys over
// 50,000 records (100-byte values, s2-blocks: the keys a few times the
// default cache's, where a miss costs most), so that each pair sees
// the same machine. It reports ns per key of each and on/off, the ratio
// of their times: below 1 the cache saves, above it a miss costs more;
// and cpu-on/off, the ratio of the process's CPU time, which other
// processes on the machine move less than the time.
func BenchmarkCache(b *testing.B) {
	const records, batch = 50_000, 100
	root := b.TempDir()
	writeVersion(b, root, "d", "v1", 4, records)
	off := newTestNode(b, root, func(c *Config) { c.HotCacheBytes = 0 })
	on := newTestNode(b, root, nil)
	for _, n := range []*testNode{off, on} {
		waitFor(b, "v1 active", func() bool { v, ok := n.ActiveVersion("d"); return ok && v == "v1" })
	}
	keys := make([][]byte, records)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	cdf, sum := zipfCDF(records)
	r := rand.New(rand.NewPCG(1, 2))
	pick := map[string]func() []byte{
		"uniform": func() []byte { return keys[r.IntN(records)] },
		"zipf": func() []byte {
			i, _ := slices.BinarySearch(cdf, r.Float64()*sum)
			return keys[min(i, records-1)]
		},
	}
	ctx := context.Background()
	for _, dist := range []string{"uniform", "zipf"} {
		for _, op := range []string{"get", "getmany100"} {
			b.Run(op+"/"+dist, func(b *testing.B) {
				const perRound = 20_000 // keys
				ks := make([][]byte, perRound)
				var cpuOff, cpuOn time.Duration
				round := func(n *Node, cpu *time.Duration) time.Duration {
					for i := range ks {
						ks[i] = pick[dist]()
					}
					t0, c0 := time.Now(), processCPU()
					if op == "get" {
						for _, k := range ks {
							if _, err := n.Get(ctx, "d", k, GetOptions{}); err != nil {
								b.Fatal(err)
							}
						}
					} else {
						for i := 0; i < perRound; i += batch {
							if _, _, err := n.GetMany(ctx, "d", ks[i:i+batch], GetOptions{}); err != nil {
								b.Fatal(err)
							}
						}
					}
					*cpu += processCPU() - c0
					return time.Since(t0)
				}
				var warm time.Duration
				round(off.Node, &warm) // warm both
				round(on.Node, &warm)
				var tOff, tOn time.Duration
				for i := range b.N {
					if i%2 == 0 {
						tOff += round(off.Node, &cpuOff)
						tOn += round(on.Node, &cpuOn)
					} else {
						tOn += round(on.Node, &cpuOn)
						tOff += round(off.Node, &cpuOff)
					}
				}
				keysDone := float64(b.N * perRound)
				b.ReportMetric(float64(tOff.Nanoseconds())/keysDone, "off-ns/key")
				b.ReportMetric(float64(tOn.Nanoseconds())/keysDone, "on-ns/key")
				b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
				b.ReportMetric(float64(cpuOn)/float64(cpuOff), "cpu-on/off")
			})
		}
	}
}
