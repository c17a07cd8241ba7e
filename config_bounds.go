package spangle

import (
	"errors"
	"fmt"
	"time"
)

// Every duration and size of the config file has a floor and a ceiling:
// a typo such as refresh_period = "1ns" (the source listed in a loop, a
// core busy on an idle node) or memory_budget = "1KiB" is refused at
// start, naming the key, instead of hurting the node or its source.
// Validate checks them; the values come from DefaultConfig and the file.
// The floors leave room for tests and small machines; the ceilings keep
// doubling backoffs and byte counts far from overflowing.

// bound is the range of one duration or size key of the file.
type bound struct {
	key      string // as the file writes it: "refresh_period", "nats.entry_ttl"
	min, max int64  // inclusive; nanoseconds for a duration, bytes for a size
	// zero, when set, says what 0 means: 0 is then allowed below min.
	zero string
	// negative, when set, says what a negative value means: it is then
	// allowed.
	negative string
	dur      bool // a duration, printed as one
	// value reads the key's value from a Config.
	value func(*Config) int64
}

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
	tib = 1 << 40
)

func durBound(key string, lo, hi time.Duration, value func(*Config) time.Duration) bound {
	return bound{key: key, min: int64(lo), max: int64(hi), dur: true,
		value: func(c *Config) int64 { return int64(value(c)) }}
}

func sizeBound(key string, lo, hi int64, value func(*Config) int64) bound {
	return bound{key: key, min: lo, max: hi, value: value}
}

// withZero allows 0, meaning what.
func (b bound) withZero(what string) bound { b.zero = what; return b }

// withNegative allows negative values, meaning what.
func (b bound) withNegative(what string) bound { b.negative = what; return b }

// bounds lists every duration and size key of the file
// (TestConfigBounds checks that none is missing).
var bounds = []bound{
	durBound("refresh_period", time.Second, 7*24*time.Hour, func(c *Config) time.Duration { return c.Node.RefreshPeriod }).
		withZero("list the source only at start and on SIGHUP"),
	durBound("download_backoff", 10*time.Millisecond, 30*time.Second, func(c *Config) time.Duration { return c.Node.DownloadBackoff }),
	durBound("retry_failed_after", time.Second, 24*time.Hour, func(c *Config) time.Duration { return c.Node.RetryFailedAfter }).
		withNegative("retry only on SIGHUP"),
	// A floor well above a listing's hiccup: removal must be deliberate.
	durBound("remove_missing_after", time.Minute, 365*24*time.Hour, func(c *Config) time.Duration { return c.Node.RemoveMissingAfter }).
		withNegative("only an operator removes a db missing from the source (DELETE /admin/dbs/<db>)"),
	sizeBound("max_download_bandwidth", 64*kib, tib, func(c *Config) int64 { return c.Node.MaxDownloadBandwidth }).
		withZero("unlimited"),

	sizeBound("storage.memory_budget", mib, tib, func(c *Config) int64 { return c.Node.MemoryBudget }),
	sizeBound("storage.hot_cache", mib, 64*gib, func(c *Config) int64 { return c.Node.HotCacheBytes }).
		withZero("no hot cache"),
	sizeBound("storage.list_positions", 64*kib, 64*gib, func(c *Config) int64 { return c.Node.ListPositionBytes }).
		withZero("keep none: every page seeks its partitions"),
	sizeBound("runtime.memory_limit", 64*mib, 64*tib, func(c *Config) int64 { return c.MemoryLimit }).
		withZero("leave the Go runtime's"),
	durBound("plugins.call_timeout", time.Millisecond, time.Minute, func(c *Config) time.Duration { return c.Node.Plugins.CallTimeout }),

	durBound("nats.entry_ttl", time.Second, time.Hour, func(c *Config) time.Duration { return c.NATS.EntryTTL }),
	durBound("nats.partitions_ttl", time.Second, 7*24*time.Hour, func(c *Config) time.Duration { return c.NATS.PartitionsTTL }),
	durBound("nats.store_recover_check", 100*time.Millisecond, time.Hour, func(c *Config) time.Duration { return c.NATS.EmbeddedRecoverCheck }),
	sizeBound("nats.jetstream_max_memory", mib, tib, func(c *Config) int64 { return c.NATS.EmbeddedMaxMemory }),
	sizeBound("nats.jetstream_max_store", 16*mib, 64*tib, func(c *Config) int64 { return c.NATS.EmbeddedMaxStore }),
	sizeBound("nats.store_min_free", 0, tib, func(c *Config) int64 { return c.NATS.EmbeddedMinFree }),

	durBound("region.hub_check_timeout", 100*time.Millisecond, 5*time.Minute, func(c *Config) time.Duration { return c.NATS.Region.HubCheckTimeout }),
	durBound("region.hub_check_interval", 100*time.Millisecond, time.Hour, func(c *Config) time.Duration { return c.NATS.Region.HubCheckInterval }),

	durBound("sharding.time_to_converge", 100*time.Millisecond, time.Hour, func(c *Config) time.Duration { return c.Cluster.TimeToConverge }),
	durBound("sharding.proxy_timeout", time.Millisecond, time.Minute, func(c *Config) time.Duration { return c.Cluster.ProxyTimeout }),
	durBound("sharding.proxy_list_timeout", time.Millisecond, time.Minute, func(c *Config) time.Duration { return c.Cluster.ProxyListTimeout }),
	durBound("sharding.proxy_stage_timeout", time.Millisecond, time.Minute, func(c *Config) time.Duration { return c.Cluster.ProxyStageTimeout }).
		withZero("proxy_timeout divided by replication"),
	durBound("sharding.version_remove_timeout", time.Second, 7*24*time.Hour, func(c *Config) time.Duration { return c.Cluster.VersionRemoveTimeout }),
	durBound("sharding.heal_after", time.Second, 7*24*time.Hour, func(c *Config) time.Duration { return c.Cluster.HealAfter }),
	durBound("cluster.build_once_wait", time.Second, 7*24*time.Hour, func(c *Config) time.Duration { return c.Cluster.BuildOnceWait }),

	sizeBound("http.max_header_bytes", kib, 16*mib, func(c *Config) int64 { return int64(c.HTTP.MaxHeaderBytes) }),
	sizeBound("http.max_batch_bytes", kib, gib, func(c *Config) int64 { return int64(c.HTTP.MaxBatchBytes) }),
	sizeBound("http.max_batch_reply_bytes", kib, gib, func(c *Config) int64 { return int64(c.HTTP.MaxBatchReplyBytes) }),
	sizeBound("cluster.peer_copy_bandwidth", 64*kib, tib, func(c *Config) int64 { return c.HTTP.PeerCopyBandwidth }),
	sizeBound("cluster.build_once_min_size", kib, 1<<50, func(c *Config) int64 { return c.Cluster.BuildOnceMinBytes }).
		withZero("every version is built once"),
	sizeBound("http.batch_bytes_in_flight", 3*kib, tib, func(c *Config) int64 { return c.HTTP.BatchBytesInFlight }),
	durBound("http.batch_wait", 0, time.Minute, func(c *Config) time.Duration { return c.HTTP.BatchWait }),
	durBound("http.h2_reset_window", time.Second, time.Hour, func(c *Config) time.Duration { return c.HTTP.H2ResetWindow }),
	durBound("http.tls_reload_check", 100*time.Millisecond, 24*time.Hour, func(c *Config) time.Duration { return c.TLS.ReloadCheck }),

	durBound("purge.timeout", 100*time.Millisecond, 10*time.Minute, func(c *Config) time.Duration { return c.Purge.Timeout }),
	durBound("purge.backoff", 10*time.Millisecond, 10*time.Minute, func(c *Config) time.Duration { return c.Purge.Backoff }),
}

