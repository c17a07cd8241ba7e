package edge

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/spangledb/spangle/node"
)

// oneVersion is a Versions whose every db is at version "1".
type oneVersion struct{}

func (oneVersion) ActiveVersion(string) (string, bool) { return "1", true }
func (oneVersion) Held() ([]node.HeldVersion, <-chan struct{}) {
	return nil, nil
}

// TestHotCacheEntryOverhead measures the heap an entry takes beyond its
// key's and value's bytes, as a lookup's miss stores it, and checks that
// hotEntryOverhead (what the weigher charges) covers it: the cache's
// bytes must not understate its memory.
func TestHotCacheEntryOverhead(t *testing.T) {
	const entries, keyLen, valueLen = 50_000, 16, 100
	h, err := newHotCache(1<<30, oneVersion{})
	if err != nil {
		t.Fatal(err)
	}
	dh := &dbHandle{db: "bench"}
	res := node.Result{Found: true, Version: "1", Modified: time.Unix(1e9, 0)}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// The keys and values are made before the first measure: a lookup's
	// value is the node's allocation, its key is copied by put.
	keys := make([]string, entries)
	values := make([][]byte, entries)
	for i := range keys {
		keys[i] = fmt.Sprintf("%0*d", keyLen, i)
		values[i] = make([]byte, valueLen)
	}
	before := heap()
	for i := range keys {
		r := res
		r.Value = values[i]
		h.put(dh, "1", keys[i], false, answerOf(dh, &r), 0)
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
	t.Logf("%.0f bytes per entry beyond its key and value; charged %d", perEntry, hotEntryOverhead)
	if perEntry > hotEntryOverhead {
		t.Errorf("an entry takes %.0f bytes beyond its key and value, more than hotEntryOverhead %d", perEntry, hotEntryOverhead)
	}
}

// TestHotCacheDoorkeeper: a key's first miss is not admitted, its second
// is; keys asked once are rarely admitted (false positives of the
// filter), and the filter is cleared as it fills, so a key marked long
// ago must be missed twice again.
func TestHotCacheDoorkeeper(t *testing.T) {
	h, err := newHotCache(1<<20, oneVersion{})
	if err != nil {
		t.Fatal(err)
	}
	if h.admit("hot") {
		t.Fatal("a key's first miss was admitted")
	}
	if !h.admit("hot") {
		t.Fatal("a key's second miss was not admitted")
	}
	// Keys missed once long ago: the filter is cleared before they come back.
	const old = 100
	for i := range old {
		h.admit(fmt.Sprintf("old-%d", i))
	}
	// A uniform load: every key once, many times the filter's capacity.
	const keys = 1_000_000
	admitted := 0
	for i := range keys {
		if h.admit(fmt.Sprintf("key-%08d", i)) {
			admitted++
		}
	}
	t.Logf("%d of %d keys asked once admitted (%d words)", admitted, keys, len(h.door))
	if admitted > keys/10 {
		t.Errorf("%d of %d keys asked once were admitted: the filter is not cleared as it fills", admitted, keys)
	}
	// A false positive admits a few (6 % of the load above, at most 15 %
	// as the filter fills); kept marks would admit them all.
	remembered := 0
	for i := range old {
		if h.admit(fmt.Sprintf("old-%d", i)) {
			remembered++
		}
	}
	if remembered > old/2 {
		t.Errorf("%d of %d keys marked before the filter was cleared were admitted at their next miss", remembered, old)
	}
}
