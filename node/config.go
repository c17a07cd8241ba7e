package node

import (
	"fmt"
	"github.com/spangledb/spangle/node/source"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/plugins"
)

// Config configures a Node. The zero value is not valid: start from
// DefaultConfig and set Source and DataDir.
type Config struct {
	// Source is the source root: a local directory or file:///path.
	// Required: with OpenedSource set it is only the name logs show.
	Source string
	// OpenedSource, when set, is the Source used instead of
	// OpenSource(Source): a source the node cannot open by itself, such as
	// the NATS Object Store one (node/source/objstore), whose connection the
	// caller injects. Default nil.
	OpenedSource source.Source
	// AllowExternalSymlinks lets a local source follow symlinks (to data
	// files or version directories) that resolve outside the source root.
	// Default false: such a version fails with source.ErrSymlinkOutside.
	AllowExternalSymlinks bool
	// DataDir holds the partitions this node builds (sequins' local_store).
	// Required.
	DataDir string
	// Name is this node's name in the status. Default "localhost".
	Name string

	// RefreshPeriod is how often the source is listed for new versions;
	// 0 (the default) lists it only at start and on Refresh (SIGHUP).
	RefreshPeriod time.Duration
	// RemoveMissingAfter is how long a db that holds a version may be
	// missing from the source's listings before the node removes it
	// (deleting its data); until then it keeps serving, marked missing in
	// the status and metrics. Negative: only RemoveDB (an operator)
	// removes it. A db that holds no version is removed at once. Default
	// 24h: a source that empties by accident (an unmounted mount point, an
	// rsync target mid-sync, an Object Store bucket re-created empty) must
	// not cost the data it serves, and a day leaves an operator time to
	// see the alert and act on it, night or not; a db deleted on purpose
	// only holds its disk space for that day, or an operator removes it
	// at once.
	RemoveMissingAfter time.Duration
	// RequireSuccessFile makes only versions holding _SUCCESS visible.
	// Default false.
	RequireSuccessFile bool
	// MaxParallelLoads bounds the source files read at once, over all dbs.
	// Default 4.
	MaxParallelLoads int
	// MaxDownloadBandwidth bounds the bytes per second read from the
	// source, over all builds of the node. Default 0: unlimited.
	MaxDownloadBandwidth int64
	// DownloadRetries is how many times a failed open or read of a source
	// file is retried (with exponential backoff) before the build fails;
	// 0 or negative means never. Default 5.
	DownloadRetries int
	// DownloadBackoff is the pause before the first retry; it doubles on
	// each retry, up to DownloadBackoffMax. Defaults 1s and 30s.
	DownloadBackoff    time.Duration
	DownloadBackoffMax time.Duration
	// RetryFailedAfter is the pause before a version that failed to build
	// is built again; it doubles on each failure, up to 32 times this.
	// Negative: only on Refresh (SIGHUP). Default 1m.
	RetryFailedAfter time.Duration
	// MemoryBudget bounds the record bytes a build keeps in memory before it
	// spills sorted runs to disk. Default 256 MiB.
	MemoryBudget int64
	// Compression is how values are stored: "s2-blocks" (default: records
	// in S2-compressed blocks of 4 KiB, as sequins' default "snappy", which
	// means it), "none", or "s2" or "zstd" (each value, with a dictionary
	// per partition). A db may override it.
	Compression string

	// ContentType is sent with the values of dbs that set none. Default
	// "": the front door sends application/octet-stream.
	ContentType string

	// CacheControl is sent with the values of dbs that set none, so that
	// caches in front keep a value no longer than this after a version
	// switch. Default "public, max-age=60".
	CacheControl string
	// NegativeCacheControl is sent with the 404s of dbs that set none: a
	// key missing now may come with the next version. Default
	// "public, max-age=10".
	NegativeCacheControl string

	// DBs holds per-db settings, by db name. A db without an entry uses
	// the zero DBConfig.
	DBs map[string]DBConfig

	// NodeID identifies this node in the cluster's KV buckets; it must
	// match ^[-_a-zA-Z0-9]+$. Default "": the ID stored in
	// <DataDir>/node_id, which Start creates once (16 random hex digits).
	NodeID string
	// ShardID is published in this node's entries: nodes sharing one hold
	// the same partitions. Default "": the node ID.
	ShardID string
	// Advertiser, when set, receives this node's entries for the
	// cluster's KV buckets (see advertise.go). Default nil: the node
	// advertises nothing.
	Advertiser Advertiser
	// AdvertiseAddress is the HTTP host:port peers and clients reach this
	// node at, published in its entries. Default "".
	AdvertiseAddress string
	// AdvertiseSubjects is the NATS subject prefix of this node's front
	// door ("spangle.<cluster>"), published in its partitions entries.
	// Default "".
	AdvertiseSubjects string
	// AdvertiseRetry is the pause before an entry whose write failed is
	// written again. Default 1s.
	AdvertiseRetry time.Duration
	// BinaryVersion is the release published in the node entry. Default "".
	BinaryVersion string
	// WatchError, when set, says why the node cannot follow the
	// cluster's buckets (kvwatch.KV.WatchError: its watchers cannot be
	// started, say the streams' consumer limit is taken by others): while
	// it returns an error the node is not ready (Ready, /readyz,
	// spangle_ready) and Status.WatchError says why. It must not block.
	// Default nil: never.
	WatchError func() error

	// Cluster is the cluster this node is part of (package node/cluster);
	// nil, the default, runs the node alone.
	Cluster Cluster

	// CursorKey keys the MAC of listing cursors (cursor.go): set it to
	// the cluster's peer token, so that a cursor is only good on the nodes
	// sharing it and cannot pin a version a peer request would be refused.
	// Default "": a fixed key, which detects damage but not forgery.
	CursorKey string
	// ListPositionBytes bounds the memory of the positions a node keeps
	// between a listing's pages (list_positions.go: each local
	// partition's decoded block and record, so that the next page asked
	// here continues it instead of seeking and decoding again); the
	// least recently kept are dropped first. 0 keeps none. Default 8 MiB.
	ListPositionBytes int64
	// HotCacheBytes is the memory the answer cache ([storage] hot_cache,
	// cache.go) may add to the process: answers of keys asked more than
	// once, local and proxied, decoded as answered, with their ETags, for
	// every door. Its entries (keys, values and a measured per-entry
	// overhead) are bounded by HotCacheBytes over the garbage collector's
	// headroom, (1 + GOGC/100) × 5/4 with GOGC as it is when New runs
	// (3.75 at spangle's gc_percent of 200), so that its share of the RSS
	// is about HotCacheBytes. 0 turns it off. Default 4 MiB (docs/PERFORMANCE.md:
	// chosen by memory).
	HotCacheBytes int64

	// ChangedKeys is the most changed keys a version's switch keeps for
	// the purge hooks (ChangedKeys; the keys come from the merge diff of
	// the activation checks, guards_diff.go), so that they purge only
	// those; a switch that changed more is purged whole. 0 (the
	// default): none kept, and no diff made for them.
	ChangedKeys int

	// Plugins configures the WebAssembly host for dbs whose partitioner or
	// decoder is a module ("wasm:<path>"). DefaultConfig sets
	// plugins.DefaultConfig() with CacheDir "": an empty CacheDir becomes
	// <DataDir>/wasm-cache, and a nil Logger or Registerer the node's
	// (withDerived).
	Plugins plugins.Config

	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
	// Registerer receives the node's metrics. Default: none registered.
	Registerer prometheus.Registerer
}

