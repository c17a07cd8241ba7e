package plugins

import (
	"errors"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"CallTimeout":      func(c *Config) { c.CallTimeout = -time.Second },
		"InitTimeout":      func(c *Config) { c.InitTimeout = -1 },
		"WatchdogInterval": func(c *Config) { c.WatchdogInterval = -1 },
		"MemoryLimitPages": func(c *Config) { c.MemoryLimitPages = 65537 },
		"PoolSize":         func(c *Config) { c.PoolSize = -1 },
	} {
		c := DefaultConfig()
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	c, err := Config{}.withDefaults()
	if err != nil || c.CallTimeout != DefaultCallTimeout || c.InitTimeout != DefaultInitTimeout ||
		c.MemoryLimitPages != DefaultMemoryLimitPages || c.PoolSize < 1 || c.Logger == nil || c.CacheDir != "" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}
