package node

import (
	"hash/maphash"
	"math/bits"
	rtmetrics "runtime/metrics"
	"sync/atomic"
	"unsafe"

	"github.com/maypok86/otter/v2"
	"github.com/maypok86/otter/v2/stats"
	"github.com/prometheus/client_golang/prometheus"
)

// The answer cache ([storage] hot_cache, Config.HotCacheBytes) keeps the
// answers of hot keys — the value as answered (decoded unless raw), its
// ETag, and the peer that answered a proxied one — so that a key asked
// again is answered without the bbolt seek, the block's decoding, the
// decoder plugin, the ETag's hash or a peer's round trip. It sits in the
// read path (lookup), so every door uses it: HTTP GETs, NATS get, mget
// and part, batches. One cache serves every db, and answers read here
// and from peers alike.
//
// Entries are named by (version, key, raw), the version by its pointer:
// a version's answers never change, and a lookup asks for the entry of
// the version it picked, so a hit is an answer of that version, never of
// another (a copy of a version, made as it becomes active, is another
// pointer: its entries are its own). Entries of the versions a db lets
// go are dropped where that happens (db.set, closeVersions), and a
// version's answers from peers when it heals their partitions here
// (runHeal: they are read locally from then on); a miss that
// raced with a drop and stored an entry of a dropped version removes it
// again (epoch), so a dropped version's entries do not linger, holding
// memory, until evicted.
//
// otter holds an entry under a 64-bit slot, a seeded hash of its name
// (slot), and the entry the name itself, which a hit checks: a struct
// key of the version, key and raw cost every lookup the runtime's
// generic hash of the struct (maphash.Comparable) and otter's compare of
// it, and the doorkeeper a second hash of the key; otter hashes a uint64
// with two multiplications, and the key's hash is computed once per
// lookup, for the slot and the doorkeeper. Two names of one slot (a chance of
// 2^-64 a pair, the seed unknown outside the process) take turns in it:
// each is a miss of the other.
//
// Only complete answers are cached: a value found, or a key missing from
// every partition that may hold it. A peer's lookup (a version named,
// never proxied) that skipped an alternate partition this node does not
// hold is not one.

// cacheEntry is a cached answer, named by (v, key, raw): what a hit's
// Result takes beyond the version's and the db's own fields. Never
// modified once stored.
type cacheEntry struct {
	v         *version
	key       string
	raw       bool
	value     []byte
	etag      []string // Result.ETag
	proxiedTo string
	found     bool
}

// cacheEntryOverhead is the memory an entry costs beyond its key's and
// value's bytes: the cacheEntry, the ETag's string and slice, otter's
// node and its hash table's share. Measured by TestCacheEntryOverhead,
// rounded up.
const cacheEntryOverhead = 256

// answerCache is the bounded cache of answers. Safe for concurrent use;
// a nil *answerCache caches nothing.
type answerCache struct {
	c        *otter.Cache[uint64, *cacheEntry]
	counter  *stats.Counter
	budget   int64 // Config.HotCacheBytes: the memory the cache may add
	reserved int64 // bytes of the bound set aside for the filters (filterBytes)
	maxEntry int   // larger entries are not cached
	// epoch is incremented before every drop: an answer looked up before
	// a drop and stored after it is removed again (put).
	epoch     atomic.Uint64
	dropped   atomic.Uint64 // entries dropped with their version
	evictions atomic.Uint64 // entries evicted for room
	carried   atomic.Uint64 // entries carried over to a switch's version

	// door is the doorkeeper: a two-hash Bloom filter of the keys missed
	// since its last reset. A miss is cached only when its key is in it
	// already (admit), so a key asked once — most of a uniform load —
	// costs a bit, not an insertion into the full cache and an eviction
	// (4 µs of CPU per GET at 50 connections). doorSet counts the keys
	// marked since the reset (admit's false answers); once it reaches
	// doorKeys the filter is cleared, by the lookup that sets it back
	// to 0.
	door     []atomic.Uint64
	doorSet  atomic.Int64
	doorKeys int64
	seed     maphash.Seed // of hash

	// held is a filter of the cached keys (cache_held.go): a lookup of
	// a key not in it misses without otter's probe. heldAdds counts the
	// keys held since it was made; at heldKeys it is made again, as
	// heldNext until it replaces held.
	held     atomic.Pointer[heldFilter]
	heldNext atomic.Pointer[heldFilter]
	heldAdds atomic.Int64
	heldKeys int64
}

