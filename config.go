package spangle

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/cluster"
	"github.com/spangledb/spangle/node/source/s3"
)

// fileConfig is spangle.toml. Key names follow sequins where sequins has
// them; unknown keys are an error.
type fileConfig struct {
	Source           string `toml:"source"`
	Bind             string `toml:"bind"`
	DataDir          string `toml:"data_dir"`
	LocalStore       string `toml:"local_store"` // sequins' name for data_dir
	MaxParallelLoads int    `toml:"max_parallel_loads"`
	// MaxDownloadBandwidth is bytes per second over all builds ("50MiB").
	MaxDownloadBandwidth string   `toml:"max_download_bandwidth"`
	DownloadRetries      int      `toml:"download_retries"` // -1: none
	DownloadBackoff      duration `toml:"download_backoff"`
	RetryFailedAfter     duration `toml:"retry_failed_after"` // negative: only on SIGHUP
	RefreshPeriod        duration `toml:"refresh_period"`
	RequireSuccessFile   bool     `toml:"require_success_file"`
	// AllowExternalSymlinks follows symlinks that leave a local source root.
	AllowExternalSymlinks bool   `toml:"allow_external_symlinks"`
	ContentType           string `toml:"content_type"`
	CacheControl          string `toml:"cache_control"`
	NegativeCacheControl  string `toml:"negative_cache_control"`
	SequinsHeaders        bool   `toml:"sequins_headers"`
	ShardID               string `toml:"shard_id"`
	AdvertisedHostname    string `toml:"advertised_hostname"`

	// NATS replaces sequins' [zk]: the embedded server (no url) or
	// external ones, and the spangle cluster's name.
	NATS struct {
		URL         stringList `toml:"url"` // a string, comma-separated, or a list; empty: embedded
		Listen      string     `toml:"listen"`
		Creds       string     `toml:"creds"`
		NKey        string     `toml:"nkey"`
		TLSCA       string     `toml:"tls_ca"`
		TLSCert     string     `toml:"tls_cert"`
		TLSKey      string     `toml:"tls_key"`
		ClusterName string     `toml:"cluster_name"`
		Replicas    int        `toml:"replicas"` // bucket replicas; 0: 1
		EntryTTL    duration   `toml:"entry_ttl"`
		// Partitions entries are refreshed about every third of this.
		PartitionsTTL duration `toml:"partitions_ttl"` // a dead node's entries expire after it; 0: 10s
		// The embedded server as one member of a NATS cluster of embedded
		// servers (no url): its name, its route listener and every
		// member's route URL.
		ServerName            string     `toml:"server_name"`
		EmbeddedCluster       string     `toml:"embedded_cluster"`
		EmbeddedClusterListen string     `toml:"embedded_cluster_listen"`
		EmbeddedRoutes        stringList `toml:"embedded_routes"`
		// The embedded server's logins (none: anyone on loopback), and
		// its exposure and JetStream limits.
		Users []struct {
			Name     string `toml:"name"`
			Password string `toml:"password"`
			NKey     string `toml:"nkey"`
			Role     string `toml:"role"`
		} `toml:"users"`
		AllowInsecure      bool   `toml:"allow_insecure"`
		JetStreamMaxMemory string `toml:"jetstream_max_memory"`
		JetStreamMaxStore  string `toml:"jetstream_max_store"`
		// A store that failed on a full disk is restarted once this
		// much is free, checked this often.
		StoreMinFree      string   `toml:"store_min_free"`
		StoreRecoverCheck duration `toml:"store_recover_check"`
	} `toml:"nats"`

	// Sharding is sequins' [sharding]: cluster mode (cluster_name is in
	// [nats], shard_id at the top level).
	Sharding struct {
		Enabled              bool     `toml:"enabled"`
		Replication          int      `toml:"replication"`
		MinReplication       int      `toml:"min_replication"`
		MaxReplication       int      `toml:"max_replication"`
		Assignment           string   `toml:"assignment"`
		TimeToConverge       duration `toml:"time_to_converge"`
		ProxyTimeout         duration `toml:"proxy_timeout"`
		ProxyStageTimeout    duration `toml:"proxy_stage_timeout"`
		ProxyBatchKeys       int      `toml:"proxy_batch_keys"`
		ProxyConnsPerPeer    int      `toml:"proxy_conns_per_peer"`
		VersionRemoveTimeout duration `toml:"version_remove_timeout"`
		Heal                 *bool    `toml:"heal"` // default true
		HealAfter            duration `toml:"heal_after"`
		HealMaxParallel      int      `toml:"heal_max_parallel"`
		PeerToken            string   `toml:"peer_token"`
	} `toml:"sharding"`

	// S3 configures s3:// sources (sequins' [s3] names where it has them).
	S3 struct {
		Region          string `toml:"region"`
		AccessKeyID     string `toml:"access_key_id"`
		SecretAccessKey string `toml:"secret_access_key"`
		Endpoint        string `toml:"endpoint"`   // host:port or URL; empty: AWS
		PathStyle       bool   `toml:"path_style"` // true for most self-hosted servers
		Insecure        bool   `toml:"insecure"`   // plain HTTP for an endpoint without a scheme
	} `toml:"s3"`

	// HTTP bounds what one client, or all of them, may cost the node.
	HTTP struct {
		MaxConns           int      `toml:"max_conns"`
		MaxHeaderBytes     string   `toml:"max_header_bytes"`
		MaxBatchKeys       int      `toml:"max_batch_keys"`
		MaxBatchBytes      string   `toml:"max_batch_bytes"`
		MaxBatchReplyBytes string   `toml:"max_batch_reply_bytes"`
		BatchBytesInFlight string   `toml:"batch_bytes_in_flight"`
		BatchWait          duration `toml:"batch_wait"`
		CacheTags          *bool    `toml:"cache_tags"`
		GzipMinBytes       *int     `toml:"gzip_min_bytes"`
	} `toml:"http"`

	Storage struct {
		Compression  string `toml:"compression"`
		MemoryBudget string `toml:"memory_budget"` // e.g. "256MiB"
	} `toml:"storage"`

	Debug struct {
		Bind  string `toml:"bind"`
		Pprof *bool  `toml:"pprof"` // default true
	} `toml:"debug"`

	Runtime struct {
		GCPercent   *int   `toml:"gc_percent"`
		MemoryLimit string `toml:"memory_limit"`
	} `toml:"runtime"`

	Plugins struct {
		CacheDir         string   `toml:"cache_dir"`
		CallTimeout      duration `toml:"call_timeout"`
		MemoryLimitPages uint32   `toml:"memory_limit_pages"`
		PoolSize         int      `toml:"pool_size"`
	} `toml:"plugins"`

	// Purge is the hook run at each version switch for dbs without
	// their own ([dbs.<name>.purge]).
	Purge struct {
		purgeFileConfig
		Timeout  duration `toml:"timeout"`
		Attempts int      `toml:"attempts"`
		Backoff  duration `toml:"backoff"`
	} `toml:"purge"`

	DBs map[string]dbFileConfig `toml:"dbs"`
}

