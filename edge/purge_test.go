package edge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
)

// startPlainNode starts a stand-alone node serving root, its config
// changed by change.
func startPlainNode(t *testing.T, root string, change ...func(*node.Config)) *node.Node {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.Source = root
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Logger = edgetest.Logger()
	for _, c := range change {
		c(&cfg)
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	return n
}

// purgeLog is an HTTP cache stand-in that records the purges it gets and
// fails the first failures of them with a 503.
type purgeLog struct {
	mu       sync.Mutex
	got      []string
	failures int
}

func (l *purgeLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failures > 0 {
		l.failures--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	l.got = append(l.got, fmt.Sprintf("%s %s version=%s previous=%s", r.Method, r.URL.Path,
		r.Header.Get("X-Spangle-Version"), r.Header.Get("X-Previous")))
}

func (l *purgeLog) has(want string) func() error {
	return func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, g := range l.got {
			if g == want {
				return nil
			}
		}
		return fmt.Errorf("purges %q, want %q", l.got, want)
	}
}

// TestPurgeHook: each switch of a db's active version sends the db's hook
// (a BAN with the versions in its URL and headers), the first version
// seen included; a hook that fails is retried; a db with a command hook
// runs the command instead.
func TestPurgeHook(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 2, edgetest.Numbered("v1", 10))
	edgetest.WriteVersion(t, root, "e", "v1", 2, edgetest.Numbered("v1", 10))
	n := startPlainNode(t, root)

	cache := &purgeLog{}
	ts := httptest.NewServer(cache)
	defer ts.Close()
	out := filepath.Join(t.TempDir(), "purged")
	reg := prometheus.NewRegistry()
	cfg := edge.DefaultPurgeConfig()
	cfg.Hook = edge.PurgeHook{
		URL:     ts.URL + "/ban/{db}",
		Method:  "BAN",
		Headers: map[string]string{"X-Spangle-Version": "{version}", "X-Previous": "{previous}"},
	}
	cfg.DBs = map[string]edge.PurgeHook{"e": {Command: []string{"sh", "-c", "echo $0 $1 >> " + out, "{db}", "{version}"}}}
	cfg.Backoff = 10 * time.Millisecond
	cfg.Registerer = reg
	cfg.Logger = edgetest.Logger()
	p, err := edge.NewPurger(cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	defer p.Stop()

	edgetest.WaitFor(t, "the purge of d's first version", cache.has("BAN /ban/d version=v1 previous="))
	edgetest.WaitFor(t, "e's command", fileHas(out, "e v1\n"))

	cache.mu.Lock()
	cache.failures = 2
	cache.mu.Unlock()
	edgetest.WriteVersion(t, root, "d", "v2", 2, edgetest.Numbered("v2", 10))
	n.Refresh()
	edgetest.WaitFor(t, "the purge of d's switch to v2", cache.has("BAN /ban/d version=v2 previous=v1"))
	// The cache has the request before the purger has its answer: the
	// counters follow a moment later.
	edgetest.WaitFor(t, "the purges counted", func() error {
		retried := counterOf(t, reg, "spangle_purges_total", "db", "d", "result", "retried")
		ok := counterOf(t, reg, "spangle_purges_total", "db", "d", "result", "ok")
		if retried != 2 || ok != 2 {
			return fmt.Errorf("purges of d: %v retried, %v ok; want 2 and 2", retried, ok)
		}
		return nil
	})
}

func fileHas(path, want string) func() error {
	return func() error {
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), want) {
			return fmt.Errorf("%s: %q, %v; want %q", path, b, err, want)
		}
		return nil
	}
}

