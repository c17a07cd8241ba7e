package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestGetMany(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 3, 30)
	n := newTestNode(t, root, nil)
	ctx := context.Background()

	keys := [][]byte{[]byte("key-1"), []byte("nope"), []byte("key-29"), []byte("key-1"), {}, {0, 0xff}}
	version, rs, err := n.GetMany(ctx, "d", keys, GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if version != "v1" || len(rs) != len(keys) {
		t.Fatalf("version %q, %d results", version, len(rs))
	}
	want := []string{"v1:1", "", "v1:29", "v1:1", "", ""}
	for i, r := range rs {
		if r.Found != (want[i] != "") || string(r.Value) != want[i] || r.Version != "v1" {
			t.Errorf("key %q: %+v, want %q", keys[i], r, want[i])
		}
	}
	if _, rs, err := n.GetMany(ctx, "d", nil, GetOptions{}); err != nil || len(rs) != 0 {
		t.Errorf("empty batch: %v %v", rs, err)
	}
	for _, tc := range []struct {
		db   string
		opts GetOptions
		want error
	}{
		{"nope", GetOptions{}, ErrUnknownDB},
		{"d", GetOptions{Version: "v0"}, ErrUnknownVersion},
	} {
		if _, _, err := n.GetMany(ctx, tc.db, keys, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("GetMany(%s, %+v): %v, want %v", tc.db, tc.opts, err, tc.want)
		}
	}
	if v, _, err := n.GetMany(ctx, "d", keys, GetOptions{Version: "v1"}); err != nil || v != "v1" {
		t.Errorf("pinned: %q %v", v, err)
	}
}

// TestGetManyOneVersion runs batches during upgrades: every batch must be
// answered from one version.
func TestGetManyOneVersion(t *testing.T) {
	const upgrades, keys = 10, 100
	root := t.TempDir()
	writeVersion(t, root, "d", vname(0), 4, keys)
	n := newTestNode(t, root, nil)
	batch := make([][]byte, keys)
	for i := range batch {
		batch[i] = fmt.Appendf(nil, "key-%d", i)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				version, rs, err := n.GetMany(context.Background(), "d", batch, GetOptions{})
				if err != nil {
					errs <- err
					return
				}
				for i, r := range rs {
					if want := fmt.Sprintf("%s:%d", version, i); !r.Found || string(r.Value) != want || r.Version != version {
						errs <- fmt.Errorf("key %d: %q from %s in a batch of version %s", i, r.Value, r.Version, version)
						return
					}
				}
			}
		}()
	}
	for u := 1; u <= upgrades; u++ {
		writeVersion(t, root, "d", vname(u), 4, keys)
		n.Refresh()
		waitFor(t, "version "+vname(u), func() bool { return n.activeVersion("d") == vname(u) || len(errs) > 0 })
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkGetMany reads batches of keys pinned to a version, as a peer
// answers a proxied batch, at several batch sizes; ns/key is per key.
func BenchmarkGetMany(b *testing.B) {
	const keys = 1000
	root := b.TempDir()
	writeVersion(b, root, "d", "v1", 4, keys)
	n := newTestNode(b, root, nil)
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("keys=%d", size), func(b *testing.B) {
			batch := make([][]byte, size)
			for i := range batch {
				batch[i] = fmt.Appendf(nil, "key-%d", i*7%keys)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := n.GetMany(context.Background(), "d", batch, GetOptions{Version: "v1", Raw: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size), "ns/key")
		})
	}
}
