package edge

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/maypok86/otter/v2"
	"github.com/maypok86/otter/v2/stats"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/node"
)

// The hot cache keeps what a GET of a hot key needs — the value as
// answered (decoded), its ETag and the version's header values — so
// that a key asked again is answered without the bbolt seek, the block's
// decoding or the ETag's hash. Entries are named by (db, version, key,
// raw): a lookup reads the db's active version first (Config.Versions),
// so an entry is served only for the version a Get would read now, and
// its answer carries that version's header. Entries of a version the db
// switched away from are dropped (Serve follows the backend's held
// versions); until then they are merely unreachable.
//
// Only unpinned lookups answered here are cached: a peer's ?proxy=
// lookup names a version that may be pending or retired, and a proxied
// answer (ProxiedTo) is node/proxy's to cache.

// Versions is what the hot cache needs of a node beside Backend: the
// name of a db's active version, read without blocking, and the held
// versions to follow (HeldSource). *node.Node implements it.
type Versions interface {
	// ActiveVersion returns the name of the version a Get of db without
	// GetOptions.Version reads at this moment; false when there is none.
	// It must not block, and a lookup started after it returned must
	// read that version or a later one.
	ActiveVersion(db string) (string, bool)
	HeldSource
}

// hotVersion names a version of a db in the cache's keys, so that a
// lookup hashes one pointer instead of the two names. The db's handle
// keeps the one of the version it served last (dbHandle.hotVersion);
// two for the same names may exist for a while (concurrent switches),
// and then an entry stored under one is missed under the other, never
// served for another version.
type hotVersion struct{ db, version string }

// hotKey names a cached answer.
type hotKey struct {
	v   *hotVersion
	key string
	raw bool
}

// answer is what a found or missing key's response is written from. The
// miss path builds one per request (it replaced the ETag's own
// allocation); a cached one is shared by every hit and never modified.
type answer struct {
	hs    *headerSet
	value []byte // owned by the answer: never modified
	found bool
	// etagVal is the ETag header's value, naming etag's bytes; set by
	// setETag for a found value.
	etagVal [1]string
	etag    [etagLen]byte
}

// setETag computes a's ETag from its value.
func (a *answer) setETag() {
	appendETag(a.etag[:0], a.value)
	a.etagVal[0] = unsafe.String(&a.etag[0], etagLen)
}

// hotEntryOverhead is the memory an entry costs beyond its key's and
// value's bytes: the hotKey and answer structs, otter's node and its
// hash table's share. Measured by TestHotCacheEntryOverhead (about 200
// bytes per entry on amd64), rounded up.
const hotEntryOverhead = 256

// hotCache is the bounded cache of answers. Safe for concurrent use.
type hotCache struct {
	c        *otter.Cache[hotKey, *answer]
	counter  *stats.Counter
	active   Versions
	maxEntry int // larger entries are not cached
	// epoch is incremented before every drop: an answer looked up before
	// a drop and stored after it is removed again (put).
	epoch     atomic.Uint64
	dropped   atomic.Uint64 // entries dropped at switches
	evictions atomic.Uint64 // entries evicted for room

	// door is the doorkeeper: a two-hash Bloom filter of the keys missed
	// since its last reset. A miss is cached only when its key is in it
	// already (admit), so a key asked once — most of a uniform load —
	// costs a bit, not an insertion into the full cache and an eviction
	// (4 µs of CPU per GET at 50 connections). doorSet counts the keys
	// marked since the reset (admit's false answers); when it reaches a
	// quarter of the bits (two bits a key: about half of them set) the
	// filter is cleared.
	door    []atomic.Uint64
	doorSet atomic.Int64
	seed    maphash.Seed

	// The follower's goroutine (follow), ended by closing quit (stop).
	wg   sync.WaitGroup
	quit chan struct{}
	mu   sync.Mutex // guards stopped
	// stopped is set by stop: follow starts nothing afterwards.
	stopped bool
}

