package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/spangledb/spangle/node/source"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spangledb/spangle/node/advert"
)

// fakeAdvertiser is a hand-written Advertiser: a map per kind, and a
// number of writes to fail first.
type fakeAdvertiser struct {
	mu      sync.Mutex
	entries map[AdvertKind]map[string]string
	fail    int // writes still to fail
	writes  int // writes attempted
}

func newFakeAdvertiser() *fakeAdvertiser {
	return &fakeAdvertiser{entries: map[AdvertKind]map[string]string{
		AdvertNode: {}, AdvertPartitions: {}, AdvertVersion: {},
	}}
}

var errFakeDown = errors.New("fake: down")

func (f *fakeAdvertiser) Publish(_ context.Context, kind AdvertKind, key string, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.fail > 0 {
		f.fail--
		return errFakeDown
	}
	f.entries[kind][key] = string(value)
	return nil
}

func (f *fakeAdvertiser) Withdraw(_ context.Context, kind AdvertKind, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.fail > 0 {
		f.fail--
		return errFakeDown
	}
	delete(f.entries[kind], key)
	return nil
}

// keys returns the keys of kind, sorted.
func (f *fakeAdvertiser) keys(kind AdvertKind) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ks []string
	for k := range f.entries[kind] {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (f *fakeAdvertiser) get(kind AdvertKind, key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.entries[kind][key]
	return v, ok
}

func (f *fakeAdvertiser) nodeState(id string) string {
	v, ok := f.get(AdvertNode, id)
	if !ok {
		return ""
	}
	n, err := advert.DecodeNode(id, []byte(v))
	if err != nil {
		return "bad: " + err.Error()
	}
	return n.State
}

// TestAdvertise follows a node's entries through its life: start, an
// upgrade, draining and shutdown.
func TestAdvertise(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 4, 20)
	fa := newFakeAdvertiser()
	fa.fail = 3 // the first writes fail: the node must retry them
	n := newTestNode(t, root, func(c *Config) {
		c.Advertiser = fa
		c.AdvertiseAddress = "node-1:9599"
		c.AdvertiseSubjects = "spangle.test"
		c.ShardID = "shard-a"
		c.BinaryVersion = "test"
	})
	id := n.ID()
	if !advert.ValidName(id) {
		t.Fatalf("node ID %q", id)
	}
	pkey := advert.PartitionsKey("d", "v1", id)
	waitFor(t, "node SERVING and partitions of v1", func() bool {
		_, ok := fa.get(AdvertPartitions, pkey)
		return ok && fa.nodeState(id) == advert.StateServing
	})
	raw, _ := fa.get(AdvertPartitions, pkey)
	p, err := advert.DecodePartitions(pkey, []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Partitions, []int{0, 1, 2, 3}) || p.NumPartitions != 4 || p.Partitioner != "sequins" ||
		p.Address != "node-1:9599" || p.Subjects != "spangle.test" || p.ShardID != "shard-a" || !p.Active {
		t.Errorf("partitions entry %+v", p)
	}
	raw, _ = fa.get(AdvertVersion, "d")
	v, err := advert.DecodeVersion("d", []byte(raw))
	if err != nil || v.Version != "v1" || v.NumPartitions != 4 || v.Partitioner != "sequins" || v.NodeID != id {
		t.Errorf("version entry %+v, %v", v, err)
	}
	raw, _ = fa.get(AdvertNode, id)
	nd, err := advert.DecodeNode(id, []byte(raw))
	// Named by its address, not "localhost" as every unclustered node is
	// (issue 38: the example cluster's nodes were all "localhost").
	if err != nil || nd.ShardID != "shard-a" || nd.Address != "node-1:9599" || nd.Name != "node-1:9599" || nd.BinaryVersion != "test" || nd.Started.IsZero() {
		t.Errorf("node entry %+v, %v", nd, err)
	}

	// An upgrade: v2's entry appears, v1's goes, the version entry follows.
	writeVersion(t, root, "d", "v2", 3, 20)
	n.Refresh()
	waitFor(t, "v2 advertised, v1 withdrawn", func() bool {
		ks := fa.keys(AdvertPartitions)
		raw, _ := fa.get(AdvertVersion, "d")
		return slices.Equal(ks, []string{advert.PartitionsKey("d", "v2", id)}) && strings.Contains(raw, `"version":"v2"`)
	})

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := n.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fa.nodeState(id); got != advert.StateDraining {
		t.Errorf("after Drain, node state %q", got)
	}
	if n.Ready() {
		t.Error("Ready after Drain")
	}
	if res, err := n.get(t, "d", "key-1"); err != nil || !res.Found {
		t.Errorf("lookup while draining: %+v %v", res, err)
	}
	if err := n.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if ks := fa.keys(AdvertNode); len(ks) != 0 {
		t.Errorf("node entries left after shutdown: %v", ks)
	}
	if ks := fa.keys(AdvertPartitions); len(ks) != 0 {
		t.Errorf("partitions entries left after shutdown: %v", ks)
	}
	if ks := fa.keys(AdvertVersion); !slices.Equal(ks, []string{"d"}) {
		t.Errorf("versions entries %v: the db's entry stays", ks)
	}
}