// TestPurgeConfig: a hook with both a URL and a command, a URL that is not
// HTTP, or a header with a newline is refused.
func TestPurgeConfig(t *testing.T) {
	for _, h := range []edge.PurgeHook{
		{URL: "http://x/", Command: []string{"true"}},
		{URL: "ftp://x/"},
		{URL: "http://x/", Headers: map[string]string{"X": "a\r\nB: c"}},
		{URL: "http://x/", Method: "BAN X"},
		{URL: "http://x/", MaxKeys: 10},                                             // no {paths}
		{URL: "http://x/", MaxKeys: -1, Headers: map[string]string{"X": "{paths}"}}, // negative
	} {
		cfg := edge.DefaultPurgeConfig()
		cfg.DBs = map[string]edge.PurgeHook{"d": h}
		if _, err := edge.NewPurger(cfg, nil); err == nil {
			t.Errorf("%+v: accepted", h)
		}
	}
	cfg := edge.DefaultPurgeConfig()
	cfg.BatchKeys = 0
	if _, err := edge.NewPurger(cfg, nil); err == nil || !strings.Contains(err.Error(), "batch_keys") {
		t.Errorf("batch_keys 0: %v", err)
	}
}

// TestPurgeChangedKeys: a hook with max_keys purges a switch that changed
// at most that many keys key by key, in batches (their paths in
// {paths}, a regular expression of them in {paths_regex}), and a switch
// that changed more whole; the first switch seen is purged whole (no
// previous version to compare with).
func TestPurgeChangedKeys(t *testing.T) {
	root := t.TempDir()
	recs := func(version string, changed ...int) []edgetest.Record {
		rs := edgetest.Numbered("v1", 10)
		for _, i := range changed {
			rs[i].Value = []byte(version)
		}
		return rs
	}
	edgetest.WriteVersion(t, root, "d", "v1", 2, recs("v1"))
	n := startPlainNode(t, root, func(c *node.Config) { c.ChangedKeys = 3 })

	var mu sync.Mutex
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%s %s paths=%q regex=%q", r.Method, r.Header.Get("X-Version"),
			r.Header.Get("X-Paths"), r.Header.Get("X-Regex")))
	}))
	defer ts.Close()
	reg := prometheus.NewRegistry()
	pcfg := edge.DefaultPurgeConfig()
	pcfg.Hook = edge.PurgeHook{
		URL:     ts.URL + "/",
		Method:  "BAN",
		Headers: map[string]string{"X-Version": "{version}", "X-Paths": "{paths}", "X-Regex": "{paths_regex}"},
		MaxKeys: 3,
	}
	pcfg.BatchKeys = 2
	pcfg.Registerer = reg
	pcfg.Logger = edgetest.Logger()
	p, err := edge.NewPurger(pcfg, n)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	defer p.Stop()
	seen := func(want ...string) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range want {
				if !slices.Contains(got, w) {
					return fmt.Errorf("purges %q, want %q among them", got, w)
				}
			}
			return nil
		}
	}
	edgetest.WaitFor(t, "the whole purge of v1", seen(`BAN v1 paths="" regex=""`))

	// v2 changes key-1, key-4 and key-7 (the node's partitions list them
	// in key order each: the batches are checked as sets).
	edgetest.WriteVersion(t, root, "d", "v2", 2, recs("v2", 1, 4, 7))
	n.Refresh()
	edgetest.WaitFor(t, "v2's keys purged", func() error {
		if got := counterOf(t, reg, "spangle_purge_keys_total", "db", "d"); got != 3 {
			return fmt.Errorf("%v keys purged, want 3", got)
		}
		return nil
	})
	mu.Lock()
	var paths []string
	batches := 0
	for _, g := range got {
		if strings.HasPrefix(g, "BAN v2 ") {
			batches++
			var ps, re string
			fmt.Sscanf(strings.TrimPrefix(g, "BAN v2 "), "paths=%q regex=%q", &ps, &re)
			paths = append(paths, strings.Fields(ps)...)
			for _, p := range strings.Fields(ps) {
				if !strings.Contains(re, p) {
					t.Errorf("regex %q lacks %s", re, p)
				}
			}
		}
	}
	mu.Unlock()
	slices.Sort(paths)
	if want := []string{"/d/key-1", "/d/key-4", "/d/key-7"}; !slices.Equal(paths, want) || batches != 2 {
		t.Errorf("purged %q in %d requests, want %q in 2", paths, batches, want)
	}

	// v3 changes 4 keys, more than max_keys: the db is purged whole.
	edgetest.WriteVersion(t, root, "d", "v3", 2, recs("v3", 0, 2, 3, 5))
	n.Refresh()
	edgetest.WaitFor(t, "the whole purge of v3", seen(`BAN v3 paths="" regex=""`))
}