// countBound is the range of one count key of the file.
type countBound struct {
	key      string
	min, max int
	value    func(*Config) int
}

// counts lists the count keys whose zero is no default but a mistake
// (max_list_keys = 0 would list nothing).
var counts = []countBound{
	{"http.max_batch_keys", 1, 1 << 20, func(c *Config) int { return c.HTTP.MaxBatchKeys }},
	{"http.max_list_keys", 1, 1 << 20, func(c *Config) int { return c.HTTP.MaxListKeys }},
	{"cluster.peer_copy_concurrency", 1, 1024, func(c *Config) int { return c.HTTP.PeerCopyConcurrency }},
}

// Validate checks that every duration, size and count of the config file
// is within its bounds, and reports every one that is not, naming its key.
// It changes nothing. spangle serve calls it before Start; Start does not,
// so that tests and embedders may shrink timeouts below the floors.
func (c Config) Validate() error {
	var errs []error
	for _, b := range bounds {
		if err := b.check(b.value(&c)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, b := range counts {
		if v := b.value(&c); v < b.min || v > b.max {
			errs = append(errs, fmt.Errorf("%s = %d is out of range: want %d to %d", b.key, v, b.min, b.max))
		}
	}
	return errors.Join(errs...)
}

// check returns an error naming the key if v is out of bounds.
func (b bound) check(v int64) error {
	switch {
	case v == 0 && b.zero != "", v < 0 && b.negative != "":
		return nil
	case v >= b.min && v <= b.max:
		return nil
	}
	want := fmt.Sprintf("%s to %s", b.format(b.min), b.format(b.max))
	if b.zero != "" {
		want += fmt.Sprintf(", or 0 to %s", b.zero)
	}
	if b.negative != "" {
		want += fmt.Sprintf(", or negative to %s", b.negative)
	}
	return fmt.Errorf("%s = %q is out of range: want %s", b.key, b.format(v), want)
}

// format prints v as the file writes it.
func (b bound) format(v int64) string {
	if b.dur {
		return time.Duration(v).String()
	}
	return formatBytes(v)
}

// formatBytes prints a size as ParseBytes reads it: in the largest binary
// unit that divides it ("64MiB", "1536KiB", "100").
func formatBytes(v int64) string {
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"TiB", tib}, {"GiB", gib}, {"MiB", mib}, {"KiB", kib}} {
		if v != 0 && v%u.m == 0 {
			return fmt.Sprintf("%d%s", v/u.m, u.suffix)
		}
	}
	return fmt.Sprint(v)
}