// purgeFileConfig is a purge hook: a request, or a command.
type purgeFileConfig struct {
	URL     string            `toml:"url"`
	Method  string            `toml:"method"`
	Headers map[string]string `toml:"headers"`
	Command []string          `toml:"command"`
}

func (p purgeFileConfig) hook() edge.PurgeHook {
	return edge.PurgeHook{URL: p.URL, Method: p.Method, Headers: p.Headers, Command: p.Command}
}

type dbFileConfig struct {
	Partitioner          string           `toml:"partitioner"`
	Decoder              string           `toml:"decoder"`
	ContentType          string           `toml:"content_type"`
	CacheControl         string           `toml:"cache_control"`
	NegativeCacheControl string           `toml:"negative_cache_control"`
	Purge                *purgeFileConfig `toml:"purge"`
	Activation           string           `toml:"activation"`
	Presharded           bool             `toml:"presharded"`
	Compression          string           `toml:"compression"`
}

// duration reads Go duration strings ("10s", "1m30s").
type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// stringList reads a TOML string (comma-separated) or array of strings.
type stringList []string

func (l *stringList) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*l = SplitList(v)
		return nil
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("want strings, got %T", e)
			}
			*l = append(*l, SplitList(s)...)
		}
		return nil
	}
	return fmt.Errorf("want a string or a list of strings, got %T", v)
}

