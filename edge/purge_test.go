package edge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// startPlainNode starts a stand-alone node serving root.
func startPlainNode(t *testing.T, root string) *node.Node {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.Source = root
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Logger = edgetest.Logger()
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
	} {
		cfg := edge.DefaultPurgeConfig()
		cfg.DBs = map[string]edge.PurgeHook{"d": h}
		if _, err := edge.NewPurger(cfg, nil); err == nil {
			t.Errorf("%+v: accepted", h)
		}
	}
}