// TestHeld checks that Held follows activations and removals, and that
// its channel closes at each change.
func TestHeld(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "a", "1", 2, 10)
	writeVersion(t, root, "b", "1", 3, 10)
	n := newTestNode(t, root, nil)
	held, changed := n.Held()
	if got := heldNames(held); got != "a/1[0 1]/2 b/1[0 1 2]/3" {
		t.Fatalf("held %s", got)
	}
	writeVersion(t, root, "a", "2", 1, 10)
	n.Refresh()
	select {
	case <-changed:
	case <-ctxTimeout(t).Done():
		t.Fatal("Held's channel did not close on an upgrade")
	}
	waitFor(t, "a/2 held", func() bool {
		held, _ := n.Held()
		return heldNames(held) == "a/2[0]/1 b/1[0 1 2]/3"
	})
	if err := os.RemoveAll(filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	n.Refresh()
	waitFor(t, "b missing", func() bool { return !n.missingSince("b").IsZero() })
	if err := n.RemoveDB("b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b gone", func() bool {
		held, _ := n.Held()
		return heldNames(held) == "a/2[0]/1"
	})
}

func heldNames(held []HeldVersion) string {
	var parts []string
	for _, h := range held {
		if !h.Active || h.Partitioner != "sequins" || h.ActiveAt.IsZero() {
			return fmt.Sprintf("bad entry %+v", h)
		}
		parts = append(parts, fmt.Sprintf("%s/%s%v/%d", h.DB, h.Version, h.Partitions, h.NumPartitions))
	}
	return strings.Join(parts, " ")
}

func ctxTimeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestNodeID checks that the ID is created once and kept across restarts,
// and that a configured one wins.
func TestNodeID(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "1", 1, 1)
	data := filepath.Join(t.TempDir(), "data")
	start := func(id string) string {
		cfg := DefaultConfig()
		cfg.Source, cfg.DataDir, cfg.NodeID = root, data, id
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		got := n.ID()
		if err := n.Shutdown(ctxTimeout(t)); err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := start("")
	if len(first) != 16 || !source.ValidName(first) {
		t.Fatalf("generated ID %q", first)
	}
	if again := start(""); again != first {
		t.Fatalf("ID changed across restarts: %q then %q", first, again)
	}
	if got := start("configured-1"); got != "configured-1" {
		t.Fatalf("configured ID ignored: %q", got)
	}
	if err := os.WriteFile(filepath.Join(data, nodeIDFile), []byte("not a name!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Source, cfg.DataDir = root, data
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err == nil || !strings.Contains(err.Error(), "not a valid node ID") {
		t.Fatalf("Start with a bad node_id: %v", err)
	}
}
