package node

import (
	"hash/maphash"
	"sync/atomic"
)

// heldFilter is a Bloom filter of the keys of the answer cache's entries
// (answerCache.held): two bits of one 64-bit word per key, so that a
// lookup reads one word of it. A key whose bits are not both set is not
// cached, and its lookup misses without probing otter: otter's probe
// reads a bucket of its table, and often a node, memory the processor's
// caches seldom keep between lookups that read blocks.
type heldFilter struct {
	words []atomic.Uint64
}

// bits returns the word and the bits of the key of hash x (answerCache's
// hash): other bits of x than the doorkeeper's.
func (f *heldFilter) bits(x uint64) (*atomic.Uint64, uint64) {
	w := &f.words[(x>>12)&uint64(len(f.words)-1)]
	return w, 1<<((x>>40)&63) | 1<<((x>>46)&63)
}

// has reports whether the key of hash x may be cached.
func (f *heldFilter) has(x uint64) bool {
	w, m := f.bits(x)
	return w.Load()&m == m
}

// add marks the key of hash x as cached.
func (f *heldFilter) add(x uint64) {
	if w, m := f.bits(x); w.Load()&m != m {
		w.Or(m)
	}
}

// hold marks the key of hash kh as cached: called after its entry is
// stored, so that a lookup that finds its bits finds the entry. The
// bits of keys evicted or dropped stay (a lookup of one probes otter and
// misses) until the filter is made again of the keys cached then, after
// as many keys were held since as the cache holds (heldKeys): so at most
// twice that many keys' bits are set, an eighth of the bits at most,
// and a key never cached passes about one time in sixty at most.
func (h *answerCache) hold(kh uint64) {
	if f := h.heldNext.Load(); f != nil {
		f.add(kh) // a remake is under way
	}
	for {
		f := h.held.Load()
		f.add(kh)
		if h.held.Load() == f {
			break
		}
		// Made again meanwhile: the new filter must have the key too.
	}
	if h.heldAdds.Add(1) >= h.heldKeys && h.heldAdds.Swap(0) >= h.heldKeys {
		h.remakeHeld()
	}
}

// remakeHeld replaces the filter by one of the keys cached now, which
// it marks walking otter's entries; a key held meanwhile is marked in
// it by hold (heldNext), so a cached key is in the filter throughout.
func (h *answerCache) remakeHeld() {
	f := &heldFilter{words: make([]atomic.Uint64, len(h.held.Load().words))}
	if !h.heldNext.CompareAndSwap(nil, f) {
		return // another lookup remakes it
	}
	for _, e := range h.c.All() {
		f.add(maphash.String(h.seed, e.key))
	}
	h.held.Store(f)
	h.heldNext.Store(nil)
}
