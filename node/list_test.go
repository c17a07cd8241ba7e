package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/node/nodetest"
)

// listRecords are keys a listing must keep apart and in bytewise order:
// '/', '%', NUL, bytes that are not UTF-8, keys that are others'
// prefixes, a large value and an empty one.
func listRecords(version string, n int) []nodetest.Record {
	var recs []nodetest.Record
	for i := range n {
		k := fmt.Appendf(nil, "user/%03d/item%%%d", i%40, i)
		switch i % 6 {
		case 1:
			k = append(k, 0, byte(i))
		case 2:
			k = append([]byte{0xff, byte(i)}, k...)
		case 3:
			k = fmt.Appendf(nil, "user/%03d", i%40) // a prefix of the others
			if i >= 240 {
				k = fmt.Appendf(nil, "top%d", i)
			}
		}
		v := fmt.Appendf(nil, "%s:%d", version, i)
		switch i {
		case 4:
			v = bytes.Repeat([]byte("large "), 2000)
		case 5:
			v = []byte{}
		}
		recs = append(recs, nodetest.Record{Key: k, Value: v})
	}
	return recs
}

// sortedKeys returns the distinct keys of recs, sorted, and their last
// values.
func sortedKeys(recs []nodetest.Record) ([]string, map[string]string) {
	vals := map[string]string{}
	for _, r := range recs {
		vals[string(r.Key)] = string(r.Value)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, vals
}

// inRange returns the keys of the sorted keys in opts' prefix and range.
func inRange(keys []string, opts ListOptions) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, string(opts.Prefix)) && k >= string(opts.Start) && (len(opts.End) == 0 || k < string(opts.End)) {
			out = append(out, k)
		}
	}
	return out
}

// listAll follows a listing's cursors to its end and returns its keys,
// values and the versions of its pages.
func listAll(t testing.TB, l interface {
	List(context.Context, string, ListOptions) (ListPage, error)
}, db string, opts ListOptions) (keys []string, vals []string, versions []string) {
	t.Helper()
	for pages := 0; ; pages++ {
		if pages > 100000 {
			t.Fatal("a listing without end")
		}
		page, err := l.List(context.Background(), db, opts)
		if err != nil {
			t.Fatalf("List(%s, %+v): %v", db, opts, err)
		}
		if len(page.Keys) > opts.Limit {
			t.Fatalf("a page of %d keys, over the limit %d", len(page.Keys), opts.Limit)
		}
		if opts.Values && len(page.Values) != len(page.Keys) {
			t.Fatalf("%d values for %d keys", len(page.Values), len(page.Keys))
		}
		for i, k := range page.Keys {
			keys = append(keys, string(k))
			if opts.Values {
				vals = append(vals, string(page.Values[i]))
			}
		}
		versions = append(versions, page.Version)
		if page.Cursor == "" {
			if page.More {
				t.Fatal("More without a cursor")
			}
			return keys, vals, versions
		}
		if len(page.Keys) == 0 {
			t.Fatal("an empty page with a cursor")
		}
		opts.Cursor = page.Cursor
	}
}