// newAnswerCache returns a cache that adds about budget bytes to the
// process's memory, or nil when budget is 0. Its entries are live heap,
// and the garbage collector lets the heap grow to (1 + GOGC/100) times
// the live heap before it collects (three times at spangle's gc_percent
// of 200), and the RSS a little past that: so the entries' bytes are
// bounded by budget over that factor and a quarter more (entryBound),
// and the cache's share of the RSS is about budget.
func newAnswerCache(budget int64) (*answerCache, error) {
	if budget <= 0 {
		return nil, nil
	}
	maxBytes := entryBound(budget, gcPercent())
	h := &answerCache{
		counter: stats.NewCounter(),
		budget:  budget,
		// An entry of a sixteenth of the cache would evict many hot
		// small ones for one value a bbolt read serves as fast.
		maxEntry: int(min(maxBytes/16, 1<<30)),
		door:     make([]atomic.Uint64, doorWords(maxBytes)),
		seed:     maphash.MakeSeed(),
	}
	h.doorKeys = int64(len(h.door)) // doorWords
	// As many words as the doorkeeper: 32 bits or more per entry of
	// 100-byte values.
	h.held.Store(&heldFilter{words: make([]atomic.Uint64, len(h.door))})
	h.heldKeys = max(maxBytes/(cacheEntryOverhead+128), 1)
	// The filters' bytes come out of the entries' bound: the doorkeeper,
	// the filter of held keys and its remake (filterBytes), 48 KiB of
	// the default cache's 1.1 MB; at least half the bound stays the
	// entries' (a cache of under about 170 KiB goes past its bound by
	// what its filters take over half of it).
	h.reserved = 3 * 8 * int64(len(h.door))
	entries := max(maxBytes-h.reserved, maxBytes/2)

	c, err := otter.New(&otter.Options[uint64, *cacheEntry]{
		MaximumWeight: uint64(entries),
		Weigher: func(_ uint64, e *cacheEntry) uint32 {
			return uint32(cacheEntryOverhead + len(e.key) + len(e.value))
		},
		StatsRecorder: h.counter,
		OnDeletion: func(e otter.DeletionEvent[uint64, *cacheEntry]) {
			if e.Cause == otter.CauseOverflow {
				h.evictions.Add(1)
			}
		},
		// Maintenance runs on the goroutine that triggered it (a lookup's),
		// amortised: no goroutine of otter's to own or to leak.
		Executor: func(fn func()) { fn() },
	})
	if err != nil {
		return nil, err
	}
	h.c = c
	return h, nil
}

// entryBound returns the bytes of entries a cache of budget may hold
// when the garbage collector runs at gogc percent (negative: off, the
// heap grows only to the memory limit): budget over (1 + gogc/100)
// times 5/4. In spangle-bench (2M records, gc_percent 200) the serving
// RssAnon grew by 3.4 to 3.7 times the entries' bytes
// (docs/PERFORMANCE.md): the heap's goal of 3, the runtime's overshoot
// past it, otter's own structures.
func entryBound(budget int64, gogc int) int64 {
	if gogc < 0 {
		return budget
	}
	return max(budget*400/(5*(100+int64(gogc))), 1)
}

// gcPercent returns the runtime's GOGC now (debug.SetGCPercent, the
// GOGC variable); -1 when the collector is off.
func gcPercent() int {
	s := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 100 // the runtime's default
	}
	v := s[0].Value.Uint64()
	if v > 1<<20 {
		return -1
	}
	return int(v)
}

// doorWords returns the doorkeeper's size in 64-bit words for a cache of
// maxBytes: 32 bits per entry of 100-byte values the cache can hold,
// rounded up to a power of two, at least 1,024 words (8 KiB), at most
// 1 << 20 (8 MiB). It is cleared after as many keys as it has words
// (doorKeys), half a key to one key per entry, a thirty-second of its
// bits set (false positives: 0.1 %): a key keeps its mark while about
// as many keys as the cache holds are missed. A miss admitted is an
// otter Set that, once the cache is full, evicts; what the window
// admits (BenchmarkCachePolicy, the default cache over 50,000 keys) —
// cleared after 8 keys per entry: uniform lookups admitted nearly half
// their misses and took 1.35–1.5 times the time of the cache off; after
// 2 (a sixteenth of the bits): 8.6 % of uniform lookups admitted, a
// Zipf load's hit rate 71.7 % (55.9 % over 1M keys); after 0.7: 2.1 %
// admitted, 71.9 % (55.2 %) of Zipf lookups hit. Keys worth caching
// come back within the shorter window; uniform keys seldom do.
func doorWords(maxBytes int64) int {
	entries := max(maxBytes/(cacheEntryOverhead+128), 1)
	words := uint64(max(entries/2, 1024))
	return int(min(uint64(1)<<(64-bits.LeadingZeros64(words-1)), 1<<20))
}

