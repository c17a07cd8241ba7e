package node

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

// policyRun is what the answer cache did over a stream of lookups
// (runPolicy).
type policyRun struct {
	lookups, hits, admitted, evicted int64
	took                             time.Duration
}

// zipfCDF returns the cumulative weights of records keys under Zipf
// (0.99), unnormalised, and their total: a key is picked by searching
// for a uniform draw times sum.
func zipfCDF(records int) (cdf []float64, sum float64) {
	cdf = make([]float64, records)
	for i := range cdf {
		sum += 1 / math.Pow(float64(i+1), 0.99)
		cdf[i] = sum
	}
	return cdf, sum
}

// policyStream returns n lookups of records keys, uniform or Zipf (0.99).
func policyStream(records, n int, zipf bool) [][]byte {
	keys := make([][]byte, records)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%012d", i)
	}
	cdf, sum := zipfCDF(records)
	r := rand.New(rand.NewPCG(1, 2))
	stream := make([][]byte, n)
	for i := range stream {
		if zipf {
			j, _ := slices.BinarySearch(cdf, r.Float64()*sum)
			stream[i] = keys[min(j, records-1)]
		} else {
			stream[i] = keys[r.IntN(records)]
		}
	}
	return stream
}

// runPolicy runs stream through a new cache of the default hot_cache
// alone, no reads: each miss is put as a found 100-byte value. A
// doorKeys above 0 replaces the cache's own.
func runPolicy(tb testing.TB, stream [][]byte, doorKeys int64) policyRun {
	h, err := newAnswerCache(DefaultConfig().HotCacheBytes)
	if err != nil {
		tb.Fatal(err)
	}
	if doorKeys > 0 {
		h.doorKeys = doorKeys
	}
	v := &version{name: "1"}
	value := make([]byte, 100)
	var run policyRun
	t0 := time.Now()
	for _, k := range stream {
		if _, ok := h.getKey(v, k, false); ok {
			run.hits++
			continue
		}
		res := Result{Found: true, Value: value}
		h.putKey(v, k, false, &res, 0)
	}
	run.took = time.Since(t0)
	h.c.CleanUp()
	run.lookups = int64(len(stream))
	run.evicted = int64(h.evictions.Load())
	run.admitted = run.evicted + int64(h.c.EstimatedSize())
	return run
}

// TestCachePolicyUniform: with the default cache at spangle's gc_percent,
// uniform lookups over 50,000 keys (17 times the entries) admit few of
// their misses (each an otter Set and an eviction, for a hit rate of 6 %
// at best), while a Zipf load's hot keys are admitted. With the
// doorkeeper cleared after two keys per entry it admitted 8.6 % of the
// uniform lookups.
func TestCachePolicyUniform(t *testing.T) {
	old := debug.SetGCPercent(200)
	defer debug.SetGCPercent(old)
	const records, lookups = 50_000, 300_000
	u := runPolicy(t, policyStream(records, lookups, false), 0)
	z := runPolicy(t, policyStream(records, lookups, true), 0)
	t.Logf("uniform: %d hits, %d admitted of %d; zipf: %d hits, %d admitted", u.hits, u.admitted, u.lookups, z.hits, z.admitted)
	if u.admitted > lookups*4/100 {
		t.Errorf("uniform lookups admitted %d of %d (more than 4 %%)", u.admitted, lookups)
	}
	if z.hits < lookups*65/100 {
		t.Errorf("zipf lookups hit %d of %d (less than 65 %%)", z.hits, lookups)
	}
}

