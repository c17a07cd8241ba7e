package kvwatch

import (
	"errors"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.EmbeddedStoreDir = "nats"
		return c
	}
	tests := []struct {
		name   string
		change func(*Config)
		ok     bool
	}{
		{"defaults with a store dir", func(*Config) {}, true},
		// Defaults live in DefaultConfig only: Validate fills nothing in.
		{"zero config with a store dir", func(c *Config) { *c = Config{EmbeddedStoreDir: "nats"} }, false},
		{"zero replicas", func(c *Config) { c.Replicas = 0 }, false},
		{"zero entry TTL", func(c *Config) { c.EntryTTL = 0 }, false},
		{"zero partitions TTL", func(c *Config) { c.PartitionsTTL = 0 }, false},
		{"zero marker TTL", func(c *Config) { c.MarkerTTL = 0 }, false},
		{"zero op timeout", func(c *Config) { c.OpTimeout = 0 }, false},
		{"zero reconnect wait", func(c *Config) { c.ReconnectWait = 0 }, false},
		{"no cluster name", func(c *Config) { c.ClusterName = "" }, false},
		{"no connection name", func(c *Config) { c.ConnName = "" }, false},
		{"no listen address", func(c *Config) { c.EmbeddedListen = "" }, false},
		{"zero max store", func(c *Config) { c.EmbeddedMaxStore = 0 }, false},
		{"zero recover check", func(c *Config) { c.EmbeddedRecoverCheck = 0 }, false},
		{"region without hub domain", func(c *Config) { c.Region.Name, c.Region.Hub, c.Region.HubDomain = "ra", "nats-leaf://h:7422", "" }, false},
		{"heartbeat 0: a third of the TTL", func(c *Config) { c.Heartbeat = 0 }, true},
		{"no logger", func(c *Config) { c.Logger = nil }, true},
		{"embedded without store dir", func(c *Config) { c.EmbeddedStoreDir = "" }, false},
		{"external needs no store dir", func(c *Config) { c.EmbeddedStoreDir = ""; c.URLs = []string{"nats://h:4222"} }, true},
		{"empty URL", func(c *Config) { c.URLs = []string{" "} }, false},
		{"TTL below 1s", func(c *Config) { c.EntryTTL = 500 * time.Millisecond }, false},
		{"TTL not whole seconds", func(c *Config) { c.EntryTTL = 1500 * time.Millisecond }, false},
		{"heartbeat not below TTL", func(c *Config) { c.EntryTTL = time.Second; c.Heartbeat = time.Second }, false},
		{"negative heartbeat", func(c *Config) { c.Heartbeat = -time.Second }, false},
		{"marker TTL below 1s", func(c *Config) { c.MarkerTTL = time.Millisecond }, false},
		{"negative op timeout", func(c *Config) { c.OpTimeout = -1 }, false},
		{"replicas 6", func(c *Config) { c.Replicas = 6 }, false},
		{"replicas 3", func(c *Config) { c.Replicas = 3 }, true},
		{"creds and nkey", func(c *Config) { c.URLs = []string{"nats://h"}; c.CredsFile = "a"; c.NKeySeedFile = "b" }, false},
		{"creds on embedded", func(c *Config) { c.CredsFile = "a" }, false},
		{"cert without key", func(c *Config) { c.URLs = []string{"nats://h"}; c.TLSCertFile = "a" }, false},
		{"TLS on URLs", func(c *Config) {
			c.URLs = []string{"tls://h"}
			c.TLSCAFile = "ca"
			c.TLSCertFile = "c"
			c.TLSKeyFile = "k"
		}, true},
		{"bad listen", func(c *Config) { c.EmbeddedListen = "localhost" }, false},
		{"bad listen port", func(c *Config) { c.EmbeddedListen = "localhost:http" }, false},
		{"random port 0", func(c *Config) { c.EmbeddedListen = "127.0.0.1:0" }, true},
		{"random port -1", func(c *Config) { c.EmbeddedListen = "127.0.0.1:-1" }, true},
		{"cluster without listen", func(c *Config) { c.EmbeddedClusterName = "c" }, false},
		{"routes without cluster", func(c *Config) { c.EmbeddedRoutes = []string{"nats://h:6222"} }, false},
		{"cluster", func(c *Config) {
			c.EmbeddedClusterName, c.EmbeddedClusterListen = "c", "127.0.0.1:6222"
			c.EmbeddedRoutes = []string{"nats://127.0.0.1:6222"}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.change(&c)
			err := c.Validate()
			if tt.ok && err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	c.EntryTTL = 6 * time.Second
	if c.heartbeat() != 2*time.Second {
		t.Errorf("heartbeat() = %v, want EntryTTL/3 = 2s", c.heartbeat())
	}
	if c.Heartbeat = time.Second; c.heartbeat() != time.Second {
		t.Errorf("heartbeat() = %v, want Heartbeat, 1s", c.heartbeat())
	}
	d := DefaultConfig()
	if d.EntryTTL != 10*time.Second || d.OpTimeout != 2*time.Second || d.Replicas != 1 ||
		d.ClusterName != "spangle" || d.EmbeddedListen != "127.0.0.1:4222" {
		t.Errorf("DefaultConfig() = %+v", d)
	}
	if _, port, _ := splitListen("127.0.0.1:0"); port != -1 {
		t.Errorf("port 0 maps to %d, want -1 (random)", port)
	}
}
