package proxy

import (
	"container/list"
	"sync"
)

// entryOverhead approximates the bytes an entry costs beyond its strings
// and body: the list element, the map slot, the Response header.
const entryOverhead = 160

// cache is the hot cache: a bounded LRU of Responses by flight key. No
// TTL: a (db, version, key) never changes its answer. Safe for concurrent
// use. Responses in it are never handed out: callers clone their Body.
type cache struct {
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex // guards ll, items and bytes
	ll    *list.List // of *cacheEntry, most recently used first
	items map[string]*list.Element
	bytes int64
}

type cacheEntry struct {
	key  string
	res  Response
	size int64
}

func newCache(maxEntries int, maxBytes int64) *cache {
	return &cache{maxEntries: maxEntries, maxBytes: maxBytes, ll: list.New(), items: map[string]*list.Element{}}
}

// get returns the cached Response for key; its Body must not be modified.
func (c *cache) get(key string) (Response, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return Response{}, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cacheEntry).res, true
}

// add caches res under key, taking ownership of res.Body, and evicts the
// least recently used entries beyond the bounds. A result larger than an
// eighth of maxBytes is not cached.
func (c *cache) add(key string, res Response) {
	size := int64(len(key)+len(res.Body)+len(res.Version)+len(res.ContentType)+
		len(res.ETag)+len(res.LastModified)+len(res.Peer)) + entryOverhead
	if size > c.maxBytes/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		old := e.Value.(*cacheEntry)
		c.bytes += size - old.size
		old.res, old.size = res, size
		c.ll.MoveToFront(e)
	} else {
		c.items[key] = c.ll.PushFront(&cacheEntry{key: key, res: res, size: size})
		c.bytes += size
	}
	for c.ll.Len() > c.maxEntries || c.bytes > c.maxBytes {
		e := c.ll.Back()
		ce := e.Value.(*cacheEntry)
		c.ll.Remove(e)
		delete(c.items, ce.key)
		c.bytes -= ce.size
	}
}

// len returns the number of entries and their bytes.
func (c *cache) len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len(), c.bytes
}