// BenchmarkCachePolicy runs the answer cache alone (runPolicy) under
// uniform and Zipf (0.99) lookups over 50,000 and 1M keys with the
// default hot_cache at spangle's gc_percent of 200, its doorkeeper's
// window as it is ("now") and as it was before (cleared after two keys
// per entry, "2x"), in alternating rounds. It reports counts that load
// on the machine does not blur — hit-% of the lookups, admit-% (misses
// stored: an otter Set, and an eviction once full), evict-% — and the
// cache's own ns per lookup, and now/2x the ratio of their times.
func BenchmarkCachePolicy(b *testing.B) {
	old := debug.SetGCPercent(200)
	b.Cleanup(func() { debug.SetGCPercent(old) })
	h, err := newAnswerCache(DefaultConfig().HotCacheBytes)
	if err != nil {
		b.Fatal(err)
	}
	was := int64(len(h.door)) * 64 / 16
	for _, records := range []int{50_000, 1_000_000} {
		for _, dist := range []string{"uniform", "zipf"} {
			b.Run(fmt.Sprintf("%s/%d", dist, records), func(b *testing.B) {
				stream := policyStream(records, 1_000_000, dist == "zipf")
				var now, before policyRun
				add := func(sum *policyRun, r policyRun) {
					sum.lookups += r.lookups
					sum.hits += r.hits
					sum.admitted += r.admitted
					sum.evicted += r.evicted
					sum.took += r.took
				}
				for i := range b.N {
					if i%2 == 0 {
						add(&now, runPolicy(b, stream, 0))
						add(&before, runPolicy(b, stream, was))
					} else {
						add(&before, runPolicy(b, stream, was))
						add(&now, runPolicy(b, stream, 0))
					}
				}
				for _, r := range []struct {
					name string
					run  policyRun
				}{{"now", now}, {"2x", before}} {
					pct := func(n int64) float64 { return 100 * float64(n) / float64(r.run.lookups) }
					b.ReportMetric(pct(r.run.hits), r.name+"-hit-%")
					b.ReportMetric(pct(r.run.admitted), r.name+"-admit-%")
					b.ReportMetric(pct(r.run.evicted), r.name+"-evict-%")
					b.ReportMetric(float64(r.run.took.Nanoseconds())/float64(r.run.lookups), r.name+"-ns/lookup")
				}
				b.ReportMetric(float64(now.took)/float64(before.took), "now/2x")
			})
		}
	}
}

// BenchmarkCacheSwitch measures what dropping the answer cache's entries
// at a switch costs against carrying those of unchanged keys over to the
// new version (re-keyed), when the switch changes 1 % of the keys: a
// cache of the default size warmed by 1M Zipf (0.99) lookups on v1 over
// 50,000 or 1M keys, then v1 switched to v2 either way and the next 1M
// lookups asked of v2. It reports the hits of the first 10k, 100k and 1M
// lookups after the switch each way (hit-%), and what carrying took
// (carry-µs, over the entries carried).
func BenchmarkCacheSwitch(b *testing.B) {
	old := debug.SetGCPercent(200)
	b.Cleanup(func() { debug.SetGCPercent(old) })
	for _, records := range []int{50_000, 1_000_000} {
		b.Run(fmt.Sprint(records), func(b *testing.B) {
			stream := policyStream(records, 2_000_000, true)
			warm, after := stream[:1_000_000], stream[1_000_000:]
			seen := map[string]bool{}
			var changed [][]byte
			r := rand.New(rand.NewPCG(3, 4))
			for len(changed) < records/100 {
				if k := fmt.Sprintf("key-%012d", r.IntN(records)); !seen[k] {
					seen[k] = true
					changed = append(changed, []byte(k))
				}
			}
			marks := []int{10_000, 100_000, 1_000_000}
			hits := map[string][]int64{"drop": make([]int64, len(marks)), "carry": make([]int64, len(marks))}
			var carried int64
			var carryTook time.Duration
			value := make([]byte, 100)
			lookup := func(h *answerCache, v *version, k []byte) bool {
				if _, ok := h.getKey(v, k, false); ok {
					return true
				}
				res := Result{Found: true, Value: value}
				h.putKey(v, k, false, &res, h.epochNow())
				return false
			}
			for range b.N {
				for _, way := range []string{"drop", "carry"} {
					h, err := newAnswerCache(DefaultConfig().HotCacheBytes)
					if err != nil {
						b.Fatal(err)
					}
					v1, v2 := &version{name: "1"}, &version{name: "2"}
					for _, k := range warm {
						lookup(h, v1, k)
					}
					h.c.CleanUp()
					if way == "carry" {
						t0 := time.Now()
						h.dropCarrying([]*version{v1}, v1, v2, changed)
						carryTook += time.Since(t0)
						carried += int64(h.carried.Load())
					} else {
						h.drop(v1)
					}
					var n int64
					m := 0
					for i, k := range after {
						if lookup(h, v2, k) {
							n++
						}
						if i+1 == marks[m] {
							hits[way][m] += n
							m++
						}
					}
				}
			}
			for _, way := range []string{"drop", "carry"} {
				for m, mark := range marks {
					b.ReportMetric(100*float64(hits[way][m])/float64(b.N*mark), fmt.Sprintf("%s-hit-%%-%dk", way, mark/1000))
				}
			}
			b.ReportMetric(float64(carried)/float64(b.N), "carried")
			b.ReportMetric(float64(carryTook.Microseconds())/float64(b.N), "carry-µs")
		})
	}
}