// DBConfig holds one db's settings ([dbs.<name>] in the config file).
type DBConfig struct {
	// Partitioner names the db's partitioner: "sequins" (default),
	// "hadoop", "murmur3" or "wasm:<path>" (a plugin module; a relative path
	// is relative to the working directory).
	Partitioner string
	// Decoder, when set ("wasm:<path>"), decodes values before they are
	// served (not for peers, nor for lookups that ask for raw values); its
	// content type replaces ContentType. Default "": values as stored.
	Decoder string
	// ContentType is sent with values. Default "": Config.ContentType.
	ContentType string
	// CacheControl is sent with values. Default "": Config.CacheControl.
	CacheControl string
	// NegativeCacheControl is sent with 404s. Default "":
	// Config.NegativeCacheControl.
	NegativeCacheControl string
	// Presharded says each source file holds exactly one partition; every
	// key is verified. Default false.
	Presharded bool
	// Format of the source files: "auto" or "" (default) detects each
	// file's from its first bytes, and Sparkey input from its logs'
	// names (.spl); "sequencefile", "parquet", "avro" or "sparkey" forces
	// it (docs/SOURCES.md, "Input formats").
	Format string
	// KeyField and ValueField name the key and value columns (Parquet)
	// or fields (Avro). Default "": "key" and "value".
	KeyField, ValueField string
	// Compression overrides Config.Compression for this db when set.
	Compression string
	// Activation is "auto" (default ""): a new version goes active once
	// built (and replicated); or "manual": it is built and waits until a
	// pin names it (spangle activate, pin.go).
	Activation string

	// Guards (guards.go): a version that fails one is refused, held but
	// not activated until an operator forces it (spangle activate
	// --force) or a newer version passes. MinRecords is the fewest
	// records a version may hold. MaxChange is the largest fraction of
	// the active version's keys a new version may add, remove or change
	// (0.05: 5 %). CanaryKeys must exist in every version; CanaryValues
	// must exist with exactly these values. Defaults 0, 0, none, none:
	// nothing checked.
	MinRecords   int64
	MaxChange    float64
	CanaryKeys   []string
	CanaryValues map[string]string
}

