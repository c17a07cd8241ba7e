package node_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/plugins/partition"
)

// cacheNode starts a node with an answer cache of cacheBytes on a source
// root holding db "d" at version v0000 with records, and returns it, the
// root and the node's registry.
func cacheNode(t *testing.T, cacheBytes int64, records []nodetest.Record) (*node.Node, string, *prometheus.Registry) {
	t.Helper()
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", cacheVersion(0), 4, records)
	cfg := node.DefaultConfig()
	cfg.Source, cfg.DataDir = root, t.TempDir()
	cfg.Logger = nodetest.Logger()
	cfg.HotCacheBytes = cacheBytes
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	waitVersion(t, n, cacheVersion(0))
	return n, root, reg
}

// cacheVersion names the i-th version; names sort in upgrade order.
func cacheVersion(i int) string { return fmt.Sprintf("v%04d", i) }

func waitVersion(t *testing.T, n *node.Node, version string) {
	t.Helper()
	nodetest.WaitFor(t, 30*time.Second, "version "+version, nodetest.True(func() bool {
		v, _ := n.ActiveVersion("d")
		return v == version
	}))
}

// TestCacheSwitches switches versions under concurrent lookups of a few
// hot keys, through Get, GetPart and GetMany (every door's lookups): a
// value must be of the version its Result names, no reader may see a
// version older than one it saw, a lookup right after a switch answers
// from the new version, and the switched-from version's entries are
// dropped. Run it under -race.
func TestCacheSwitches(t *testing.T) {
	const upgrades, keys, hot, readers = 20, 100, 8, 6
	n, root, reg := cacheNode(t, 1<<20, nodetest.Numbered(cacheVersion(0), keys))
	ctx := context.Background()
	check := func(res node.Result, k int) error {
		if want := fmt.Sprintf("%s:%d", res.Version, k); string(res.Value) != want || !res.Found {
			return fmt.Errorf("key-%d: value %q (found %v) under version %q (mixed versions)", k, res.Value, res.Found, res.Version)
		}
		return nil
	}
	lookups := []func(k int) (string, error){
		func(k int) (string, error) {
			res, err := n.Get(ctx, "d", fmt.Appendf(nil, "key-%d", k), node.GetOptions{})
			if err != nil {
				return "", err
			}
			return res.Version, check(res, k)
		},
		func(k int) (string, error) {
			// A part request naming the version it saw last: answered from
			// the active one either way.
			v, _ := n.ActiveVersion("d")
			res, err := n.GetPart(ctx, "d", v, partitionOf(fmt.Sprintf("key-%d", k), 4), fmt.Appendf(nil, "key-%d", k), node.GetOptions{})
			if err != nil {
				return "", err
			}
			return res.Version, check(res, k)
		},
		func(k int) (string, error) {
			version, rs, err := n.GetMany(ctx, "d", [][]byte{fmt.Appendf(nil, "key-%d", k), fmt.Appendf(nil, "key-%d", (k+1)%hot)}, node.GetOptions{})
			if err != nil {
				return "", err
			}
			for i, res := range rs {
				if res.Version != version {
					return "", fmt.Errorf("batch of %s answered from %s", version, res.Version)
				}
				if err := check(res, (k+i)%hot); err != nil {
					return "", err
				}
			}
			return version, nil
		},
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var requests atomic.Int64
	errs := make(chan error, readers)
	for r := range readers {
		wg.Go(func() {
			last := ""
			for i := r; !stop.Load(); i++ {
				v, err := lookups[r%len(lookups)](i % hot)
				switch {
				case err != nil:
					errs <- err
					return
				case v < last:
					errs <- fmt.Errorf("version went back from %s to %s", last, v)
					return
				}
				last = v
				requests.Add(1)
			}
		})
	}
	hits := func() float64 { return nodetest.Metric(t, reg, "spangle_hot_cache_hits_total") }
	for u := 1; u <= upgrades; u++ {
		nodetest.WriteVersion(t, root, "d", cacheVersion(u), 4, nodetest.Numbered(cacheVersion(u), keys))
		n.Refresh()
		nodetest.WaitFor(t, 30*time.Second, "version "+cacheVersion(u), nodetest.True(func() bool {
			v, _ := n.ActiveVersion("d")
			return v == cacheVersion(u) || len(errs) > 0
		}))
		// A lookup started after the switch answers from the new version,
		// though the cache held the old one's answer.
		if res, err := n.Get(ctx, "d", []byte("key-0"), node.GetOptions{}); err != nil || res.Version != cacheVersion(u) {
			t.Errorf("after the switch to %s, a lookup answered from %s (%v)", cacheVersion(u), res.Version, err)
		}
		// Let the readers fill the cache with this version.
		before := hits()
		nodetest.WaitFor(t, 30*time.Second, "hits on "+cacheVersion(u), nodetest.True(func() bool {
			return hits() >= before+2*hot || len(errs) > 0
		}))
		if len(errs) > 0 {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d lookups, %v hits, %v misses", requests.Load(), hits(), nodetest.Metric(t, reg, "spangle_hot_cache_misses_total"))
	if hits() < float64(requests.Load())/2 {
		t.Errorf("%v hits of %d lookups: the hot keys were not served from the cache", hits(), requests.Load())
	}
	// Each switch drops the entries of the version before it; every hot
	// key of it was cached, so at least one entry went at each, and only
	// the active version's are left.
	if got := nodetest.Metric(t, reg, "spangle_hot_cache_dropped_total"); got < upgrades*hot {
		t.Errorf("%v entries dropped in %d switches of %d hot keys", got, upgrades, hot)
	}
	if st := n.Status().HotCache; st == nil || st.Entries > hot || st.Bytes <= 0 || st.Budget != 1<<20 || st.MaxBytes >= st.Budget {
		t.Errorf("status %+v: want at most the %d hot keys of the active version", st, hot)
	}
}

// partitionOf is the default partitioner's partition of key among n.
func partitionOf(key string, n int) int {
	p, _ := partition.Sequins([]byte(key), n)
	return p
}

// TestCacheRaw: raw and decoded answers are cached alike, a hit answers
// as the miss before it (ETag included), a missing key is cached, and a
// key is cached at its second miss (the doorkeeper).
func TestCacheRaw(t *testing.T) {
	n, _, reg := cacheNode(t, 1<<20, nodetest.Numbered(cacheVersion(0), 10))
	ctx := context.Background()
	for _, tt := range []struct {
		key string
		raw bool
	}{{"key-1", false}, {"key-2", true}, {"nope", false}} {
		var rs []node.Result
		for range 3 {
			res, err := n.Get(ctx, "d", []byte(tt.key), node.GetOptions{Raw: tt.raw})
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, res)
		}
		if rs[0].Cached || rs[1].Cached || !rs[2].Cached {
			t.Errorf("%+v: cached %v %v %v, want the third only", tt, rs[0].Cached, rs[1].Cached, rs[2].Cached)
		}
		if rs[0].ETag != nil || rs[1].Found && !slices.Equal(rs[1].ETag, []string{node.ETag(rs[1].Value)}) {
			t.Errorf("%+v: ETags %q (miss), %q (stored)", tt, rs[0].ETag, rs[1].ETag)
		}
		hit, miss := rs[2], rs[0]
		if !bytes.Equal(hit.Value, miss.Value) || hit.Found != miss.Found || hit.Version != miss.Version ||
			!hit.Modified.Equal(miss.Modified) || hit.ContentType != miss.ContentType || hit.CacheControl != miss.CacheControl ||
			hit.NegativeCacheControl != miss.NegativeCacheControl || hit.ProxiedTo != miss.ProxiedTo {
			t.Errorf("%+v: hit %+v, miss %+v", tt, hit, miss)
		}
		if hit.Found && !slices.Equal(hit.ETag, []string{node.ETag(hit.Value)}) {
			t.Errorf("%+v: hit's ETag %q, want %q", tt, hit.ETag, node.ETag(hit.Value))
		}
	}
	if got := nodetest.Metric(t, reg, "spangle_hot_cache_hits_total"); got != 3 {
		t.Errorf("%v hits, want 3", got)
	}
}

// TestCacheMemoryBound fills a cache of a 4 MiB budget with values of
// 16 KiB, far more than it holds, and a value over a sixteenth of its
// bound: the entries' bytes stay within the bound (the budget over the
// collector's headroom), the large value is never cached, and the live
// heap the cache keeps, times that headroom, stays within the budget.
func TestCacheMemoryBound(t *testing.T) {
	const budget, keys, size = 4 << 20, 1000, 16 << 10
	gogc := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(gogc) })
	const bound = budget * 2 / 5 // at GOGC 100: budget over 2 × 5/4
	recs := make([]nodetest.Record, keys+1)
	for i := range keys {
		recs[i] = nodetest.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: bytes.Repeat([]byte{byte(i)}, size)}
	}
	recs[keys] = nodetest.Record{Key: []byte("big"), Value: bytes.Repeat([]byte("b"), bound/16+1)}
	n, _, reg := cacheNode(t, budget, recs)
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	get := func(key string) node.Result {
		res, err := n.Get(ctx, "d", []byte(key), node.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Warm what a lookup keeps besides the cache (block readers, pools)
	// without caching anything: every key missed once.
	for i := range keys {
		get(fmt.Sprintf("key-%d", i))
	}
	before := heap()
	for range 3 {
		for i := range keys {
			get(fmt.Sprintf("key-%d", i))
		}
		for range 3 {
			if get("big").Cached {
				t.Fatal("a value over a sixteenth of the cache was cached")
			}
		}
	}
	after := heap()
	st := n.Status().HotCache
	t.Logf("cache %+v; live heap grew %d bytes", *st, int64(after-before))
	if st.Budget != budget || st.MaxBytes != bound {
		t.Errorf("budget %d, bound %d; want %d, %d at GOGC 100", st.Budget, st.MaxBytes, budget, int64(bound))
	}
	if st.Bytes > bound || st.Entries*size > bound {
		t.Errorf("cache holds %d bytes in %d entries, bound %d", st.Bytes, st.Entries, bound)
	}
	if st.Entries < bound/size/2 {
		t.Errorf("%d entries: the cache should fill to about %d", st.Entries, bound/size)
	}
	if evicted := nodetest.Metric(t, reg, "spangle_hot_cache_evictions_total"); evicted == 0 {
		t.Error("nothing evicted though the keys are 8 times the cache")
	}
	// The heap may grow to twice the live heap at GOGC 100: the cache's
	// share of it is twice what it keeps live, and a quarter more the
	// runtime's overshoot. 1 MiB of slack for the rest of the process's
	// live heap moving meanwhile.
	if grew := int64(after) - int64(before); 2*grew*5/4 > budget+1<<20 {
		t.Errorf("live heap grew %d bytes: 5/2 of that exceeds the budget of %d", grew, budget)
	}
}

// TestCacheOff: HotCacheBytes 0 caches nothing and exposes no cache.
func TestCacheOff(t *testing.T) {
	n, _, reg := cacheNode(t, 0, nodetest.Numbered(cacheVersion(0), 10))
	for range 3 {
		res, err := n.Get(context.Background(), "d", []byte("key-1"), node.GetOptions{})
		if err != nil || res.Cached || res.ETag != nil {
			t.Fatalf("%+v, %v", res, err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "spangle_hot_cache") {
			t.Errorf("%s exposed with the cache off", mf.GetName())
		}
	}
	if st := n.Status().HotCache; st != nil {
		t.Errorf("status shows a cache: %+v", *st)
	}
}
