package spangle_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle"
)

// TestConfigPlugins: [plugins] sets the keys it names and leaves the
// others at DefaultConfig's (a table naming only cache_dir zeroed the call
// timeout, the memory limit and the pool size, which plugins.Config's
// Validate refuses now that it fills no default in).
func TestConfigPlugins(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		mod        func(*spangle.Config)
	}{
		{"cache dir only", "[plugins]\ncache_dir = \"wasm\"\n", func(c *spangle.Config) { c.Node.Plugins.CacheDir = "wasm" }},
		{"every key", "[plugins]\ncache_dir = \"w\"\ncall_timeout = \"2s\"\nmemory_limit_pages = 64\npool_size = 3\n",
			func(c *spangle.Config) {
				c.Node.Plugins.CacheDir, c.Node.Plugins.CallTimeout = "w", 2*time.Second
				c.Node.Plugins.MemoryLimitPages, c.Node.Plugins.PoolSize = 64, 3
			}},
		{"zeros say the default", "[plugins]\ncall_timeout = \"0s\"\nmemory_limit_pages = 0\npool_size = 0\n", func(*spangle.Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "plugins.toml")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			got, want := spangle.DefaultConfig(), spangle.DefaultConfig()
			tc.mod(&want)
			if err := spangle.LoadConfig(p, &got); err != nil {
				t.Fatal(err)
			}
			if got.Node.Plugins != want.Node.Plugins {
				t.Fatalf("plugins config %+v, want %+v", got.Node.Plugins, want.Node.Plugins)
			}
			got.Node.Source = "/src"
			if err := got.Node.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// TestConfigAccessLog: [http] and [nats] access_log keys, trusted
// proxies as CIDRs or addresses, and the errors naming the key.
func TestConfigAccessLog(t *testing.T) {
	load := func(body string) (spangle.Config, error) {
		p := filepath.Join(t.TempDir(), "spangle.toml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := spangle.DefaultConfig()
		return cfg, spangle.LoadConfig(p, &cfg)
	}
	cfg, err := load("[http]\naccess_log = \"/var/log/spangle/access.log\"\naccess_log_format = \"json\"\n" +
		"trusted_proxies = [\"10.0.0.0/8\", \"192.168.1.7\", \"2001:db8::/32\"]\n" +
		"[nats]\naccess_log = \"-\"\n")
	if err != nil {
		t.Fatal(err)
	}
	a, n := cfg.AccessLog, cfg.NATSAccessLog
	if a.Path != "/var/log/spangle/access.log" || a.Format != "json" || n.Path != "-" || n.Format != "combined" {
		t.Errorf("http %q %q, nats %q %q", a.Path, a.Format, n.Path, n.Format)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("2001:db8::/32")}
	if !slices.Equal(a.TrustedProxies, want) {
		t.Errorf("trusted proxies %v, want %v", a.TrustedProxies, want)
	}
	for body, key := range map[string]string{
		"[http]\naccess_log_format = \"common\"\n": "http.access_log_format",
		"[nats]\naccess_log_format = \"xml\"\n":    "nats.access_log_format",
		"[http]\ntrusted_proxies = [\"proxy\"]\n":  "http.trusted_proxies",
	} {
		if _, err := load(body); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", body, err, key)
		}
	}
}

// TestConfigDBInput: a db's format and key and value fields reach its
// node.DBConfig, and an unknown format is refused naming the db.
func TestConfigDBInput(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "dbs.toml")
	body := "[dbs.events]\nformat = \"parquet\"\nkey_field = \"id\"\nvalue_field = \"payload\"\n[dbs.other]\nformat = \"orc\"\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := spangle.DefaultConfig()
	if err := spangle.LoadConfig(p, &cfg); err != nil {
		t.Fatal(err)
	}
	db := cfg.Node.DBs["events"]
	if db.Format != "parquet" || db.KeyField != "id" || db.ValueField != "payload" {
		t.Fatalf("dbs.events = %+v", db)
	}
	cfg.Node.Source, cfg.Node.DataDir = "/src", dir
	if err := cfg.Node.Validate(); err == nil || !strings.Contains(err.Error(), "dbs.other: format") {
		t.Fatalf("Validate = %v, want it to refuse dbs.other's format", err)
	}
}

// TestConfigRegionHubConsumers: [region] hub_consumers reaches the
// region's configuration (off by default).
func TestConfigRegionHubConsumers(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{"[region]\nname = \"eu\"\n", false},
		{"[region]\nname = \"eu\"\nhub_consumers = true\n", true},
	} {
		p := filepath.Join(t.TempDir(), "spangle.toml")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := spangle.DefaultConfig()
		if err := spangle.LoadConfig(p, &c); err != nil {
			t.Fatal(err)
		}
		if got := c.NATS.Region.HubConsumers; got != tc.want || c.NATS.Region.Name != "eu" {
			t.Errorf("%q: hub_consumers %v (region %q), want %v", tc.body, got, c.NATS.Region.Name, tc.want)
		}
	}
}
