package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestConfigValidate: the defaults with a View are valid and Validate
// changes nothing; every out-of-range value is an error naming its key.
func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.View = newFakeView()
		return c
	}
	c := base()
	before := fmt.Sprintf("%+v", c)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprintf("%+v", c); after != before {
		t.Fatalf("Validate changed the config:\n%s\n%s", before, after)
	}
	if got := c.stageTimeout(); got != 50*time.Millisecond {
		t.Fatalf("proxy_stage_timeout default: %v, want proxy_timeout/replication", got)
	}
	for _, tc := range []struct {
		key string
		mod func(*Config)
	}{
		{"View", func(c *Config) { c.View = nil }},
		{"replication", func(c *Config) { c.Replication = 0 }},
		{"min_replication", func(c *Config) { c.MinReplication = 0 }},
		{"min_replication", func(c *Config) { c.MinReplication = 3 }},
		{"max_replication", func(c *Config) { c.MaxReplication = -1 }},
		{"assignment", func(c *Config) { c.Assignment = "random" }},
		{"time_to_converge", func(c *Config) { c.TimeToConverge = 0 }},
		{"proxy_timeout", func(c *Config) { c.ProxyTimeout = -time.Millisecond }},
		{"proxy_stage_timeout", func(c *Config) { c.ProxyStageTimeout = -time.Millisecond }},
		{"proxy_batch_keys", func(c *Config) { c.ProxyBatchKeys = -1 }},
		{"proxy_conns_per_peer", func(c *Config) { c.ProxyConnsPerPeer = -1 }},
		{"version_remove_timeout", func(c *Config) { c.VersionRemoveTimeout = 0 }},
	} {
		c := base()
		tc.mod(&c)
		err := c.Validate()
		if !errors.Is(err, node.ErrConfig) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: Validate = %v, want ErrConfig naming it", tc.key, err)
		}
	}
}

// TestConfigDocDefaults: every "Default X" in Config's doc comments
// states what DefaultConfig sets.
func TestConfigDocDefaults(t *testing.T) {
	if n := nodetest.CheckDocDefaults(t, []string{"config.go"}, map[string]any{"Config": DefaultConfig()}); n < 10 {
		t.Fatalf("only %d documented defaults checked", n)
	}
}
