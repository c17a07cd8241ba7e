package proxy

import (
	"hash/maphash"
	"sync"
)

// entryOverhead approximates the bytes an entry costs beyond its strings
// and body: the entry itself, the map slot, the Response header.
const entryOverhead = 160

// cache is the hot cache: a bounded LRU of Responses by flight key. No
// TTL: a (db, version, key) never changes its answer. Safe for concurrent
// use. Responses in it are never handed out: callers clone their Body.
//
// The map is keyed by the flight key's 64-bit hash (cacheHash), not by
// the key: a lookup hashes a key once, and an eviction touches no key
// bytes. The entry holds the key, which a hit must match; two keys that
// share a hash take turns in one slot.
type cache struct {
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex             // guards the fields below
	items map[uint64]*cacheEntry // by hash
	head  cacheEntry             // sentinel of the LRU ring: head.next is the most recently used
	n     int
	bytes int64
}

type cacheEntry struct {
	key        string
	hash       uint64
	res        Response
	size       int64
	prev, next *cacheEntry
}

// cacheSeed seeds cacheHash; one per process is enough: the hash only
// spreads keys over a map.
var cacheSeed = maphash.MakeSeed()

// cacheHash is the hash the cache files a flight key under.
func cacheHash(key []byte) uint64 { return maphash.Bytes(cacheSeed, key) }

func newCache(maxEntries int, maxBytes int64) *cache {
	c := &cache{maxEntries: maxEntries, maxBytes: maxBytes, items: map[uint64]*cacheEntry{}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

// get returns the cached Response for key, of hash h (cacheHash(key));
// its Body must not be modified. It does not retain key.
func (c *cache) get(key []byte, h uint64) (Response, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.items[h]
	if e == nil || e.key != string(key) {
		return Response{}, false
	}
	c.unlinkLocked(e)
	c.pushFrontLocked(e)
	return e.res, true
}

// add caches res under key, of hash h (cacheHash(key)), taking ownership
// of res.Body, and evicts the least recently used entries beyond the
// bounds. A result larger than an eighth of maxBytes is not cached.
func (c *cache) add(key string, h uint64, res Response) {
	size := int64(len(key)+len(res.Body)+len(res.Version)+len(res.ContentType)+
		len(res.ETag)+len(res.LastModified)+len(res.Peer)) + entryOverhead
	if size > c.maxBytes/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.items[h]; e != nil {
		// The same key, or another of the same hash, which it replaces.
		c.bytes += size - e.size
		e.key, e.res, e.size = key, res, size
		c.unlinkLocked(e)
		c.pushFrontLocked(e)
	} else {
		e := &cacheEntry{key: key, hash: h, res: res, size: size}
		c.items[h] = e
		c.pushFrontLocked(e)
		c.n++
		c.bytes += size
	}
	for c.n > c.maxEntries || c.bytes > c.maxBytes {
		e := c.head.prev
		c.unlinkLocked(e)
		delete(c.items, e.hash)
		c.n--
		c.bytes -= e.size
	}
}

func (c *cache) unlinkLocked(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *cache) pushFrontLocked(e *cacheEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// len returns the number of entries and their bytes.
func (c *cache) len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.bytes
}