// SplitList splits a comma-separated list as config values and flags
// write it (URLs), dropping empty elements.
func SplitList(s string) []string {
	var out []string
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Config is everything a spangle node needs: the packages' own
// configurations and the process's. Start from DefaultConfig, which also
// states every default the README's config block shows (tested), then
// LoadConfig.
type Config struct {
	Node node.Config
	// Clustered turns cluster mode on ([sharding] enabled); Cluster is its
	// configuration (its View is set by Start).
	Clustered bool
	Cluster   cluster.Config
	// Bind is the HTTP front door's listen address.
	Bind string
	// DebugBind is the debug listener's address (pprof, the admin API);
	// "" turns it off.
	DebugBind string
	// Pprof serves /debug/pprof/ on the debug listener.
	Pprof bool
	// SequinsHeaders sends sequins' X-Sequins-* headers too.
	SequinsHeaders bool

	// GCPercent and MemoryLimit tune the Go runtime (process-wide) unless
	// GOGC and GOMEMLIMIT are set; zero leaves the runtime's setting. A serving process has a small live heap and
	// allocates a little per request: collecting at 3× the live heap
	// rather than 2× cuts GC work per request (5× would cut 2.5 % more CPU
	// per GET and keep 7 MiB more heap), while the soft memory limit keeps
	// a build's large heap bounded.
	GCPercent   int
	MemoryLimit int64

	// NATS configures kvwatch: an embedded NATS server, or external ones.
	NATS kvwatch.Config
	// S3 configures an s3:// source.
	S3 s3.Config
	// HTTP configures the HTTP front door (its Backend is set by Start).
	HTTP edge.Config
	// Purge configures the hooks run at version switches.
	Purge edge.PurgeConfig
	// AdvertisedHostname replaces the bind address's host in this node's
	// entries (sequins' advertised_hostname).
	AdvertisedHostname string
	// ShutdownTimeout bounds a graceful shutdown (Run).
	ShutdownTimeout time.Duration
	// Version is the binary's release, published in the node entry.
	Version string
	// Logger receives every component's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig is every default of a spangle node: the packages' own,
// and the process's. The README's config block states them (tested).
func DefaultConfig() Config {
	n := node.DefaultConfig()
	n.DataDir = "spangle-data"
	return Config{
		NATS:            kvwatch.DefaultConfig(),
		Node:            n,
		Cluster:         cluster.DefaultConfig(),
		S3:              s3.DefaultConfig(),
		HTTP:            edge.DefaultConfig(),
		Purge:           edge.DefaultPurgeConfig(),
		Bind:            "0.0.0.0:9599",
		Pprof:           true,
		GCPercent:       200,
		MemoryLimit:     448 << 20,
		ShutdownTimeout: 30 * time.Second,
	}
}

// LoadConfig reads the TOML file path (spangle.toml, or a sequins.conf)
// into cfg, over what cfg holds. An unknown key is an error naming it;
// sequins' keys are read as sequinsKeys says.
func LoadConfig(path string, cfg *Config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var fc fileConfig
	md, err := toml.Decode(string(data), &fc)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if err := sequinsKeys(string(data), md.Undecoded(), &fc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	n := &cfg.Node
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&n.Source, fc.Source)
	set(&cfg.Bind, fc.Bind)
	if fc.DataDir != "" && fc.LocalStore != "" && fc.DataDir != fc.LocalStore {
		return fmt.Errorf("config %s: data_dir and local_store (its old name) disagree", path)
	}
	set(&n.DataDir, fc.LocalStore)
	set(&n.DataDir, fc.DataDir)
	if fc.MaxParallelLoads != 0 {
		n.MaxParallelLoads = fc.MaxParallelLoads
	}
	n.RefreshPeriod = fc.RefreshPeriod.Duration
	if fc.MaxDownloadBandwidth != "" {
		b, err := ParseBytes(fc.MaxDownloadBandwidth)
		if err != nil {
			return fmt.Errorf("config %s: max_download_bandwidth: %w", path, err)
		}
		n.MaxDownloadBandwidth = b
	}

	n.RequireSuccessFile = fc.RequireSuccessFile
	n.AllowExternalSymlinks = fc.AllowExternalSymlinks
	cfg.SequinsHeaders = fc.SequinsHeaders
	set(&n.Compression, fc.Storage.Compression)
	if fc.Storage.MemoryBudget != "" {
		b, err := ParseBytes(fc.Storage.MemoryBudget)
		if err != nil {
			return fmt.Errorf("config %s: storage.memory_budget: %w", path, err)
		}
		n.MemoryBudget = b
	}
	if fc.Runtime.GCPercent != nil {
		cfg.GCPercent = *fc.Runtime.GCPercent
	}
	if fc.Runtime.MemoryLimit != "" {
		b, err := ParseBytes(fc.Runtime.MemoryLimit)
		if err != nil {
			return fmt.Errorf("config %s: runtime.memory_limit: %w", path, err)
		}
		cfg.MemoryLimit = b
	}
	set(&cfg.DebugBind, fc.Debug.Bind)
	if fc.Debug.Pprof != nil {
		cfg.Pprof = *fc.Debug.Pprof
	}
	n.Plugins.CacheDir = fc.Plugins.CacheDir
	n.Plugins.CallTimeout = fc.Plugins.CallTimeout.Duration
	n.Plugins.MemoryLimitPages = fc.Plugins.MemoryLimitPages
	n.Plugins.PoolSize = fc.Plugins.PoolSize
	n.DBs = map[string]node.DBConfig{}
	for name, db := range fc.DBs {
		n.DBs[name] = node.DBConfig{
			Partitioner:          db.Partitioner,
			Decoder:              db.Decoder,
			ContentType:          db.ContentType,
			CacheControl:         db.CacheControl,
			NegativeCacheControl: db.NegativeCacheControl,
			Activation:           db.Activation,
			Presharded:           db.Presharded,
			Compression:          db.Compression,
		}
	}
	n.ContentType = fc.ContentType
	set(&n.CacheControl, fc.CacheControl)
	set(&n.NegativeCacheControl, fc.NegativeCacheControl)
	n.ShardID = fc.ShardID
	cfg.AdvertisedHostname = fc.AdvertisedHostname
	sh, c := fc.Sharding, &cfg.Cluster
	cfg.Clustered = sh.Enabled
	setInt := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	setInt(&c.Replication, sh.Replication)
	setInt(&c.MinReplication, sh.MinReplication)
	setInt(&c.MaxReplication, sh.MaxReplication)
	set(&c.Assignment, sh.Assignment)
	setDur := func(dst *time.Duration, v duration) {
		if v.Duration != 0 {
			*dst = v.Duration
		}
	}
	setInt(&n.DownloadRetries, fc.DownloadRetries)
	setDur(&n.DownloadBackoff, fc.DownloadBackoff)
	setDur(&n.RetryFailedAfter, fc.RetryFailedAfter)
	setDur(&c.TimeToConverge, sh.TimeToConverge)
	setDur(&c.ProxyTimeout, sh.ProxyTimeout)
	setDur(&c.ProxyStageTimeout, sh.ProxyStageTimeout)
	setInt(&c.ProxyBatchKeys, sh.ProxyBatchKeys)
	setInt(&c.ProxyConnsPerPeer, sh.ProxyConnsPerPeer)
	setDur(&c.VersionRemoveTimeout, sh.VersionRemoveTimeout)
	setDur(&c.HealAfter, sh.HealAfter)
	setInt(&c.HealMaxParallel, sh.HealMaxParallel)
	c.PeerToken = sh.PeerToken
	cfg.HTTP.PeerToken = sh.PeerToken
	if sh.Heal != nil {
		c.DisableHeal = !*sh.Heal
	}
	k := &cfg.NATS
	k.URLs = fc.NATS.URL
	set(&k.EmbeddedListen, fc.NATS.Listen)
	k.CredsFile = fc.NATS.Creds
	k.NKeySeedFile = fc.NATS.NKey
	k.TLSCAFile = fc.NATS.TLSCA
	k.TLSCertFile = fc.NATS.TLSCert
	k.TLSKeyFile = fc.NATS.TLSKey
	set(&k.ClusterName, fc.NATS.ClusterName)
	setInt(&k.Replicas, fc.NATS.Replicas)
	setDur(&k.EntryTTL, fc.NATS.EntryTTL)
	setDur(&k.PartitionsTTL, fc.NATS.PartitionsTTL)
	set(&k.EmbeddedServerName, fc.NATS.ServerName)
	set(&k.EmbeddedClusterName, fc.NATS.EmbeddedCluster)
	set(&k.EmbeddedClusterListen, fc.NATS.EmbeddedClusterListen)
	if len(fc.NATS.EmbeddedRoutes) > 0 {
		k.EmbeddedRoutes = fc.NATS.EmbeddedRoutes
	}
	for _, u := range fc.NATS.Users {
		k.EmbeddedUsers = append(k.EmbeddedUsers, kvwatch.User{Name: u.Name, Password: u.Password, NKey: u.NKey, Role: u.Role})
	}
	k.EmbeddedAllowInsecure = fc.NATS.AllowInsecure
	setDur(&k.EmbeddedRecoverCheck, fc.NATS.StoreRecoverCheck)
	for _, sz := range []struct {
		key, v string
		dst    *int64
	}{
		{"nats.jetstream_max_memory", fc.NATS.JetStreamMaxMemory, &k.EmbeddedMaxMemory},
		{"nats.jetstream_max_store", fc.NATS.JetStreamMaxStore, &k.EmbeddedMaxStore},
		{"nats.store_min_free", fc.NATS.StoreMinFree, &k.EmbeddedMinFree},
	} {
		if sz.v == "" {
			continue
		}
		b, err := ParseBytes(sz.v)
		if err != nil {
			return fmt.Errorf("config %s: %s: %w", path, sz.key, err)
		}
		*sz.dst = b
	}
	pc := &cfg.Purge
	pc.Hook = fc.Purge.hook()
	setDur(&pc.Timeout, fc.Purge.Timeout)
	setInt(&pc.Attempts, fc.Purge.Attempts)
	setDur(&pc.Backoff, fc.Purge.Backoff)
	for name, db := range fc.DBs {
		if db.Purge != nil {
			if pc.DBs == nil {
				pc.DBs = map[string]edge.PurgeHook{}
			}
			pc.DBs[name] = db.Purge.hook()
		}
	}
	if err := pc.Validate(); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	h := &cfg.HTTP
	if fc.HTTP.CacheTags != nil {
		h.CacheTags = *fc.HTTP.CacheTags
	}
	if fc.HTTP.GzipMinBytes != nil {
		h.GzipMinBytes = *fc.HTTP.GzipMinBytes
	}
	setInt(&h.MaxConns, fc.HTTP.MaxConns)
	setInt(&h.MaxBatchKeys, fc.HTTP.MaxBatchKeys)
	setDur(&h.BatchWait, fc.HTTP.BatchWait)
	for _, sz := range []struct {
		key string
		v   string
		dst *int64
	}{
		{"http.max_header_bytes", fc.HTTP.MaxHeaderBytes, nil},
		{"http.max_batch_bytes", fc.HTTP.MaxBatchBytes, nil},
		{"http.max_batch_reply_bytes", fc.HTTP.MaxBatchReplyBytes, nil},
		{"http.batch_bytes_in_flight", fc.HTTP.BatchBytesInFlight, &h.BatchBytesInFlight},
	} {
		if sz.v == "" {
			continue
		}
		b, err := ParseBytes(sz.v)
		if err != nil || b > 1<<40 {
			return fmt.Errorf("config %s: %s: bad size %q", path, sz.key, sz.v)
		}
		switch {
		case sz.dst != nil:
			*sz.dst = b
		case sz.key == "http.max_header_bytes":
			h.MaxHeaderBytes = int(b)
		case sz.key == "http.max_batch_bytes":
			h.MaxBatchBytes = int(b)
		default:
			h.MaxBatchReplyBytes = int(b)
		}
	}
	s3 := &cfg.S3
	set(&s3.Region, fc.S3.Region)
	set(&s3.AccessKeyID, fc.S3.AccessKeyID)
	set(&s3.SecretAccessKey, fc.S3.SecretAccessKey)
	set(&s3.Endpoint, fc.S3.Endpoint)
	s3.PathStyle = fc.S3.PathStyle
	s3.Insecure = fc.S3.Insecure
	if err := s3.Validate(); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// FindConfig returns the config file to read: the one named, or
// spangle.toml in the working directory if there is one ("" if not).
func FindConfig(named string) (string, error) {
	if named != "" {
		if _, err := os.Stat(named); err != nil {
			return "", fmt.Errorf("config: %w", err)
		}
		return named, nil
	}
	if _, err := os.Stat("spangle.toml"); err == nil {
		return "spangle.toml", nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("config: %w", err)
	}
	return "", nil
}

// ParseBytes reads sizes as the config file writes them: "512MiB",
// "1GiB", "1048576".
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.m
			break
		}
	}
	var v int64
	if _, err := fmt.Sscan(s, &v); err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}
