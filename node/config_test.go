package node

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/plugins"
)

// TestConfigBounds: every out-of-range value is an error naming its key,
// Validate changes nothing, and a zero count or duration is an error
// rather than a silent default (defaults come from DefaultConfig only).
func TestConfigBounds(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Source, c.DataDir = "/src", "/data"
		return c
	}
	c := base()
	before := fmt.Sprintf("%+v", c)
	for range 2 {
		if err := c.Validate(); err != nil {
			t.Fatalf("defaults: %v", err)
		}
	}
	if after := fmt.Sprintf("%+v", c); after != before {
		t.Fatalf("Validate changed the config:\n%s\n%s", before, after)
	}
	for _, tc := range []struct {
		key string
		mod func(*Config)
	}{
		{"source", func(c *Config) { c.Source = "" }},
		{"data_dir", func(c *Config) { c.DataDir = "" }},
		{"max_parallel_loads", func(c *Config) { c.MaxParallelLoads = 0 }},
		{"max_parallel_loads", func(c *Config) { c.MaxParallelLoads = -3 }},
		{"memory_budget", func(c *Config) { c.MemoryBudget = 0 }},
		{"memory_budget", func(c *Config) { c.MemoryBudget = 1000 }},
		{"max_download_bandwidth", func(c *Config) { c.MaxDownloadBandwidth = -1 }},
		{"retry_failed_after", func(c *Config) { c.RetryFailedAfter = 0 }},
		{"remove_missing_after", func(c *Config) { c.RemoveMissingAfter = 0 }},
		{"download_backoff", func(c *Config) { c.DownloadBackoff = 0 }},
		{"download backoff maximum", func(c *Config) { c.DownloadBackoffMax = c.DownloadBackoff / 2 }},
		{"advertise retry", func(c *Config) { c.AdvertiseRetry = 0 }},
		{"refresh_period", func(c *Config) { c.RefreshPeriod = -time.Second }},
		{"node ID", func(c *Config) { c.NodeID = "a b" }},
		{"shard ID", func(c *Config) { c.ShardID = "a/b" }},
		{"compression", func(c *Config) { c.Compression = "lz4" }},
		{"PoolSize", func(c *Config) { c.Plugins.PoolSize = 0 }},
		{"db name", func(c *Config) { c.DBs = map[string]DBConfig{"bad name": {}} }},
		{"dbs.d", func(c *Config) { c.DBs = map[string]DBConfig{"d": {Decoder: "nope"}} }},
		{"dbs.d: min_records", func(c *Config) { c.DBs = map[string]DBConfig{"d": {MinRecords: -1}} }},
		{"dbs.d: max_change", func(c *Config) { c.DBs = map[string]DBConfig{"d": {MaxChange: -0.5}} }},
		{"dbs.d: max_change", func(c *Config) { c.DBs = map[string]DBConfig{"d": {MaxChange: math.NaN()}} }},
		{"dbs.d: canary_keys", func(c *Config) { c.DBs = map[string]DBConfig{"d": {CanaryKeys: []string{""}}} }},
		{"dbs.d: canary_keys", func(c *Config) { c.DBs = map[string]DBConfig{"d": {CanaryKeys: make([]string, 1001)}} }},
		{"dbs.d: canary_values", func(c *Config) {
			c.DBs = map[string]DBConfig{"d": {CanaryValues: map[string]string{strings.Repeat("k", 40000): "v"}}}
		}},
		{"changed keys", func(c *Config) { c.ChangedKeys = -1 }},
	} {
		c := base()
		tc.mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: Validate = %v, want ErrConfig naming it", tc.key, err)
		}
	}
}

// TestConfigDocDefaults: every "Default X" in the doc comments of Config
// and DBConfig states what DefaultConfig sets.
func TestConfigDocDefaults(t *testing.T) {
	checked := nodetest.CheckDocDefaults(t, []string{"config.go"}, map[string]any{
		"Config":   DefaultConfig(),
		"DBConfig": DBConfig{},
	})
	if checked < 20 {
		t.Fatalf("only %d documented defaults checked", checked)
	}
	want := plugins.DefaultConfig()
	want.CacheDir = ""
	if got := DefaultConfig().Plugins; got != want {
		t.Errorf("DefaultConfig().Plugins = %+v, want plugins.DefaultConfig() with CacheDir \"\", %+v", got, want)
	}
}