// admit reports whether a miss of the key of hash x (hash) should be
// cached: true when the key was missed before since the doorkeeper's
// last reset; otherwise it marks the key and returns false. Safe for
// concurrent use; approximate by design (a false positive admits a key
// once early).
func (h *answerCache) admit(x uint64) bool {
	mask := uint64(len(h.door)*64 - 1)
	i, j := x&mask, (x>>32)&mask
	bi, bj := uint64(1)<<(i%64), uint64(1)<<(j%64)
	oi := h.door[i/64].Or(bi)
	oj := h.door[j/64].Or(bj)
	if oi&bi != 0 && oj&bj != 0 {
		return true
	}
	// Any count past doorKeys clears, not doorKeys alone: when the count
	// ran past it unseen (a clearing lookup descheduled while others
	// marked doorKeys keys more, its later subtraction leaving the count
	// above doorKeys for good), the filter filled and admitted every
	// miss from then on. Marks made while it is cleared may be lost.
	if n := h.doorSet.Add(1); n >= h.doorKeys && h.doorSet.CompareAndSwap(n, 0) {
		for k := range h.door {
			h.door[k].Store(0)
		}
	}
	return false
}

// hash returns the hash of key that get and put take: computed once
// per lookup. 0 without a cache.
func (h *answerCache) hash(key []byte) uint64 {
	if h == nil {
		return 0
	}
	return maphash.Bytes(h.seed, key)
}

// slot returns otter's key of the entry (v, key, raw), kh the key's
// hash. Versions are apart by their addresses (the collector does not
// move objects, and an entry holds its version, so a version's address
// is not another's while one of its entries is cached).
func slot(v *version, kh uint64, raw bool) uint64 {
	x := kh ^ uint64(uintptr(unsafe.Pointer(v)))*0x9e3779b97f4a7c15
	if raw {
		x = ^x
	}
	return x
}

// epochNow returns the epoch to give put for a lookup starting now: load
// it before picking the version.
func (h *answerCache) epochNow() uint64 {
	if h == nil {
		return 0
	}
	return h.epoch.Load()
}

// get returns the answer cached for key in v, if any; kh is hash's of
// key. It does not retain key.
func (h *answerCache) get(v *version, kh uint64, key []byte, raw bool) (*cacheEntry, bool) {
	if h == nil {
		return nil, false
	}
	if !h.held.Load().has(kh) {
		h.counter.RecordMisses(1)
		return nil, false
	}
	e, ok := h.c.GetIfPresent(slot(v, kh, raw))
	if !ok || e.v != v || e.raw != raw || e.key != string(key) {
		return nil, false
	}
	return e, true
}

// put caches res, the complete answer of v to key (of hash kh), when
// its key was missed before (admit) and it is small enough; epoch is
// epochNow's, loaded before v was picked. It sets res.ETag for a found
// value. The key is copied; res.Value is not, and is shared from now on.
func (h *answerCache) put(v *version, kh uint64, key []byte, raw bool, res *Result, epoch uint64) {
	if h == nil || len(key)+len(res.Value) > h.maxEntry || !h.admit(kh) {
		return
	}
	e := &cacheEntry{v: v, key: string(key), raw: raw, value: res.Value, proxiedTo: res.ProxiedTo, found: res.Found}
	if res.Found {
		e.etag = []string{ETag(res.Value)}
		res.ETag = e.etag
	}
	k := slot(v, kh, raw)
	h.c.Set(k, e)
	h.hold(kh)
	if h.epoch.Load() != epoch {
		// A drop ran meanwhile and may have missed this entry: v may be
		// a version it dropped. The next miss caches it again.
		h.c.Invalidate(k)
	}
}

// drop removes the entries of the versions in gone, which lookups no
// longer pick; a lookup that picked one before may still store an entry
// of it, which put removes again.
func (h *answerCache) drop(gone ...*version) {
	if h == nil {
		return
	}
	h.epoch.Add(1)
	if len(gone) == 0 {
		return
	}
	for k, e := range h.c.All() {
		for _, v := range gone {
			if e.v == v {
				if _, ok := h.c.Invalidate(k); ok {
					h.dropped.Add(1)
				}
				break
			}
		}
	}
}

// dropProxied removes the answers of v read from peers: v now holds
// partitions it did not (a heal, heal.go), and answers their keys itself.
// A lookup that proxied before the partitions were added and stores its
// answer after this drop removes it again (put's epoch). Not-found
// answers name no peer and stay: the same version answers the same.
func (h *answerCache) dropProxied(v *version) {
	if h == nil {
		return
	}
	h.epoch.Add(1)
	for k, e := range h.c.All() {
		if e.v == v && e.proxiedTo != "" {
			if _, ok := h.c.Invalidate(k); ok {
				h.dropped.Add(1)
			}
		}
	}
}

