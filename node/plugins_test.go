package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/plugins"
)

func testModule(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "plugins", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return "wasm:" + p
}

// TestWasmPartitioner builds one dataset with the built-in murmur3 and with
// a Wasm module reproducing it: every key is found in both, the version
// records the module's identity, and the status shows it.
func TestWasmPartitioner(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "builtin", "1", 5, 500)
	writeVersion(t, root, "wasm", "1", 5, 500)
	n := newTestNode(t, root, func(c *Config) {
		c.DBs = map[string]DBConfig{
			"builtin": {Partitioner: "murmur3"},
			"wasm":    {Partitioner: testModule(t, "murmur3.wasm")},
		}
	})
	for _, db := range []string{"builtin", "wasm"} {
		for i := range 500 {
			res, err := n.get(t, db, fmt.Sprintf("key-%d", i))
			if err != nil || string(res.Value) != fmt.Sprintf("1:%d", i) {
				t.Fatalf("%s key-%d: %+v %v", db, i, res, err)
			}
		}
	}
	id := n.Status().DBs["wasm"].Versions["1"].Partitioner
	if !strings.HasPrefix(id, "wasm:sha256:") {
		t.Fatalf("status partitioner %q", id)
	}
	d := (*n.dbs.Load())["wasm"]
	if got := d.active.Load().data.Manifest().Partitioner; got != id {
		t.Fatalf("manifest partitioner %q, status %q", got, id)
	}
	// Both place every key alike, so their partition files hold the same keys.
	b := (*n.dbs.Load())["builtin"].active.Load().data.Manifest()
	w := d.active.Load().data.Manifest()
	for p := range b.PartitionInfo {
		if b.PartitionInfo[p].Checksum != w.PartitionInfo[p].Checksum {
			t.Errorf("partition %d differs: %s vs %s", p, b.PartitionInfo[p].Checksum, w.PartitionInfo[p].Checksum)
		}
	}
}

// TestWasmDecoder serves values through a decoder module, and raw.
func TestWasmDecoder(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "1", 2, 10)
	n := newTestNode(t, root, func(c *Config) {
		c.DBs = map[string]DBConfig{"d": {Decoder: testModule(t, "echo.wasm"), ContentType: "application/x-raw"}}
	})
	res, err := n.get(t, "d", "key-3")
	if err != nil || string(res.Value) != "1:3" || res.ContentType != "text/plain; charset=utf-8" {
		t.Fatalf("decoded: %+v %v", res, err)
	}
	res, err = n.Get(context.Background(), "d", []byte("key-3"), GetOptions{Raw: true})
	if err != nil || string(res.Value) != "1:3" || res.ContentType != "application/x-raw" {
		t.Fatalf("raw: %+v %v", res, err)
	}
}

// TestHostilePlugins exercises a misbehaving decoder and partitioner while
// another db is read without pause: the hostile calls fail with clear
// errors, the good db never does.
func TestHostilePlugins(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "good", "1", 2, 50)
	hostileValues := map[string]string{"loop": "loop", "grow": "grow", "trap": "trap", "exit": "xexit", "out": "out"}
	var recs []nodetest.Record
	for k, v := range hostileValues {
		recs = append(recs, nodetest.Record{Key: []byte(k), Value: []byte(v)})
	}
	nodetest.WriteVersion(t, root, "dec", "1", 1, recs)
	// A partitioner that loops on keys starting with "l" (its batch export
	// looks at the first key of a batch): the build fails.
	nodetest.WriteVersion(t, root, "part", "1", 1, []nodetest.Record{
		{Key: []byte("loop"), Value: []byte("1")}, {Key: []byte("zzz"), Value: []byte("2")}})

	hostile := testModule(t, "hostile.wasm")
	var stop atomic.Bool
	var wg sync.WaitGroup
	var goodReads atomic.Int64
	errc := make(chan error, 1)
	n := newTestNode(t, root, func(c *Config) {
		c.Plugins.CallTimeout = 2 * time.Second // "grow" must trap before it, page by page under -race on a loaded machine
		c.Plugins.MemoryLimitPages = 64
		c.DBs = map[string]DBConfig{
			"dec":  {Decoder: hostile},
			"part": {Partitioner: hostile},
		}
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			res, err := n.get(t, "good", fmt.Sprintf("key-%d", i%50))
			if err != nil || !res.Found {
				select {
				case errc <- fmt.Errorf("good db: %+v %v", res, err):
				default:
				}
				return
			}
			goodReads.Add(1)
		}
	}()

	for key, want := range map[string]error{
		"loop": plugins.ErrPluginTimeout,
		"grow": plugins.ErrPluginTrap,
		"trap": plugins.ErrPluginTrap,
		"exit": plugins.ErrPluginExit,
		"out":  plugins.ErrBadResult,
	} {
		start := time.Now()
		_, err := n.get(t, "dec", key)
		if err == nil {
			t.Errorf("%s: no error", key)
			continue
		}
		if !errors.Is(err, want) && !(key == "grow" && errors.Is(err, plugins.ErrPluginMemory)) {
			t.Errorf("%s: %v, want %v", key, err, want)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("%s took %v", key, time.Since(start))
		}
	}
	// The decoder still works after its instances were discarded.
	for i := 0; i < 3; i++ {
		if _, err := n.Get(context.Background(), "dec", []byte("loop"), GetOptions{Raw: true}); err != nil {
			t.Fatalf("raw read of dec: %v", err)
		}
	}
	if st := n.state("part", "1"); st != StateError {
		t.Errorf("version built with a looping partitioner is %q, want ERROR", st)
	} else if msg := n.Status().DBs["part"].Versions["1"].Nodes["localhost"].Error; !strings.Contains(msg, "plugins:") {
		t.Errorf("error %q does not name the plugin failure", msg)
	}

	waitFor(t, "reads of the good db", func() bool { return goodReads.Load() > 100 || len(errc) > 0 })
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}
