package node

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// getKey, putKey and admitKey are get, put and admit as a lookup calls
// them, with key's hash.
func (h *answerCache) getKey(v *version, key []byte, raw bool) (*cacheEntry, bool) {
	return h.get(v, h.hash(key), key, raw)
}

func (h *answerCache) putKey(v *version, key []byte, raw bool, res *Result, epoch uint64) {
	h.put(v, h.hash(key), key, raw, res, epoch)
}

func (h *answerCache) admitKey(key []byte) bool { return h.admit(h.hash(key)) }

// TestCacheSlotShared: names whose hashes put them in one slot (forced
// here: one hash for every key) never answer for each other: a key,
// another version's entry or the other raw of a key in its slot is a
// miss, and storing it takes the slot.
func TestCacheSlotShared(t *testing.T) {
	h, err := newAnswerCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	const kh = 42
	v1, v2 := &version{name: "1"}, &version{name: "2"}
	store := func(v *version, key string, raw bool, value string) {
		t.Helper()
		h.admit(kh)
		res := Result{Found: true, Value: []byte(value)}
		h.put(v, kh, []byte(key), raw, &res, h.epochNow())
	}
	store(v1, "a", false, "a1")
	if e, ok := h.get(v1, kh, []byte("a"), false); !ok || string(e.value) != "a1" {
		t.Fatalf("a in v1: %v %v, want a1", e, ok)
	}
	if e, ok := h.get(v1, kh, []byte("b"), false); ok {
		t.Fatalf("b in v1 answered by a's entry: %q", e.value)
	}
	// Another version and the other raw are other slots of one hash;
	// forced into a's, they are a's misses.
	for _, c := range []struct {
		v   *version
		raw bool
	}{{v2, false}, {v1, true}} {
		if e, ok := h.c.GetIfPresent(slot(v1, kh, false)); !ok || e.v == c.v && e.raw == c.raw {
			t.Fatal("a's entry is not where it was stored")
		}
		if e, ok := h.get(c.v, kh, []byte("a"), c.raw); ok {
			t.Errorf("a in version %s, raw %v, answered by v1's entry: %q", c.v.name, c.raw, e.value)
		}
	}
	store(v1, "b", false, "b1") // b takes a's slot
	if e, ok := h.get(v1, kh, []byte("b"), false); !ok || string(e.value) != "b1" {
		t.Fatalf("b in v1: %v %v, want b1", e, ok)
	}
	if e, ok := h.get(v1, kh, []byte("a"), false); ok {
		t.Fatalf("a in v1 answered by b's entry: %q", e.value)
	}
}

// TestCacheHeld: every key cached is in the held filter, through the
// remakes of many more keys stored than the cache holds, stored from
// several goroutines at once; keys never cached seldom pass it.
func TestCacheHeld(t *testing.T) {
	h, err := newAnswerCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	v := &version{name: "1"}
	const workers = 4
	keys := int(h.heldKeys) * 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < keys; i += workers {
				k := fmt.Appendf(nil, "key-%d", i)
				h.admitKey(k)
				res := Result{Found: true, Value: []byte("v")}
				h.putKey(v, k, false, &res, h.epochNow())
			}
		})
	}
	wg.Wait()
	h.c.CleanUp()
	cached := 0
	for _, e := range h.c.All() {
		cached++
		if !h.held.Load().has(h.hash([]byte(e.key))) {
			t.Fatalf("%s is cached but not held", e.key)
		}
		if _, ok := h.getKey(v, []byte(e.key), false); !ok {
			t.Fatalf("%s is cached but its lookup missed", e.key)
		}
	}
	passed := 0
	const never = 10_000
	for i := range never {
		if h.held.Load().has(h.hash(fmt.Appendf(nil, "never-%d", i))) {
			passed++
		}
	}
	t.Logf("%d keys stored, %d cached (heldKeys %d); %d of %d keys never cached passed the filter", keys, cached, h.heldKeys, passed, never)
	if cached == 0 {
		t.Fatal("nothing cached")
	}
	if passed > never/30 {
		t.Errorf("%d of %d keys never cached passed the held filter", passed, never)
	}
}

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
		h.admitKey(k) // put caches a key's second miss
	}
	before := heap()
	for i, k := range keys {
		res := Result{Found: true, Version: v.name, Value: values[i]}
		h.putKey(v, k, false, &res, 0)
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
	if h.admitKey([]byte("hot")) {
		t.Fatal("a key's first miss was admitted")
	}
	if !h.admitKey([]byte("hot")) {
		t.Fatal("a key's second miss was not admitted")
	}
	// Keys missed once long ago: the filter is cleared before they come back.
	const old = 100
	for i := range old {
		h.admitKey(fmt.Appendf(nil, "old-%d", i))
	}
	// A uniform load: every key once, many times the filter's capacity.
	const keys = 1_000_000
	admitted := 0
	for i := range keys {
		if h.admitKey(fmt.Appendf(nil, "key-%08d", i)) {
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
		if h.admitKey(fmt.Appendf(nil, "old-%d", i)) {
			remembered++
		}
	}
	if remembered > old/2 {
		t.Errorf("%d of %d keys marked before the filter was cleared were admitted at their next miss", remembered, old)
	}
}

// TestCacheDoorkeeperCountPast: a doorkeeper whose count of marked keys
// ran past doorKeys unseen — a lookup clearing the filter descheduled
// while other lookups marked doorKeys keys more, as a loaded machine
// does — is still cleared, so keys asked once stay unadmitted. With the
// filter cleared at doorKeys exactly, it filled and admitted every miss
// from then on (every uniform lookup an otter Set and an eviction,
// cpu-on/off 1.4-2.1 in BenchmarkNATSCachePaired's uniform mget).
func TestCacheDoorkeeperCountPast(t *testing.T) {
	h, err := newAnswerCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	h.doorSet.Store(h.doorKeys + 1)
	const keys = 200_000
	admitted := 0
	for i := range keys {
		if h.admitKey(fmt.Appendf(nil, "once-%d", i)) {
			admitted++
		}
	}
	t.Logf("%d of %d keys asked once admitted", admitted, keys)
	if admitted > keys/100 {
		t.Errorf("%d of %d keys asked once admitted after the count passed doorKeys", admitted, keys)
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
	h.admitKey(key)
	epoch := h.epochNow() // the lookup starts, picks v, reads…
	h.drop(v)             // …v is switched away from…
	res := Result{Found: true, Version: "1", Value: []byte("x")}
	h.putKey(v, key, false, &res, epoch) // …and the lookup stores its answer.
	if _, ok := h.getKey(v, key, false); ok {
		t.Fatal("an entry of a dropped version was kept")
	}
	h.admitKey(key)
	res = Result{Found: true, Version: "1", Value: []byte("x")}
	h.putKey(v, key, false, &res, h.epochNow())
	if _, ok := h.getKey(v, key, false); !ok {
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
