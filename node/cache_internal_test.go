package node

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestCacheEntryOverhead measures the heap an entry takes beyond its
// key's and value's bytes, as a lookup's miss stores it (an ETag of a
// found value included), and checks that cacheEntryOverhead (what the
// weigher charges) covers it: the cache's bytes must not understate its
// memory.
func TestCacheEntryOverhead(t *testing.T) {
	const entries, keyLen, valueLen = 50_000, 16, 100
	h, err := newAnswerCache(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	v := &version{name: "1", modified: time.Unix(1e9, 0)}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// The keys and values are made before the first measure: a lookup's
	// value is the read's allocation, its key is copied by put.
	keys := make([][]byte, entries)
	values := make([][]byte, entries)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "%0*d", keyLen, i)
		values[i] = make([]byte, valueLen)
	}
	for _, k := range keys {
		h.admit(k) // put caches a key's second miss
	}
	before := heap()
	for i, k := range keys {
		res := Result{Found: true, Version: v.name, Value: values[i]}
		h.put(v, k, false, &res, 0)
	}
	h.c.CleanUp()
	after := heap()
	runtime.KeepAlive(keys)
	runtime.KeepAlive(values)
	if n := h.c.EstimatedSize(); n != entries {
		t.Fatalf("%d entries cached, want %d", n, entries)
	}
	// The copied key is part of the entry's cost beyond the value.
	perEntry := float64(after-before)/entries - keyLen
	t.Logf("%.0f bytes per entry beyond its key and value; charged %d", perEntry, cacheEntryOverhead)
	if perEntry > cacheEntryOverhead {
		t.Errorf("an entry takes %.0f bytes beyond its key and value, more than cacheEntryOverhead %d", perEntry, cacheEntryOverhead)
	}
}

// TestCacheDoorkeeper: a key's first miss is not admitted, its second
// is; keys asked once are rarely admitted (false positives of the
// filter), and the filter is cleared as it fills, so a key marked long
// ago must be missed twice again.
func TestCacheDoorkeeper(t *testing.T) {
	h, err := newAnswerCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if h.admit([]byte("hot")) {
		t.Fatal("a key's first miss was admitted")
	}
	if !h.admit([]byte("hot")) {
		t.Fatal("a key's second miss was not admitted")
	}
	// Keys missed once long ago: the filter is cleared before they come back.
	const old = 100
	for i := range old {
		h.admit(fmt.Appendf(nil, "old-%d", i))
	}
	// A uniform load: every key once, many times the filter's capacity.
	const keys = 1_000_000
	admitted := 0
	for i := range keys {
		if h.admit(fmt.Appendf(nil, "key-%08d", i)) {
			admitted++
		}
	}
	t.Logf("%d of %d keys asked once admitted (%d words)", admitted, keys, len(h.door))
	if admitted > keys/10 {
		t.Errorf("%d of %d keys asked once were admitted: the filter is not cleared as it fills", admitted, keys)
	}
	// A false positive admits a few (0.03 % of the load above, 0.5 % with
	// the filter cleared after four times the keys); kept marks would
	// admit them all.
	remembered := 0
	for i := range old {
		if h.admit(fmt.Appendf(nil, "old-%d", i)) {
			remembered++
		}
	}
	if remembered > old/2 {
		t.Errorf("%d of %d keys marked before the filter was cleared were admitted at their next miss", remembered, old)
	}
}

// TestCacheDropRace: an answer stored by a lookup that picked a version
// before a drop of it is removed again (the epoch), so that no entry of
// a dropped version lingers.
func TestCacheDropRace(t *testing.T) {
	h, err := newAnswerCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	v := &version{name: "1"}
	key := []byte("k")
	h.admit(key)
	epoch := h.epochNow() // the lookup starts, picks v, reads…
	h.drop(v)             // …v is switched away from…
	res := Result{Found: true, Version: "1", Value: []byte("x")}
	h.put(v, key, false, &res, epoch) // …and the lookup stores its answer.
	if _, ok := h.get(v, key, false); ok {
		t.Fatal("an entry of a dropped version was kept")
	}
	h.admit(key)
	res = Result{Found: true, Version: "1", Value: []byte("x")}
	h.put(v, key, false, &res, h.epochNow())
	if _, ok := h.get(v, key, false); !ok {
		t.Fatal("an answer stored without a drop was not kept")
	}
}

// TestEntryBound: the entries of a cache are bounded by its budget over
// the collector's headroom, all of it with the collector off.
func TestEntryBound(t *testing.T) {
	for _, tt := range []struct {
		gogc int
		want int64
	}{{200, 4 << 20}, {100, 6 << 20}, {-1, 15 << 20}, {0, 12 << 20}} {
		if got := entryBound(15<<20, tt.gogc); got != tt.want {
			t.Errorf("entryBound(15 MiB, %d) = %d, want %d", tt.gogc, got, tt.want)
		}
	}
}