// checkListings compares complete listings of db, at several page sizes,
// prefixes and ranges, with the sorted source keys.
func checkListings(t *testing.T, l interface {
	List(context.Context, string, ListOptions) (ListPage, error)
}, db string, recs []nodetest.Record) {
	t.Helper()
	keys, vals := sortedKeys(recs)
	cases := []ListOptions{
		{},
		{Prefix: []byte("user/007")},
		{Prefix: []byte("user/007/")},
		{Prefix: []byte("user/")},
		{Prefix: []byte{0xff}},
		{Prefix: []byte("nothing")},
		{Start: []byte("user/010"), End: []byte("user/020")},
		{Start: []byte(keys[3]), End: []byte(keys[len(keys)-3])},
		{Prefix: []byte("user/"), Start: []byte("user/030"), End: []byte("user/035/item%")},
		{Start: []byte("z"), End: []byte("a")},
		{Start: []byte("user/001/item%1\x00")},
	}
	for _, c := range cases {
		want := inRange(keys, c)
		for _, limit := range []int{1, 7, 100, 1000} {
			if limit == 1 && len(want) > 300 {
				continue // time
			}
			c.Limit = limit
			c.Values = limit == 7
			got, gotVals, versions := listAll(t, l, db, c)
			if !slices.Equal(got, want) {
				t.Fatalf("List(prefix %q, [%q, %q), limit %d): %d keys, want %d\n got %q\nwant %q",
					c.Prefix, c.Start, c.End, limit, len(got), len(want), head(got), head(want))
			}
			for i, v := range gotVals {
				if v != vals[got[i]] {
					t.Fatalf("value of %q = %.20q, want %.20q", got[i], v, vals[got[i]])
				}
			}
			if versions = slices.Compact(versions); len(versions) != 1 {
				t.Fatalf("pages of versions %v", versions)
			}
		}
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

// TestList: complete listings of a single node's db, over several page
// sizes, prefixes and ranges, in every layout, equal the sorted source
// keys; values come with their keys.
func TestList(t *testing.T) {
	recs := listRecords("1", 600)
	for _, comp := range []string{"s2-blocks", "none", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			nodetest.WriteVersion(t, root, "d", "1", 5, recs)
			n := newTestNode(t, root, func(c *Config) { c.Compression = comp })
			checkListings(t, n, "d", recs)
		})
	}
}