// maxCanaries bounds a db's canary keys and values, each.
const maxCanaries = 1000

// maxCanaryKey bounds a canary key: the longest key a version may hold.
const maxCanaryKey = 32 << 10

// ActivationManual is DBConfig.Activation for a db whose new versions
// wait for spangle activate.
const ActivationManual = "manual"

// DefaultConfig returns the defaults stated on each field: every default
// is set here, and only here. Source and DataDir are still to be set.
func DefaultConfig() Config {
	return Config{
		Name:                 "localhost",
		MaxParallelLoads:     4,
		MemoryBudget:         256 << 20,
		DownloadRetries:      5,
		DownloadBackoff:      time.Second,
		DownloadBackoffMax:   30 * time.Second,
		RetryFailedAfter:     time.Minute,
		RemoveMissingAfter:   24 * time.Hour,
		Compression:          string(blocks.CompressionS2Blocks),
		CacheControl:         "public, max-age=60",
		NegativeCacheControl: "public, max-age=10",
		AdvertiseRetry:       time.Second,
		ListPositionBytes:    8 << 20,
		HotCacheBytes:        4 << 20,
		Plugins:              defaultPlugins(),
	}
}

// defaultPlugins is plugins.DefaultConfig() without its CacheDir, so that
// the node's is derived from DataDir.
func defaultPlugins() plugins.Config {
	p := plugins.DefaultConfig()
	p.CacheDir = ""
	return p
}

// Validate checks the config: it changes nothing, so calling it twice
// gives the same answer. Start from DefaultConfig: a zero count or
// duration is an error, not a request for the default.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.Source == "":
		return bad("source is required")
	case c.DataDir == "":
		return bad("data_dir is required")
	case c.Name == "":
		return bad("name is empty")
	case c.MaxParallelLoads < 1:
		return bad("max_parallel_loads %d: want at least 1", c.MaxParallelLoads)
	case c.MemoryBudget < 1<<20:
		return bad("storage.memory_budget %d: want at least 1 MiB", c.MemoryBudget)
	case c.MaxDownloadBandwidth < 0:
		return bad("max_download_bandwidth %d is negative", c.MaxDownloadBandwidth)
	case c.RetryFailedAfter == 0:
		return bad("retry_failed_after is 0: want a pause, or a negative value for only on SIGHUP")
	case c.RemoveMissingAfter == 0:
		return bad("remove_missing_after is 0: want a pause, or a negative value for only by an operator")
	case c.DownloadBackoff <= 0:
		return bad("download_backoff %v: want a positive pause", c.DownloadBackoff)
	case c.DownloadBackoffMax < c.DownloadBackoff:
		return bad("download backoff maximum %v is below download_backoff %v", c.DownloadBackoffMax, c.DownloadBackoff)
	case c.AdvertiseRetry <= 0:
		return bad("advertise retry %v: want a positive pause", c.AdvertiseRetry)
	case c.ListPositionBytes < 0:
		return bad("storage.list_positions %d is negative", c.ListPositionBytes)
	case c.HotCacheBytes < 0:
		return bad("storage.hot_cache %d is negative", c.HotCacheBytes)
	case c.ChangedKeys < 0:
		return bad("changed keys %d is negative", c.ChangedKeys)
	case c.RefreshPeriod < 0:
		return bad("refresh_period %v is negative", c.RefreshPeriod)
	case c.NodeID != "" && !source.ValidName(c.NodeID):
		return bad("node ID %q must match %s", c.NodeID, source.NamePattern)
	case c.ShardID != "" && !source.ValidName(c.ShardID):
		return bad("shard ID %q must match %s", c.ShardID, source.NamePattern)
	}
	for key, v := range map[string]string{"content_type": c.ContentType, "cache_control": c.CacheControl, "negative_cache_control": c.NegativeCacheControl} {
		if !validHeaderValue(v) {
			return bad("%s %q: want printable ASCII, at most 256 bytes", key, v)
		}
	}
	if err := c.Plugins.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if _, err := blocks.ParseCompression(c.Compression); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	for name, db := range c.DBs {
		if !source.ValidName(name) {
			return bad("db name %q must match %s", name, source.NamePattern)
		}
		if err := plugins.CheckSpec(db.Partitioner); err != nil {
			return bad("dbs.%s: %v", name, err)
		}
		if db.Decoder != "" && (!strings.HasPrefix(db.Decoder, wasmPrefix) || len(db.Decoder) == len(wasmPrefix)) {
			return bad("dbs.%s: decoder %q: want wasm:<path>", name, db.Decoder)
		}
		if db.Compression != "" {
			if _, err := blocks.ParseCompression(db.Compression); err != nil {
				return bad("dbs.%s: %v", name, err)
			}
		}
		if _, err := blocks.ParseFormat(db.Format); err != nil {
			return bad("dbs.%s: format: %v", name, err)
		}
		if db.Activation != "" && db.Activation != "auto" && db.Activation != ActivationManual {
			return bad("dbs.%s: activation %q: want auto or manual", name, db.Activation)
		}
		for key, v := range map[string]string{"content_type": db.ContentType, "cache_control": db.CacheControl, "negative_cache_control": db.NegativeCacheControl} {
			if !validHeaderValue(v) {
				return bad("dbs.%s: %s %q: want printable ASCII, at most 256 bytes", name, key, v)
			}
		}
		if err := db.validateGuards(); err != nil {
			return bad("dbs.%s: %v", name, err)
		}
	}
	return nil
}

