package node

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/plugins"
)

// Config configures a Node. The zero value is not valid: start from
// DefaultConfig and set Source and DataDir.
type Config struct {
	// Source is the source root: a local directory or file:///path.
	// Required.
	Source string
	// DataDir holds the partitions this node builds (sequins' local_store).
	// Required.
	DataDir string
	// Name is this node's name in the status. Default "localhost".
	Name string

	// RefreshPeriod is how often the source is listed for new versions;
	// 0 (the default) lists it only at start and on Refresh (SIGHUP).
	RefreshPeriod time.Duration
	// RequireSuccessFile makes only versions holding _SUCCESS visible.
	// Default false.
	RequireSuccessFile bool
	// MaxParallelLoads bounds the source files read at once, over all dbs.
	// Default 4.
	MaxParallelLoads int
	// MemoryBudget bounds the record bytes a build keeps in memory before it
	// spills sorted runs to disk. Default 256 MiB.
	MemoryBudget int64
	// Compression is how values are stored: "none" (default), "s2" or
	// "zstd" (a dictionary per partition). A db may override it.
	Compression string

	// ContentType is sent with the values of dbs that set none. Default
	// application/octet-stream.
	ContentType string

	// DBs holds per-db settings, by db name. A db without an entry uses
	// the zero DBConfig.
	DBs map[string]DBConfig

	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
	// Registerer receives the node's metrics. Default: none registered.
	Registerer prometheus.Registerer
}

// DBConfig holds one db's settings ([dbs.<name>] in the config file).
type DBConfig struct {
	// Partitioner names the db's partitioner: "sequins" (default),
	// "hadoop" or "murmur3".
	Partitioner string
	// ContentType is sent with values. Default application/octet-stream.
	ContentType string
	// CacheControl is sent with values when set. Default none.
	CacheControl string
	// Presharded says each source file holds exactly one partition; every
	// key is verified. Default false.
	Presharded bool
	// Compression overrides Config.Compression for this db when set.
	Compression string
}

// DefaultConfig returns the defaults; Source and DataDir are still to be set.
func DefaultConfig() Config {
	return Config{
		Name:             "localhost",
		MaxParallelLoads: 4,
		MemoryBudget:     256 << 20,
		Compression:      string(blocks.CompressionNone),
	}
}

// Validate checks the config and fills in defaults for zero fields.
func (c *Config) Validate() error {
	d := DefaultConfig()
	if c.Source == "" {
		return fmt.Errorf("%w: source is required", ErrConfig)
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: data_dir is required", ErrConfig)
	}
	if c.Name == "" {
		c.Name = d.Name
	}
	if c.MaxParallelLoads <= 0 {
		c.MaxParallelLoads = d.MaxParallelLoads
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = d.MemoryBudget
	}
	if c.Compression == "" {
		c.Compression = d.Compression
	}
	if c.RefreshPeriod < 0 {
		return fmt.Errorf("%w: refresh_period %v is negative", ErrConfig, c.RefreshPeriod)
	}
	if _, err := blocks.ParseCompression(c.Compression); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	for name, db := range c.DBs {
		if !ValidName(name) {
			return fmt.Errorf("%w: db name %q must match %s", ErrConfig, name, validName)
		}
		if _, err := plugins.Builtin(db.Partitioner); err != nil {
			return fmt.Errorf("%w: dbs.%s: %v", ErrConfig, name, err)
		}
		if db.Compression != "" {
			if _, err := blocks.ParseCompression(db.Compression); err != nil {
				return fmt.Errorf("%w: dbs.%s: %v", ErrConfig, name, err)
			}
		}
	}
	return nil
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
	return db
}
