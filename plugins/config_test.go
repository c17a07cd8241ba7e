package plugins

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/nodetest"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // in the error; "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		// Defaults live in DefaultConfig only: Validate fills nothing in.
		{"zero", func(c *Config) { *c = Config{} }, "CallTimeout"},
		{"zero call timeout", func(c *Config) { c.CallTimeout = 0 }, "CallTimeout"},
		{"zero init timeout", func(c *Config) { c.InitTimeout = 0 }, "InitTimeout"},
		{"zero memory pages", func(c *Config) { c.MemoryLimitPages = 0 }, "MemoryLimitPages"},
		{"zero pool size", func(c *Config) { c.PoolSize = 0 }, "PoolSize"},
		{"negative call timeout", func(c *Config) { c.CallTimeout = -time.Second }, "CallTimeout"},
		{"negative init timeout", func(c *Config) { c.InitTimeout = -1 }, "InitTimeout"},
		{"negative watchdog interval", func(c *Config) { c.WatchdogInterval = -1 }, "WatchdogInterval"},
		{"memory over 4 GiB", func(c *Config) { c.MemoryLimitPages = 65537 }, "MemoryLimitPages"},
		{"negative pool size", func(c *Config) { c.PoolSize = -1 }, "PoolSize"},
		// Zero where zero is the default.
		{"watchdog interval 0: derived", func(c *Config) { c.WatchdogInterval = 0 }, ""},
		{"no cache dir", func(c *Config) { c.CacheDir = "" }, ""},
		{"no logger, no registerer", func(c *Config) { c.Logger, c.Registerer = nil, nil }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if (err == nil) != (tc.want == "") {
				t.Fatalf("Validate = %v", err)
			}
			if err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v: want ErrConfig naming %s", err, tc.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	if c.CallTimeout != DefaultCallTimeout || c.InitTimeout != DefaultInitTimeout ||
		c.MemoryLimitPages != DefaultMemoryLimitPages || c.PoolSize != runtime.GOMAXPROCS(0) ||
		c.WatchdogInterval != 0 || c.Logger != nil || c.Registerer != nil {
		t.Fatalf("DefaultConfig() = %+v", c)
	}
	want := ""
	if dir, err := os.UserCacheDir(); err == nil {
		want = filepath.Join(dir, "spangle", "wasm")
	}
	if c.CacheDir != want {
		t.Fatalf("CacheDir = %q, want %q", c.CacheDir, want)
	}
	// The doc names the machine's directory by its placeholder.
	if want != "" {
		c.CacheDir = "<user cache dir>/spangle/wasm"
	}
	if n := nodetest.CheckDocDefaults(t, []string{"config.go"}, map[string]any{"Config": c}); n < 7 {
		t.Fatalf("only %d documented defaults checked", n)
	}
}
