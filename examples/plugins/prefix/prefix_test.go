package main

import (
	"bytes"
	"fmt"
	"go.uber.org/goleak"
	"hash/fnv"
	"os"
	"testing"

	"github.com/spangledb/spangle/examples/plugins/internal/wasmbuild"
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