// dropCarrying drops the entries of gone as drop does, first keeping
// those of from whose keys are not in changed and storing them again as
// to's (from is in gone: its entries make room for to's, which otter,
// never having seen their keys, would refuse against from's hot ones).
// Only answers read here are carried; a nil from carries none. The
// answers of keys to did not change are to's, ETags included (an ETag
// is the value's).
func (h *answerCache) dropCarrying(gone []*version, from, to *version, changed [][]byte) {
	if h == nil {
		return
	}
	if from == nil || to == nil {
		h.drop(gone...)
		return
	}
	skip := make(map[string]bool, len(changed))
	for _, k := range changed {
		skip[string(k)] = true
	}
	var keep []*cacheEntry
	for _, e := range h.c.All() {
		if e.v == from && e.proxiedTo == "" && !skip[e.key] {
			c := *e
			c.v = to
			keep = append(keep, &c)
		}
	}
	h.drop(gone...)
	epoch := h.epoch.Load()
	for _, e := range keep {
		kh := maphash.String(h.seed, e.key)
		h.c.Set(slot(to, kh, e.raw), e)
		h.hold(kh)
	}
	h.carried.Add(uint64(len(keep)))
	if h.epoch.Load() != epoch {
		// A drop ran meanwhile and may have missed these: to may be a
		// version it dropped.
		for _, e := range keep {
			h.c.Invalidate(slot(to, maphash.String(h.seed, e.key), e.raw))
		}
	}
}

// CacheStatus is the answer cache's state in the status.
type CacheStatus struct {
	// Bytes are the entries' own (keys, values and the per-entry
	// overhead, estimated) and the filters' (the doorkeeper, the filter
	// of held keys).
	Bytes int64 `json:"bytes"`
	// MaxBytes bounds Bytes: Budget over the garbage collector's
	// headroom (entryBound: 3.75 at GOGC 200).
	MaxBytes int64 `json:"max_bytes"`
	// Budget is [storage] hot_cache, the memory the cache may add.
	Budget  int64 `json:"budget"`
	Entries int64 `json:"entries"`
}

// status returns the cache's state; nil without a cache.
func (h *answerCache) status() *CacheStatus {
	if h == nil {
		return nil
	}
	return &CacheStatus{Bytes: h.bytes(), MaxBytes: h.maxBytes(), Budget: h.budget,
		Entries: int64(h.c.EstimatedSize())}
}

// bytes are the entries' estimated bytes and the filters'.
func (h *answerCache) bytes() int64 { return int64(h.c.WeightedSize()) + h.filterBytes() }

// maxBytes bounds bytes: the entries' bound and the filters' share.
func (h *answerCache) maxBytes() int64 { return int64(h.c.GetMaximum()) + h.reserved }

// filterBytes are the bytes of the doorkeeper and of the filter of held
// keys (two while it is made again).
func (h *answerCache) filterBytes() int64 {
	n := len(h.door) + len(h.held.Load().words)
	if f := h.heldNext.Load(); f != nil {
		n += len(f.words)
	}
	return 8 * int64(n)
}

// collectors returns the cache's metrics; none without a cache.
func (h *answerCache) collectors() []prometheus.Collector {
	if h == nil {
		return nil
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	return []prometheus.Collector{
		counter("spangle_hot_cache_hits_total", "Lookups answered from the hot cache of answers, by every door, local and proxied answers alike.",
			func() float64 { return float64(h.counter.Snapshot().Hits) }),
		counter("spangle_hot_cache_misses_total", "Lookups the hot cache did not hold.",
			func() float64 { return float64(h.counter.Snapshot().Misses) }),
		counter("spangle_hot_cache_evictions_total", "Entries evicted from the hot cache for room.",
			func() float64 { return float64(h.evictions.Load()) }),
		counter("spangle_hot_cache_dropped_total", "Entries dropped from the hot cache with their version (switched away from, discarded or closed), and answers from peers of partitions healed here.",
			func() float64 { return float64(h.dropped.Load()) }),
		counter("spangle_hot_cache_carried_total", "Entries of unchanged keys carried over to the version a switch made active (the switch's changed keys known: [purge] max_keys, one node).",
			func() float64 { return float64(h.carried.Load()) }),
		gauge("spangle_hot_cache_bytes", "Estimated bytes held by the hot cache: its entries (keys, values and per-entry overhead) and its filters (the doorkeeper, the filter of held keys).",
			func() float64 { return float64(h.bytes()) }),
		gauge("spangle_hot_cache_entries", "Entries in the hot cache.",
			func() float64 { return float64(h.c.EstimatedSize()) }),
		gauge("spangle_hot_cache_max_bytes", "The bound of spangle_hot_cache_bytes: [storage] hot_cache over the garbage collector's headroom (3.75 at gc_percent 200).",
			func() float64 { return float64(h.maxBytes()) }),
		gauge("spangle_hot_cache_budget_bytes", "The memory the hot cache may add to the process ([storage] hot_cache).",
			func() float64 { return float64(h.budget) }),
	}
}
