package node

import (
	"context"
	"testing"

	"github.com/spangledb/spangle/node/nodetest"
)

// TestCacheCarry: a switch whose changed keys the db kept (ChangedKeys)
// carries the cached answers of the keys it did not change over to the
// new version — the first lookup of one is a hit, of the new version —
// and not those of the keys it changed; a switch changing more keys
// than kept drops them all. Without the carry, the first lookup after
// the switch is a miss.
func TestCacheCarry(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 2, records(0, 100))
	n := newTestNode(t, root, func(c *Config) { c.ChangedKeys = 5 })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	ctx := context.Background()
	get := func(key string) Result {
		t.Helper()
		res, err := n.Get(ctx, "d", []byte(key), GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	cache := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			get(k) // marked by the doorkeeper
			get(k) // stored
			if !get(k).Cached {
				t.Fatalf("%s not cached", k)
			}
		}
	}
	cache("key-1", "key-10", "key-200")
	nodetest.WriteVersion(t, root, "d", "v2", 3, records(0, 100, 10))
	n.Refresh()
	waitFor(t, "v2 active", func() bool { return n.activeVersion("d") == "v2" })
	// The switch carries after it makes v2 active (db.set).
	waitFor(t, "answers carried", func() bool { return n.cache.carried.Load() >= 2 })
	for _, c := range []struct {
		key, value string
		found      bool
		cached     bool
	}{
		{"key-1", "value-1", true, true},
		{"key-10", "changed", true, false},
		{"key-200", "", false, true}, // missing from both
	} {
		res := get(c.key)
		if res.Cached != c.cached || res.Version != "v2" || res.Found != c.found || string(res.Value) != c.value {
			t.Errorf("after the switch to v2, %s: cached %v, version %s, found %v, value %q; want cached %v, v2, found %v, %q",
				c.key, res.Cached, res.Version, res.Found, res.Value, c.cached, c.found, c.value)
		}
	}
	// A switch changing more keys than kept: nothing is carried.
	cache("key-1", "key-10")
	nodetest.WriteVersion(t, root, "d", "v3", 2, records(0, 100, 1, 2, 3, 4, 5, 6))
	n.Refresh()
	waitFor(t, "v3 active", func() bool { return n.activeVersion("d") == "v3" })
	if res := get("key-10"); res.Cached || res.Version != "v3" {
		t.Errorf("after the switch to v3 (6 keys changed, 5 kept), key-10: cached %v, version %s", res.Cached, res.Version)
	}
}
