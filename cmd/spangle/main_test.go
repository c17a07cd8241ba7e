package main

import (
	"bytes"
	"fmt"
	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/kvwatch/natstest"
	"go.uber.org/goleak"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const testTimeout = 60 * time.Second

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if err := goleak.Find(natstest.LeakOptions()...); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
		code = 1
	}
	os.Exit(code)
}

// buildBinary builds cmd/spangle once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "spangle-test-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "spangle")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestServeExample runs the real binary on the example data (as make run
// does), reads a key over HTTP, and stops it with SIGTERM.
func TestServeExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	s := startServe(t, buildBinary(t), false)
	base := s.http
	for _, tc := range []struct {
		path, body, version string
		status              int
	}{
		{"/baby-names/1881/boy", "John", "1", 200},
		{"/baby-names/1881%2Fgirl", "Mary", "1", 200},
		{"/baby-names/1881/nobody", "", "1", 404},
		{"/nope/1881/boy", "unknown db: this node serves no db of that name\n", "", 404},
	} {
		resp, err := http.Get(base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || string(body) != tc.body || resp.Header.Get("X-Spangle-Version") != tc.version {
			t.Errorf("GET %s: %d %q version %q; want %d %q %q", tc.path, resp.StatusCode, body,
				resp.Header.Get("X-Spangle-Version"), tc.status, tc.body, tc.version)
		}
	}

	s.stop(t)
}

func TestInspect(t *testing.T) {
	var out bytes.Buffer
	file := filepath.Join("..", "..", "testdata", "sequins", "history-011971a", "testdata", "record_compressed_gzip.sequencefile")
	if err := inspect([]string{"--partitions", "2", file}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"org.apache.hadoop.io.compress.GzipCodec", "Alice\tPractice", "Bob\tHope", "2 records"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out.String())
		}
	}
	bad := filepath.Join("..", "..", "testdata", "sequins", "test_databases", "unhealthy", "baby-names-bad", "1", "part-00000")
	if err := inspect([]string{bad}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "part-00000") {
		t.Fatalf("inspect of a bad file: %v", err)
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, fmt.Sprintf("c%d.toml", time.Now().UnixNano()))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := spangle.DefaultConfig()
	err := spangle.LoadConfig(write(`
source = "/src"
local_store = "/store"
refresh_period = "1m30s"
require_success_file = true
max_parallel_loads = 3
content_type = "text/plain"
sequins_headers = true
cache_control = "public, max-age=5"
[storage]
compression = "zstd"
memory_budget = "64MiB"
[nats]
replicas = 3
[purge]
url = "http://127.0.0.1:6081/"
method = "BAN"
headers = { X-Spangle-DB = "{db}" }
attempts = 3
[dbs.baby-names]
partitioner = "murmur3"
cache_control = "max-age=60"
negative_cache_control = "no-store"
presharded = true
[dbs.baby-names.purge]
command = ["varnishadm", "ban", "obj.http.X-Spangle-DB == {db}"]
`), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Node
	if n.Source != "/src" || n.DataDir != "/store" || n.RefreshPeriod != 90*time.Second || !n.RequireSuccessFile ||
		n.MaxParallelLoads != 3 || n.Compression != "zstd" || n.MemoryBudget != 64<<20 || !cfg.SequinsHeaders ||
		n.ContentType != "text/plain" || cfg.NATS.Replicas != 3 {
		t.Fatalf("config: %+v", cfg)
	}
	if db := n.DBs["baby-names"]; db.Partitioner != "murmur3" || db.CacheControl != "max-age=60" ||
		db.NegativeCacheControl != "no-store" || !db.Presharded || n.CacheControl != "public, max-age=5" {
		t.Fatalf("db config: %+v", db)
	}
	if p := cfg.Purge; p.Hook.URL != "http://127.0.0.1:6081/" || p.Hook.Method != "BAN" || p.Hook.Headers["X-Spangle-DB"] != "{db}" ||
		p.Attempts != 3 || p.Timeout != 5*time.Second || len(p.DBs["baby-names"].Command) != 3 {
		t.Fatalf("purge config: %+v", p)
	}

	// The example config that make run uses stays valid.
	ex := spangle.DefaultConfig()
	if err := spangle.LoadConfig(filepath.Join("..", "..", "examples", "spangle.toml"), &ex); err != nil {
		t.Fatal(err)
	}
	if err := ex.Node.Validate(); err != nil {
		t.Fatal(err)
	}

	for name, body := range map[string]string{
		"unknown key":       "source = \"/x\"\nsourse = \"/y\"\n",
		"unknown table key": "[storage]\ncompresion = \"none\"\n",
		"bad duration":      "refresh_period = \"soon\"\n",
		"bad size":          "[storage]\nmemory_budget = \"lots\"\n",
		"disagreeing dirs":  "data_dir = \"/a\"\nlocal_store = \"/b\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg := spangle.DefaultConfig()
			if err := spangle.LoadConfig(write(body), &cfg); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestConfigSharding(t *testing.T) {
	p := filepath.Join(t.TempDir(), "spangle.toml")
	body := `
source = "/src"
shard_id = "3"
[sharding]
enabled = true
replication = 3
min_replication = 2
max_replication = 4
assignment = "rendezvous"
time_to_converge = "2s"
proxy_timeout = "300ms"
proxy_stage_timeout = "50ms"
version_remove_timeout = "1m"
heal = false
heal_after = "30s"
heal_max_parallel = 2
proxy_batch_keys = 1
proxy_conns_per_peer = 8
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := spangle.DefaultConfig()
	if err := spangle.LoadConfig(p, &cfg); err != nil {
		t.Fatal(err)
	}
	c := cfg.Cluster
	if !cfg.Clustered || c.Replication != 3 || c.MinReplication != 2 || c.MaxReplication != 4 || c.Assignment != "rendezvous" ||
		c.TimeToConverge != 2*time.Second || c.ProxyTimeout != 300*time.Millisecond ||
		c.ProxyStageTimeout != 50*time.Millisecond || c.VersionRemoveTimeout != time.Minute || cfg.Node.ShardID != "3" ||
		!c.DisableHeal || c.HealAfter != 30*time.Second || c.HealMaxParallel != 2 ||
		c.ProxyBatchKeys != 1 || c.ProxyConnsPerPeer != 8 {
		t.Fatalf("sharding: %+v", c)
	}

	// Without the table: off, with sequins' defaults.
	def := spangle.DefaultConfig().Cluster
	if spangle.DefaultConfig().Clustered || def.Replication != 2 || def.MinReplication != 1 || def.MaxReplication != 0 ||
		def.Assignment != "sequential" || def.TimeToConverge != 10*time.Second || def.ProxyTimeout != 100*time.Millisecond ||
		def.VersionRemoveTimeout != 10*time.Minute || def.DisableHeal || def.HealAfter != time.Minute || def.HealMaxParallel != 1 {
		t.Fatalf("defaults: %+v", def)
	}
}