// newHotCache returns a cache of maxBytes over active, or nil when
// maxBytes is 0 or active is nil.
func newHotCache(maxBytes int64, active Versions) (*hotCache, error) {
	if maxBytes <= 0 || active == nil {
		return nil, nil
	}
	h := &hotCache{
		counter: stats.NewCounter(),
		active:  active,
		// An entry of a sixteenth of the cache would evict many hot
		// small ones for one value a bbolt read serves as fast.
		maxEntry: int(min(maxBytes/16, 1<<30)),
		quit:     make(chan struct{}),
		door:     make([]atomic.Uint64, doorWords(maxBytes)),
		seed:     maphash.MakeSeed(),
	}
	c, err := otter.New(&otter.Options[hotKey, *answer]{
		MaximumWeight: uint64(maxBytes),
		Weigher: func(k hotKey, a *answer) uint32 {
			return uint32(hotEntryOverhead + len(k.key) + len(a.value))
		},
		StatsRecorder: h.counter,
		OnDeletion: func(e otter.DeletionEvent[hotKey, *answer]) {
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

// doorWords returns the doorkeeper's size in 64-bit words for a cache of
// maxBytes: 32 bits per entry of 100-byte values the cache can hold
// (it is cleared after 8 keys per entry, so a key keeps its mark while
// some 8 times the cache's keys are missed), rounded up to a power of
// two, at least 1,024 words (8 KiB), at most 1 << 20 (8 MiB).
func doorWords(maxBytes int64) int {
	entries := max(maxBytes/(hotEntryOverhead+128), 1)
	words := uint64(max(entries/2, 1024))
	return int(min(uint64(1)<<(64-bits.LeadingZeros64(words-1)), 1<<20))
}

// admit reports whether a miss of key should be cached: true when key
// was missed before since the doorkeeper's last reset; otherwise it
// marks key and returns false. Safe for concurrent use; approximate by
// design (a false positive admits a key once early).
func (h *hotCache) admit(key string) bool {
	x := maphash.String(h.seed, key)
	mask := uint64(len(h.door)*64 - 1)
	i, j := x&mask, (x>>32)&mask
	bi, bj := uint64(1)<<(i%64), uint64(1)<<(j%64)
	oi := h.door[i/64].Or(bi)
	oj := h.door[j/64].Or(bj)
	if oi&bi != 0 && oj&bj != 0 {
		return true
	}
	if n := h.doorSet.Add(1); n == int64(len(h.door)*64/4) {
		// Two bits per key: a quarter of the keys is half of the bits.
		for k := range h.door {
			h.door[k].Store(0)
		}
		h.doorSet.Add(-n)
	}
	return false
}

// get returns the answer cached for the active version of dh's db, if
// any.
func (h *hotCache) get(dh *dbHandle, key string, raw bool) (*answer, bool) {
	v, ok := h.active.ActiveVersion(dh.db)
	if !ok {
		return nil, false
	}
	return h.c.GetIfPresent(hotKey{v: dh.hotVersion(v), key: key, raw: raw})
}

// put caches a, the answer of version of dh's db to key; epoch is h.epoch
// as loaded before the lookup. The key is copied; a is not, and must not
// be modified afterwards.
func (h *hotCache) put(dh *dbHandle, version, key string, raw bool, a *answer, epoch uint64) {
	if len(key)+len(a.value) > h.maxEntry {
		return
	}
	k := hotKey{v: dh.hotVersion(version), key: string(append([]byte(nil), key...)), raw: raw}
	h.c.Set(k, a)
	if h.epoch.Load() != epoch {
		// A drop ran meanwhile and may have missed this entry: the version
		// may be the one it dropped. The next miss caches it again.
		h.c.Invalidate(k)
	}
}

// drop removes every entry of the dbs in changed whose version is not
// the db's active one (active[db]; absent: none).
func (h *hotCache) drop(changed map[string]bool, active map[string]string) {
	h.epoch.Add(1)
	for k := range h.c.Keys() {
		if changed[k.v.db] && k.v.version != active[k.v.db] {
			if _, ok := h.c.Invalidate(k); ok {
				h.dropped.Add(1)
			}
		}
	}
}

// follow starts the goroutine that drops the entries of replaced
// versions, following the held versions, until stop. After stop it
// starts nothing.
func (h *hotCache) follow() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.wg.Go(func() {
		active := map[string]string{}
		for {
			held, changed := h.active.Held()
			now := map[string]string{}
			for _, v := range held {
				if v.Active {
					now[v.DB] = v.Version
				}
			}
			switched := map[string]bool{}
			for db, v := range active {
				if now[db] != v {
					switched[db] = true
				}
			}
			if len(switched) > 0 {
				h.drop(switched, now)
			}
			active = now
			select {
			case <-h.quit:
				return
			case <-changed:
			}
		}
	})
}

// stop ends follow's goroutine and waits for it; idempotent.
func (h *hotCache) stop() {
	h.mu.Lock()
	if !h.stopped {
		h.stopped = true
		close(h.quit)
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// register exposes the cache's figures on reg.
func (h *hotCache) register(reg prometheus.Registerer) error {
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		counter("spangle_hot_cache_hits_total", "Lookups answered from the hot cache.",
			func() float64 { return float64(h.counter.Snapshot().Hits) }),
		counter("spangle_hot_cache_misses_total", "Cacheable lookups the hot cache did not hold.",
			func() float64 { return float64(h.counter.Snapshot().Misses) }),
		counter("spangle_hot_cache_evictions_total", "Entries evicted from the hot cache for room.",
			func() float64 { return float64(h.evictions.Load()) }),
		counter("spangle_hot_cache_dropped_total", "Entries dropped from the hot cache because their version was switched away from.",
			func() float64 { return float64(h.dropped.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "spangle_hot_cache_bytes",
			Help: "Estimated bytes held by the hot cache (keys, values and per-entry overhead)."},
			func() float64 { return float64(h.c.WeightedSize()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "spangle_hot_cache_entries", Help: "Entries in the hot cache."},
			func() float64 { return float64(h.c.EstimatedSize()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "spangle_hot_cache_max_bytes", Help: "The hot cache's bound ([storage] hot_cache)."},
			func() float64 { return float64(h.c.GetMaximum()) }),
	}
	for _, c := range cs {
		if _, err := register(reg, c); err != nil {
			return err
		}
	}
	return nil
}

// answerOf returns the answer to write for res, a lookup of dh's db.
func answerOf(dh *dbHandle, res *node.Result) *answer {
	a := &answer{hs: dh.headersFor(res), value: res.Value, found: res.Found}
	if a.found {
		a.setETag()
	}
	return a
}
