package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestListPositions: a listing's pages continue the partitions where the
// previous page left them (spangle_list_continued_partitions_total) and
// list what a node keeping no positions lists, in both layouts; listings
// run at once with the same pages, which take each other's positions,
// list the same; a cursor of a version still held continues it after a
// switch, and a new listing of the new version reads none of the old
// one's positions.
func TestListPositions(t *testing.T) {
	recs := listRecords("1", 3000)
	keys, vals := sortedKeys(recs)
	for _, comp := range []string{"s2-blocks", "none"} {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			nodetest.WriteVersion(t, root, "d", "1", 5, recs)
			reg := prometheus.NewRegistry()
			n := newTestNode(t, root, func(c *Config) { c.Compression = comp; c.Registerer = reg })
			off := newTestNode(t, root, func(c *Config) { c.Compression = comp; c.ListPositionBytes = 0 })
			continued := func() float64 { return nodetest.Metric(t, reg, "spangle_list_continued_partitions_total") }
			for _, opts := range []ListOptions{
				{Limit: 7, Values: true},
				{Limit: 100},
				{Limit: 13, Prefix: []byte("user/01")},
				{Limit: 5, Start: []byte(keys[100]), End: []byte(keys[400])},
			} {
				before := continued()
				got, gotVals, _ := listAll(t, n, "d", opts)
				want, _, _ := listAll(t, off, "d", opts)
				if !slices.Equal(got, want) || !slices.Equal(want, inRange(keys, opts)) {
					t.Fatalf("%+v: %d keys, %d without positions, want %d", opts, len(got), len(want), len(inRange(keys, opts)))
				}
				for i, v := range gotVals {
					if v != vals[got[i]] {
						t.Fatalf("value of %q = %.20q, want %.20q", got[i], v, vals[got[i]])
					}
				}
				// In the s2-blocks layout every page after the first
				// continues the partitions still in the range (none only
				// those that ended: a bbolt cursor is not kept).
				if pages := (len(got) + opts.Limit - 1) / opts.Limit; comp == "s2-blocks" && pages > 2 && continued()-before < float64(pages-2) {
					t.Errorf("%+v: %v partitions continued over %d pages", opts, continued()-before, pages)
				}
			}
			// A first page keeps its positions; a last page none.
			if _, err := n.List(context.Background(), "d", ListOptions{Limit: 10}); err != nil {
				t.Fatal(err)
			}
			if b := nodetest.Metric(t, reg, "spangle_list_positions_bytes"); (b > 0) != (comp == "s2-blocks") || b > float64(DefaultConfig().ListPositionBytes) {
				t.Errorf("positions hold %v bytes after a first page", b)
			}

			// A peer's page keeps no positions.
			held := nodetest.Metric(t, reg, "spangle_list_positions_bytes")
			if page, err := n.List(context.Background(), "d", ListOptions{Version: "1", Partitions: []int{0, 1}, Limit: 10, Start: []byte("user/02")}); err != nil || !page.More {
				t.Fatalf("a peer's page: %v, more %v", err, page.More)
			}
			if got := nodetest.Metric(t, reg, "spangle_list_positions_bytes"); got != held {
				t.Errorf("a peer's page kept positions: %v bytes, was %v", got, held)
			}

			var wg sync.WaitGroup
			errs := make(chan string, 4)
			for range 4 {
				wg.Go(func() {
					got, _, _ := listAll(t, n, "d", ListOptions{Limit: 50})
					if !slices.Equal(got, keys) {
						errs <- fmt.Sprintf("a concurrent listing: %d keys, want %d", len(got), len(keys))
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

// TestListPositionsVersionSwitch: a first page of version 1 keeps its
// positions; after the switch, a listing of version 2 with the same page
// boundaries (so the same ranges) reads version 2's values only
// (positions are kept by version, and hold the contents they were read
// from: blocks' TestScanResume), and version 1's cursor no longer lists.
func TestListPositionsVersionSwitch(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "1", 3, nodetest.Numbered("1", 300))
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	first, err := n.List(context.Background(), "d", ListOptions{Limit: 10, Values: true})
	if err != nil || first.Cursor == "" {
		t.Fatal(first, err)
	}
	nodetest.WriteVersion(t, root, "d", "2", 3, nodetest.Numbered("2", 300))
	n.Refresh()
	waitFor(t, "version 2", func() bool { return n.activeVersion("d") == "2" })
	n.waitRetired(t, "d", "1")
	// The same first page of version 2 leaves positions under the same
	// range as version 1's did: its next page reads version 2's only.
	_, vals, versions := listAll(t, n, "d", ListOptions{Limit: 10, Values: true})
	if len(vals) != 300 || slices.ContainsFunc(vals, func(v string) bool { return !strings.HasPrefix(v, "2:") }) || len(slices.Compact(versions)) != 1 {
		t.Fatalf("a listing of version 2: %d values, versions %v", len(vals), slices.Compact(versions))
	}
	if _, err := n.List(context.Background(), "d", ListOptions{Limit: 10, Cursor: first.Cursor}); err == nil {
		t.Fatal("a cursor of version 1, removed, still lists")
	}
	if got := nodetest.Metric(t, reg, "spangle_list_continued_partitions_total"); got == 0 {
		t.Error("no partition continued")
	}
}

// TestListPositionsBound: the kept positions never hold more than their
// bound, the least recently kept go first, one larger than the bound
// alone is not kept, a take removes them, and a bound of 0 keeps none.
func TestListPositionsBound(t *testing.T) {
	pos := func(key string, parts int) *listPosition {
		lp := &listPosition{key: key}
		for p := range parts {
			lp.parts = append(lp.parts, partPosition{p: p, pos: blocks.Position{}})
		}
		return lp
	}
	one := len("a") + listPositionOverhead // a position of one partition, key "a"
	ps := newListPositions(3 * one)
	for _, k := range []string{"a", "b", "c", "d"} {
		ps.put(pos(k, 1))
		if ps.bytes() > 3*one {
			t.Fatalf("%d bytes kept, over %d", ps.bytes(), 3*one)
		}
	}
	if ps.take("a") != nil {
		t.Error("the least recently kept was not dropped")
	}
	if lp := ps.take("b"); lp == nil || lp.key != "b" {
		t.Errorf("take(b) = %v", lp)
	}
	if ps.take("b") != nil {
		t.Error("a take did not remove")
	}
	ps.put(pos("e", 4))
	if ps.take("e") != nil {
		t.Error("a position over the bound alone was kept")
	}
	if _, ok := (*listPosition)(nil).of(0); ok {
		t.Error("no positions have one")
	}
	none := newListPositions(0)
	none.put(pos("a", 1))
	if none.take("a") != nil || none.bytes() != 0 {
		t.Error("a bound of 0 kept a position")
	}
}
