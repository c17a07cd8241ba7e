package edge_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
)

// hotNode starts a real node with an answer cache of cacheBytes on a
// source root holding db "d" at version v0000 (keys key-<i> →
// "<version>:<i>"), and returns it, the root, where the test writes later
// versions, and the node's registry, where the cache's metrics are.
func hotNode(t *testing.T, keys int, cacheBytes int64) (*node.Node, string, *prometheus.Registry) {
	t.Helper()
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", hotVersion(0), 4, nodetest.Numbered(hotVersion(0), keys))
	cfg := node.DefaultConfig()
	cfg.Source, cfg.DataDir = root, t.TempDir()
	cfg.Logger = nodetest.Logger()
	cfg.HotCacheBytes = cacheBytes
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	checkFor(t, 30*time.Second, "version "+hotVersion(0), func() bool {
		v, ok := n.ActiveVersion("d")
		return ok && v == hotVersion(0)
	})
	return n, root, reg
}

// hotVersion names the i-th version; names sort in upgrade order.
func hotVersion(i int) string { return fmt.Sprintf("v%04d", i) }

// TestHotCacheSwitches switches versions under concurrent readers of a
// few hot keys: every answer's value must be of the version its header
// names, and no reader may see a version older than one it saw. The hits
// prove the answers came from the cache; the drops that the cache let go
// of replaced versions.
func TestHotCacheSwitches(t *testing.T) {
	const upgrades, keys, hot, readers = 20, 100, 8, 6
	n, root, reg := hotNode(t, keys, 1<<20)
	ts := startServer(t, n)

	var stop atomic.Bool
	var wg sync.WaitGroup
	var requests atomic.Int64
	errs := make(chan error, readers)
	for r := range readers {
		wg.Go(func() {
			last := ""
			for i := r; !stop.Load(); i++ {
				k := i % hot
				resp, err := ts.client.Get(fmt.Sprintf("%s/d/key-%d", ts.url, k))
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				v := resp.Header.Get("X-Spangle-Version")
				switch {
				case err != nil || resp.StatusCode != http.StatusOK:
					errs <- fmt.Errorf("key-%d: status %d err %v", k, resp.StatusCode, err)
					return
				case string(body) != fmt.Sprintf("%s:%d", v, k):
					errs <- fmt.Errorf("key-%d: value %q under version header %q (mixed versions)", k, body, v)
					return
				case v < last:
					errs <- fmt.Errorf("version went back from %s to %s", last, v)
					return
				}
				last = v
				requests.Add(1)
			}
		})
	}
	for u := 1; u <= upgrades; u++ {
		nodetest.WriteVersion(t, root, "d", hotVersion(u), 4, nodetest.Numbered(hotVersion(u), keys))
		n.Refresh()
		checkFor(t, 30*time.Second, "version "+hotVersion(u), func() bool {
			v, _ := n.ActiveVersion("d")
			return v == hotVersion(u) || len(errs) > 0
		})
		// A lookup started after the switch answers from the new version,
		// though the cache holds the old one's answer.
		if got := ts.do(t, "GET", "/d/key-0").header.Get("X-Spangle-Version"); got != hotVersion(u) {
			t.Errorf("after the switch to %s, a lookup answered from %s", hotVersion(u), got)
		}
		// Let the readers fill the cache with this version.
		before := nodetest.Metric(t, reg, "spangle_hot_cache_hits_total")
		checkFor(t, 30*time.Second, "hits on "+hotVersion(u), func() bool {
			return nodetest.Metric(t, reg, "spangle_hot_cache_hits_total") >= before+2*hot || len(errs) > 0
		})
		if len(errs) > 0 {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	hits := nodetest.Metric(t, reg, "spangle_hot_cache_hits_total")
	misses := nodetest.Metric(t, reg, "spangle_hot_cache_misses_total")
	t.Logf("%d requests, %v hits, %v misses", requests.Load(), hits, misses)
	if hits < float64(requests.Load())/2 {
		t.Errorf("%v hits of %d requests: the hot keys were not served from the cache", hits, requests.Load())
	}
	// Each switch drops the entries of the version before it; every hot
	// key of it was cached, so at least one entry went at each.
	checkFor(t, 10*time.Second, "entries of replaced versions dropped", func() bool {
		return nodetest.Metric(t, reg, "spangle_hot_cache_dropped_total") >= upgrades
	})
	checkFor(t, 10*time.Second, "only the active version's entries left", func() bool {
		return nodetest.Metric(t, reg, "spangle_hot_cache_entries") <= hot
	})
}

// TestHotCacheAnswers checks that a hit answers exactly as the miss
// before it: status, body and every header but Date, for a value, a
// missing key, a conditional GET, HEAD and gzip, a raw lookup and a
// peer's ?proxy= lookup; and that the status (JSON) reports the cache.
func TestHotCacheAnswers(t *testing.T) {
	n, _, reg := hotNode(t, 10, 1<<20)
	ts := startServer(t, n, func(c *edge.Config) { c.GzipMinBytes = 4 })
	miss := ts.do(t, "GET", "/d/key-3")
	etag := miss.header.Get("Etag")
	for _, tt := range []struct {
		name, method, path string
		headers            []string
		status             int
	}{
		{"value", "GET", "/d/key-2", nil, 200},
		{"missing", "GET", "/d/nope", nil, 404},
		{"not modified", "GET", "/d/key-4", []string{"If-None-Match", etag}, 200},
		{"if-none-match hit", "GET", "/d/key-3", []string{"If-None-Match", etag}, 304},
		{"head", "HEAD", "/d/key-5", nil, 200},
		{"gzip", "GET", "/d/key-6", []string{"Accept-Encoding", "gzip"}, 200},
		{"raw", "GET", "/d/key-7?raw=1", nil, 200},
		{"peer", "GET", "/d/key-8?proxy=" + hotVersion(0), nil, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hits := nodetest.Metric(t, reg, "spangle_hot_cache_hits_total")
			// A key's first miss only marks it (the doorkeeper); its second
			// is cached.
			ts.do(t, tt.method, tt.path, tt.headers...)
			first := ts.do(t, tt.method, tt.path, tt.headers...)
			second := ts.do(t, tt.method, tt.path, tt.headers...)
			if first.status != tt.status || second.status != tt.status {
				t.Fatalf("statuses %d then %d, want %d", first.status, second.status, tt.status)
			}
			if first.body != second.body {
				t.Errorf("body %q then %q", first.body, second.body)
			}
			for _, h := range []http.Header{first.header, second.header} {
				h.Del("Date")
			}
			if fmt.Sprint(first.header) != fmt.Sprint(second.header) {
				t.Errorf("headers differ:\nmiss %v\nhit  %v", first.header, second.header)
			}
			got := nodetest.Metric(t, reg, "spangle_hot_cache_hits_total") - hits
			want := 1.0
			if tt.name == "if-none-match hit" {
				want = 2 // key-3 is cached since its second request
			}
			if got != want {
				t.Errorf("%v hits, want %v", got, want)
			}
		})
	}
	var st node.Status
	if err := json.Unmarshal([]byte(ts.do(t, "GET", "/", "Accept", "application/json").body), &st); err != nil {
		t.Fatal(err)
	}
	if c := st.HotCache; c == nil || c.Budget != 1<<20 || c.Entries == 0 || c.Bytes <= 0 || c.MaxBytes <= 0 {
		t.Errorf("status's hot_cache: %+v", c)
	}
}

// TestHotCacheOff checks that HotCacheBytes 0 turns the node's cache off:
// no metrics, no status, and no lookup answered from it.
func TestHotCacheOff(t *testing.T) {
	n, _, reg := hotNode(t, 10, 0)
	ts := startServer(t, n)
	for range 3 {
		ts.do(t, "GET", "/d/key-1")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "spangle_hot_cache") {
			t.Errorf("%s exposed with the cache off", mf.GetName())
		}
	}
	if st := n.Status(); st.HotCache != nil {
		t.Errorf("status shows a cache: %+v", *st.HotCache)
	}
}