// validHeaderValue reports whether s may be sent as an HTTP header value
// as it is: printable ASCII, at most 256 bytes.
func validHeaderValue(s string) bool {
	if len(s) > 256 {
		return false
	}
	for i := range len(s) {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// withDerived returns c with the fields derived from others filled in:
// the plugins' cache dir, logger and registry default to the node's.
func (c Config) withDerived() Config {
	if c.Plugins.CacheDir == "" {
		c.Plugins.CacheDir = filepath.Join(c.DataDir, "wasm-cache")
	}
	if c.Plugins.Logger == nil {
		c.Plugins.Logger = c.Logger
	}
	if c.Plugins.Registerer == nil {
		c.Plugins.Registerer = c.Registerer
	}
	return c
}

// dbConfig returns the settings of db name, with the node-wide defaults.
func (c *Config) dbConfig(name string) DBConfig {
	db := c.DBs[name]
	if db.Compression == "" {
		db.Compression = c.Compression
	}
	if db.ContentType == "" {
		db.ContentType = c.ContentType
	}
	if db.CacheControl == "" {
		db.CacheControl = c.CacheControl
	}
	if db.NegativeCacheControl == "" {
		db.NegativeCacheControl = c.NegativeCacheControl
	}
	return db
}

// wasmPrefix starts a plugin spec: "wasm:<path>".
const wasmPrefix = "wasm:"

// validateGuards checks the db's guards (guards.go).
func (db DBConfig) validateGuards() error {
	switch {
	case db.MinRecords < 0:
		return fmt.Errorf("min_records %d is negative", db.MinRecords)
	case db.MaxChange < 0 || db.MaxChange != db.MaxChange || db.MaxChange > 1e9:
		return fmt.Errorf("max_change %v: want a fraction, 0 (not checked) or more", db.MaxChange)
	case len(db.CanaryKeys) > maxCanaries:
		return fmt.Errorf("canary_keys: %d keys, want at most %d", len(db.CanaryKeys), maxCanaries)
	case len(db.CanaryValues) > maxCanaries:
		return fmt.Errorf("canary_values: %d keys, want at most %d", len(db.CanaryValues), maxCanaries)
	}
	for _, k := range db.CanaryKeys {
		if k == "" || len(k) > maxCanaryKey {
			return fmt.Errorf("canary_keys: key %q: want 1 to %d bytes", clip(k), maxCanaryKey)
		}
	}
	for k, v := range db.CanaryValues {
		if k == "" || len(k) > maxCanaryKey {
			return fmt.Errorf("canary_values: key %q: want 1 to %d bytes", clip(k), maxCanaryKey)
		}
		if len(v) > 1<<20 {
			return fmt.Errorf("canary_values: the value of %q: %d bytes, want at most 1 MiB", clip(k), len(v))
		}
	}
	return nil
}
