package spangle_test

import (
	"os"
	"path/filepath"
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
