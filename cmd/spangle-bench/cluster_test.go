package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/spangledb/spangle/plugins"
)

func TestSplitKeys(t *testing.T) {
	part, err := plugins.Builtin("sequins")
	if err != nil {
		t.Fatal(err)
	}
	const n, parts = 5000, 8
	held := []int{1, 4, 6}
	local, proxied, err := splitKeys(part, n, 16, parts, held, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(local) != 1000 || len(proxied) != 1000 {
		t.Fatalf("%d local, %d proxied keys; want 1000 each", len(local), len(proxied))
	}
	seen := map[int64]bool{}
	for _, c := range []struct {
		ids  []int64
		want bool
	}{{local, true}, {proxied, false}} {
		for _, i := range c.ids {
			if i < 0 || i >= n || seen[i] {
				t.Fatalf("key %d out of range or repeated", i)
			}
			seen[i] = true
			p, alt, _ := part.Partition([]byte(key(i, 16)), parts)
			if slices.Contains(held, p) != c.want || (!c.want && slices.Contains(held, alt)) {
				t.Errorf("key %d: partition %d (alt %d), held %v, want local %v", i, p, alt, held, c.want)
			}
		}
	}
	again, _, _ := splitKeys(part, n, 16, parts, held, 1000, 1)
	if !slices.Equal(local, again) {
		t.Error("not deterministic")
	}
	if _, _, err := splitKeys(part, n, 16, parts, []int{8}, 10, 1); err == nil {
		t.Error("partition out of range accepted")
	}
}

func TestKeyListScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.lua")
	if err := writeKeyListScript(path, []int64{255, 1}, 16, "/bench/", true); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !regexp.MustCompile(`local keys = "00000000000000ff0000000000000001"`).Match(b) ||
		!regexp.MustCompile(`local n = 2\n`).Match(b) || !regexp.MustCompile(`(?m)^function response`).Match(b) {
		t.Errorf("script:\n%s", b)
	}
	if err := writeKeyListScript(path, nil, 16, "/bench/", false); err == nil {
		t.Error("empty key list accepted")
	}
}

func TestClusterNodeCount(t *testing.T) {
	log := []byte(`{"time":"x","level":"INFO","msg":"waiting"}` + "\n" +
		`{"time":"x","level":"INFO","msg":"cluster membership converged","nodes":3}` + "\n")
	if got := clusterNodeCount(log); got != 3 {
		t.Errorf("got %d, want 3", got)
	}
	if got := clusterNodeCount(log[:40]); got != -1 {
		t.Errorf("got %d, want -1", got)
	}
}