// TestListBounds: a page stops at MaxBytes (the next page goes on from
// there), a record alone over it is ErrTooLarge; hostile parameters are
// ErrBadListing or ErrBadCursor, an unknown db ErrUnknownDB.
func TestListBounds(t *testing.T) {
	root := t.TempDir()
	recs := listRecords("1", 200)
	nodetest.WriteVersion(t, root, "d", "1", 3, recs)
	nodetest.WriteVersion(t, root, "e", "1", 3, recs)
	n := newTestNode(t, root, nil)
	keys, _ := sortedKeys(recs)
	got, _, _ := listAll(t, n, "d", ListOptions{Limit: 1000, MaxBytes: 100})
	if !slices.Equal(got, keys) {
		t.Fatalf("pages of 100 bytes: %d keys, want %d", len(got), len(keys))
	}
	if _, err := n.List(context.Background(), "d", ListOptions{Limit: 1000, MaxBytes: 100, Values: true, Start: []byte("user/004/item%4")}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a record over MaxBytes = %v, want ErrTooLarge", err)
	}
	page, err := n.List(context.Background(), "e", ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	long := bytes.Repeat([]byte("p"), MaxListKeyLen+1)
	for _, tc := range []struct {
		name string
		opts ListOptions
		want error
	}{
		{"limit 0", ListOptions{}, ErrBadListing},
		{"negative limit", ListOptions{Limit: -1}, ErrBadListing},
		{"long prefix", ListOptions{Limit: 1, Prefix: long}, ErrBadListing},
		{"long start", ListOptions{Limit: 1, Start: long}, ErrBadListing},
		{"long end", ListOptions{Limit: 1, End: long}, ErrBadListing},
		{"cursor of another db", ListOptions{Limit: 1, Cursor: page.Cursor}, ErrBadListing},
		{"garbage cursor", ListOptions{Limit: 1, Cursor: "garbage"}, ErrBadCursor},
		{"forged cursor", ListOptions{Limit: 1, Cursor: encodeCursor(cursor{db: "d", version: "1", after: []byte("a")}, []byte("not the key"))}, ErrBadCursor},
	} {
		if _, err := n.List(context.Background(), "d", tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := n.List(context.Background(), "nope", ListOptions{Limit: 1}); !errors.Is(err, ErrUnknownDB) {
		t.Errorf("unknown db: %v", err)
	}
	// A limit of a billion is the node's to take: the door bounds it.
	if got, _, _ := listAll(t, n, "d", ListOptions{Limit: 1e9}); len(got) != len(keys) {
		t.Errorf("limit 1e9: %d keys", len(got))
	}
}

// TestListVersionSwitch: a cursor keeps its version; once the version
// is gone (a node alone removes it at the switch) the next page is
// ErrVersionGone, never a page of the new version; a new listing reads
// the new one.
func TestListVersionSwitch(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "1", 3, nodetest.Numbered("1", 100))
	n := newTestNode(t, root, nil)
	first, err := n.List(context.Background(), "d", ListOptions{Limit: 10, Values: true})
	if err != nil || first.Version != "1" || first.Cursor == "" {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	second, err := n.List(context.Background(), "d", ListOptions{Limit: 10, Values: true, Cursor: first.Cursor})
	if err != nil || second.Version != "1" || string(second.Keys[0]) <= string(first.Keys[9]) {
		t.Fatalf("second page: %v, %v", second, err)
	}
	nodetest.WriteVersion(t, root, "d", "2", 3, nodetest.Numbered("2", 100))
	n.Refresh()
	waitFor(t, "version 2", func() bool { return n.activeVersion("d") == "2" })
	n.waitRetired(t, "d", "1")
	if p, err := n.List(context.Background(), "d", ListOptions{Limit: 10, Cursor: second.Cursor}); !errors.Is(err, ErrVersionGone) {
		t.Fatalf("a page of a version gone = %+v, %v; want ErrVersionGone", p.Version, err)
	}
	keys, vals, versions := listAll(t, n, "d", ListOptions{Limit: 30, Values: true})
	if len(keys) != 100 || slices.ContainsFunc(vals, func(v string) bool { return !strings.HasPrefix(v, "2:") }) || slices.Compact(versions)[0] != "2" {
		t.Fatalf("a new listing: %d keys, versions %v", len(keys), versions)
	}
}

// TestListPeerPartitionsOnce: a peer's page naming one partition many
// times reads it once (one iterator, one read transaction).
func TestListPeerPartitionsOnce(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "1", 2, listRecords("1", 40))
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	before := nodetest.Metric(t, reg, "spangle_list_partitions_total", "where", "local")
	page, err := n.List(context.Background(), "d", ListOptions{Version: "1", Partitions: []int{0, 0, 0, 0, 0, 0, 0, 0}, Limit: 1000})
	if err != nil || len(page.Keys) == 0 {
		t.Fatalf("%d keys, %v", len(page.Keys), err)
	}
	if got := nodetest.Metric(t, reg, "spangle_list_partitions_total", "where", "local") - before; got != 1 {
		t.Errorf("partition 0 named 8 times read %v times, want once", got)
	}
}

// TestListHeads checks the merge's comparison of key heads against
// bytes.Compare, for keys of every length to 20 that share prefixes,
// end in zeros or are all ones.
func TestListHeads(t *testing.T) {
	var keys [][]byte
	for n := range 21 {
		for _, fill := range []byte{0, 1, 'a', 0xfe, 0xff} {
			k := bytes.Repeat([]byte{'a'}, n)
			keys = append(keys, k)
			if n > 0 {
				for _, at := range []int{0, n / 2, n - 1} {
					k := bytes.Clone(k)
					k[at] = fill
					keys = append(keys, k)
				}
			}
		}
	}
	for _, a := range keys {
		if got := headOf(a); got != headOf(append(bytes.Clone(a), make([]byte, 20)...)) && len(a) < 16 {
			t.Fatalf("head of %q is %x, not that of it padded with zeros", a, got)
		}
		for _, b := range keys {
			m := &listMerge{srcs: []listSource{{page: &RemotePage{Keys: [][]byte{a}}}, {page: &RemotePage{Keys: [][]byte{b}}}}}
			m.build()
			want := bytes.Compare(a, b) < 0
			if got := m.before(0, 1); got != want {
				t.Fatalf("before(%q, %q) = %v, want %v", a, b, got, want)
			}
		}
	}
}
