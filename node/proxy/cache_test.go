package proxy

import (
	"fmt"
	"testing"
)

// add and get with string keys.
func (c *cache) addS(key string, res Response) { c.add(key, cacheHash([]byte(key)), res) }
func (c *cache) getS(key string) (Response, bool) {
	return c.get([]byte(key), cacheHash([]byte(key)))
}

func TestCacheLRU(t *testing.T) {
	c := newCache(3, 1<<20)
	for i := range 3 {
		c.addS(fmt.Sprint(i), Response{Status: 200, Body: []byte{byte(i)}})
	}
	c.getS("0") // 1 is now the least recently used
	c.addS("3", Response{Status: 200})
	if _, ok := c.getS("1"); ok {
		t.Fatal("1 was not evicted")
	}
	for _, k := range []string{"0", "2", "3"} {
		if _, ok := c.getS(k); !ok {
			t.Fatalf("%s evicted", k)
		}
	}
	if n, _ := c.len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
}

func TestCacheBytes(t *testing.T) {
	const max = 8 * (entryOverhead + 1000)
	c := newCache(1000, max)
	body := make([]byte, 1000-1) // with a 1-byte key: exactly max/8
	for i := range 20 {
		c.addS(string(rune('a'+i)), Response{Body: body})
	}
	n, b := c.len()
	if n != 8 || b != max {
		t.Fatalf("%d entries, %d bytes; want 8, %d", n, b, max)
	}
	// One byte over an eighth of the budget is not cached at all.
	c.addS("z", Response{Body: make([]byte, 1000)})
	if _, ok := c.getS("z"); ok {
		t.Fatal("oversized result cached")
	}
	// Replacing an entry accounts for the size change.
	c.addS("t", Response{Body: nil})
	if _, b2 := c.len(); b2 != max-int64(len(body)) {
		t.Fatalf("%d bytes after a replacement, want %d", b2, max-int64(len(body)))
	}
}

// TestCacheCollision: two keys of one hash take turns in its slot; a
// hit needs the key itself.
func TestCacheCollision(t *testing.T) {
	c := newCache(10, 1<<20)
	c.add("a", 7, Response{Body: []byte("A")})
	c.add("b", 7, Response{Body: []byte("B")})
	if _, ok := c.get([]byte("a"), 7); ok {
		t.Fatal("a hit after b took its slot")
	}
	if res, ok := c.get([]byte("b"), 7); !ok || string(res.Body) != "B" {
		t.Fatalf("b: %+v, %v", res, ok)
	}
	if n, b := c.len(); n != 1 || b != int64(len("b")+len("B")+entryOverhead) {
		t.Fatalf("%d entries, %d bytes", n, b)
	}
}

func TestFlightKey(t *testing.T) {
	reqs := []Request{
		{DB: "ab", Version: "c", Key: []byte("d")},
		{DB: "a", Version: "bc", Key: []byte("d")},
		{DB: "a", Version: "b", Key: []byte("cd")},
		{DB: "a", Version: "b", Key: []byte("cd"), Raw: true},
		{DB: "a", Version: "b\x00", Key: []byte("cd")},
	}
	seen := map[string]int{}
	for i, r := range reqs {
		k := flightKey(r)
		if j, ok := seen[k]; ok {
			t.Fatalf("requests %d and %d share a key", i, j)
		}
		seen[k] = i
	}
}
