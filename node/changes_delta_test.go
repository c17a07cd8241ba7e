package node

import (
	"slices"
	"testing"
)

// TestChangedKeysDelta: a switch to a delta version built over the
// active one keeps the keys the delta's build changed (added, changed,
// deleted; not an upsert of the value a key had, nor the deletion of a
// key the base lacks) for the purge hooks, with no diff of the two
// versions; a delta over a version that is not the active one is
// diffed as before. It fails without blocks.Version.DeltaKeys (a diff
// per delta).
func TestChangedKeysDelta(t *testing.T) {
	root := t.TempDir()
	s := newDeltaSource(t, root, "d", 2)
	s.full("v1", 100)
	n := newTestNode(t, root, func(c *Config) { c.ChangedKeys = 10 })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	d := (*n.dbs.Load())["d"]

	s.delta("v2", "v1", map[string]string{"key-1": "x", "key-20": "x", "new-1": "x", "key-6": "v1:6"}, []string{"key-9", "nope"}, true)
	n.Refresh()
	waitFor(t, "v2 active", func() bool { return n.activeVersion("d") == "v2" })
	ch, ok := n.ChangedKeys("d", "v2")
	var got []string
	for _, k := range ch.Keys {
		got = append(got, string(k))
	}
	slices.Sort(got)
	if want := []string{"key-1", "key-20", "key-9", "new-1"}; !ok || ch.From != "v1" || !slices.Equal(got, want) {
		t.Errorf("changed keys of v2 %q from %q (%v), want %q from v1", got, ch.From, ok, want)
	}
	if got := d.diffs.Load(); got != 0 {
		t.Errorf("%d diffs made of a delta version", got)
	}
}
