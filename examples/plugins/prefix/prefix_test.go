package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/spangledb/spangle/examples/plugins/internal/wasmbuild"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/plugins"
)

// guest is this package built for wasip1, once per test binary.
var guest wasmbuild.Guest

func TestMain(m *testing.M) {
	code := m.Run()
	guest.Cleanup()
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
		code = 1
	}
	os.Exit(code)
}

func open(tb testing.TB) *plugins.WasmPartitioner { return guest.OpenPartitioner(tb) }

// want is the partition the plugin should give key: FNV-1a (hash/fnv) of
// the bytes before the first ':'.
func want(key []byte, n int) int {
	if i := bytes.IndexByte(key, ':'); i >= 0 {
		key = key[:i]
	}
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(n))
}

// TestColocation checks that the keys of one prefix share a partition, that
// prefixes spread over all partitions, and the hash against hash/fnv.
func TestColocation(t *testing.T) {
	p := open(t)
	const n, users = 16, 2000
	var keys [][]byte
	for u := range users {
		for _, suffix := range []string{"profile", "orders", "orders:2024", "cart"} {
			keys = append(keys, fmt.Appendf(nil, "user%d:%s", u, suffix))
		}
	}
	keys = append(keys, []byte("no-colon"), []byte(""), []byte(":leading"), []byte("trailing:"))
	out := make([]int, len(keys))
	if err := p.PartitionBatch(keys, n, out); err != nil {
		t.Fatal(err)
	}
	perPartition := make([]int, n)
	for i, k := range keys {
		if w := want(k, n); out[i] != w {
			t.Fatalf("key %q: partition %d, want %d", k, out[i], w)
		}
		if got, _, err := p.Partition(k, n); err != nil || got != out[i] {
			t.Fatalf("key %q: Partition %d, %v; batch %d", k, got, err, out[i])
		}
		if i < 4*users {
			perPartition[out[i]]++
			if first := out[i-i%4]; out[i] != first {
				t.Fatalf("key %q: partition %d, but its prefix's first key is in %d", k, out[i], first)
			}
		}
	}
	mean := 4 * users / n
	for part, c := range perPartition {
		if c < mean/2 || c > mean*2 {
			t.Errorf("partition %d holds %d keys, mean %d: %v", part, c, mean, perPartition)
		}
	}
	// "" and ":leading" have the same (empty) prefix.
	if a, b := out[len(keys)-3], out[len(keys)-2]; a != b {
		t.Errorf("empty prefixes in %d and %d", a, b)
	}
}

// TestPrefixPartition: a prefix holding a ':' names the partition of
// every key starting with it; one without is -1 (not one partition).
func TestPrefixPartition(t *testing.T) {
	p := open(t)
	const n = 16
	for _, prefix := range []string{"user7:", "user7:orders", "user7:orders:2024", ":", "a:b:c"} {
		got, ok, err := p.PrefixPartition([]byte(prefix), n)
		if err != nil || !ok {
			t.Fatalf("PrefixPartition(%q) = %d, %v, %v", prefix, got, ok, err)
		}
		for _, suffix := range []string{"", "x", ":y", "\xff"} {
			if w := want([]byte(prefix+suffix), n); w != got {
				t.Fatalf("key %q is in %d, PrefixPartition(%q) says %d", prefix+suffix, w, prefix, got)
			}
		}
	}
	for _, prefix := range []string{"", "user7", "user"} {
		if got, ok, err := p.PrefixPartition([]byte(prefix), n); err != nil || ok {
			t.Errorf("PrefixPartition(%q) = %d, %v, %v; want not one partition", prefix, got, ok, err)
		}
	}
}

// TestListPrefix: a node serving a db partitioned by this plugin answers
// a key listing of a prefix with a ':' from one partition
// (spangle_list_partitions_total), one without from all of them, both
// complete.
func TestListPrefix(t *testing.T) {
	root := t.TempDir()
	var recs []nodetest.Record
	for u := range 50 {
		for _, s := range []string{"profile", "orders", "orders:2024", "cart"} {
			recs = append(recs, nodetest.Record{Key: fmt.Appendf(nil, "user%d:%s", u, s), Value: []byte(s)})
		}
	}
	nodetest.WriteVersion(t, root, "users", "1", 8, recs)
	reg := prometheus.NewRegistry()
	cfg := node.DefaultConfig()
	cfg.Source, cfg.DataDir, cfg.RequireSuccessFile, cfg.Registerer = root, t.TempDir(), true, reg
	cfg.Plugins.CacheDir = guest.CacheDir(t)
	cfg.DBs = map[string]node.DBConfig{"users": {Partitioner: "wasm:" + guest.Path(t)}}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	for _, tc := range []struct {
		prefix string
		keys   int
		parts  float64
	}{{"user7:", 4, 1}, {"user7:orders", 2, 1}, {"user1", 4 * 11, 8}} {
		before := nodetest.Metric(t, reg, "spangle_list_partitions_total", "where", "local")
		page, err := n.List(context.Background(), "users", node.ListOptions{Prefix: []byte(tc.prefix), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Keys) != tc.keys || page.Cursor != "" {
			t.Errorf("prefix %q: %d keys (cursor %q), want %d", tc.prefix, len(page.Keys), page.Cursor, tc.keys)
		}
		for _, k := range page.Keys {
			if !bytes.HasPrefix(k, []byte(tc.prefix)) {
				t.Errorf("prefix %q: key %q", tc.prefix, k)
			}
		}
		if got := nodetest.Metric(t, reg, "spangle_list_partitions_total", "where", "local") - before; got != tc.parts {
			t.Errorf("prefix %q read %v partitions, want %v", tc.prefix, got, tc.parts)
		}
	}
}
