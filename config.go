package spangle

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/cluster"
	"github.com/spangledb/spangle/node/source/s3"
)

// fileConfig is spangle.toml: the top-level keys, then one type per
// section, each with the function that applies it to a Config. Key names
// follow sequins where sequins has them; unknown keys are an error.
type fileConfig struct {
	Source           string `toml:"source"`
	Bind             string `toml:"bind"`
	DataDir          string `toml:"data_dir"`
	LocalStore       string `toml:"local_store"` // sequins' name for data_dir
	MaxParallelLoads int    `toml:"max_parallel_loads"`
	// MaxDownloadBandwidth is bytes per second over all builds ("50MiB").
	MaxDownloadBandwidth size     `toml:"max_download_bandwidth"`
	DownloadRetries      int      `toml:"download_retries"` // -1: none
	DownloadBackoff      duration `toml:"download_backoff"`
	RetryFailedAfter     duration `toml:"retry_failed_after"` // negative: only on SIGHUP
	RefreshPeriod        duration `toml:"refresh_period"`
	RemoveMissingAfter   duration `toml:"remove_missing_after"` // negative: only by an operator
	RequireSuccessFile   bool     `toml:"require_success_file"`
	// AllowExternalSymlinks follows symlinks that leave a local source root.
	AllowExternalSymlinks bool   `toml:"allow_external_symlinks"`
	ContentType           string `toml:"content_type"`
	CacheControl          string `toml:"cache_control"`
	NegativeCacheControl  string `toml:"negative_cache_control"`
	SequinsHeaders        bool   `toml:"sequins_headers"`
	ShardID               string `toml:"shard_id"`
	AdvertisedHostname    string `toml:"advertised_hostname"`

	NATS     natsFile                `toml:"nats"`
	Region   regionFile              `toml:"region"`
	Sharding shardingFile            `toml:"sharding"`
	Cluster  clusterFile             `toml:"cluster"`
	S3       s3File                  `toml:"s3"`
	HTTP     httpFile                `toml:"http"`
	Storage  storageFile             `toml:"storage"`
	Debug    debugFile               `toml:"debug"`
	Runtime  runtimeFile             `toml:"runtime"`
	Plugins  pluginsFile             `toml:"plugins"`
	Purge    purgeFile               `toml:"purge"`
	DBs      map[string]dbFileConfig `toml:"dbs"`
}

// natsFile is [nats], which replaces sequins' [zk]: the embedded server
// (no url) or external ones, and the spangle cluster's name.
type natsFile struct {
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
		Name     string   `toml:"name"`
		Password string   `toml:"password"`
		NKey     string   `toml:"nkey"`
		Role     string   `toml:"role"`
		Buckets  []string `toml:"buckets"`
	} `toml:"users"`
	AllowInsecure      bool `toml:"allow_insecure"`
	JetStreamMaxMemory size `toml:"jetstream_max_memory"`
	JetStreamMaxStore  size `toml:"jetstream_max_store"`
	// A store that failed on a full disk is restarted once this
	// much is free, checked this often.
	StoreMinFree      size     `toml:"store_min_free"`
	StoreRecoverCheck duration `toml:"store_recover_check"`
	// The reply subjects the NATS front door answers, and the bound on
	// each KV stream's consumers (issue 32).
	ReplyPrefixes []string `toml:"reply_prefixes"`
	MaxConsumers  int      `toml:"max_consumers"`
	// The NATS door's access log: a path or "-"; combined | json.
	AccessLog       string `toml:"access_log"`
	AccessLogFormat string `toml:"access_log_format"`
	// For url: the node's second login, in the clients' account
	// (responder), answering their lookups there.
	LookupCreds string `toml:"lookup_creds"`
	LookupNKey  string `toml:"lookup_nkey"`
}

// regionFile is [region]: the node's region of a hub (kvwatch/region).
type regionFile struct {
	Name             string   `toml:"name"`
	Hub              string   `toml:"hub"`
	HubDomain        string   `toml:"hub_domain"`
	HubCreds         string   `toml:"hub_creds"`
	HubTLSCA         string   `toml:"hub_tls_ca"`
	HubCheckTimeout  duration `toml:"hub_check_timeout"`
	HubCheckInterval duration `toml:"hub_check_interval"`
	HubConsumers     bool     `toml:"hub_consumers"`
}

// shardingFile is sequins' [sharding]: cluster mode (cluster_name is in
// [nats], shard_id at the top level).
type shardingFile struct {
	Enabled              bool     `toml:"enabled"`
	Replication          int      `toml:"replication"`
	MinReplication       int      `toml:"min_replication"`
	MaxReplication       int      `toml:"max_replication"`
	Assignment           string   `toml:"assignment"`
	TimeToConverge       duration `toml:"time_to_converge"`
	ProxyTimeout         duration `toml:"proxy_timeout"`
	ProxyStageTimeout    duration `toml:"proxy_stage_timeout"`
	ProxyListTimeout     duration `toml:"proxy_list_timeout"`
	ProxyBatchKeys       int      `toml:"proxy_batch_keys"`
	ProxyConnsPerPeer    int      `toml:"proxy_conns_per_peer"`
	VersionRemoveTimeout duration `toml:"version_remove_timeout"`
	Heal                 *bool    `toml:"heal"` // default true
	HealAfter            duration `toml:"heal_after"`
	HealMaxParallel      int      `toml:"heal_max_parallel"`
	PeerToken            string   `toml:"peer_token"`
}

// s3File is [s3]: s3:// sources (sequins' [s3] names where it has them).
type s3File struct {
	Region          string `toml:"region"`
	AccessKeyID     string `toml:"access_key_id"`
	SecretAccessKey string `toml:"secret_access_key"`
	Endpoint        string `toml:"endpoint"`   // host:port or URL; empty: AWS
	PathStyle       bool   `toml:"path_style"` // true for most self-hosted servers
	Insecure        bool   `toml:"insecure"`   // plain HTTP for an endpoint without a scheme
}

// httpFile is [http]: what one client, or all of them, may cost the node.
type httpFile struct {
	MaxConns           int      `toml:"max_conns"`
	MaxHeaderBytes     size     `toml:"max_header_bytes"`
	MaxBatchKeys       *int     `toml:"max_batch_keys"`
	MaxBatchBytes      size     `toml:"max_batch_bytes"`
	MaxBatchReplyBytes size     `toml:"max_batch_reply_bytes"`
	MaxListKeys        *int     `toml:"max_list_keys"`
	BatchBytesInFlight size     `toml:"batch_bytes_in_flight"`
	BatchWait          duration `toml:"batch_wait"`
	H2MaxResets        int      `toml:"h2_max_resets"`
	H2ResetWindow      duration `toml:"h2_reset_window"`
	CacheTags          *bool    `toml:"cache_tags"`
	GzipMinBytes       *int     `toml:"gzip_min_bytes"`
	// HTTPS: PEM files; tls_cert and tls_key turn it on.
	TLSCert        string   `toml:"tls_cert"`
	TLSKey         string   `toml:"tls_key"`
	TLSClientCA    string   `toml:"tls_client_ca"`
	TLSPeerCA      string   `toml:"tls_peer_ca"`
	TLSReloadCheck duration `toml:"tls_reload_check"`
	// The access log: a path or "-" (standard output); combined | json;
	// the proxies whose X-Forwarded-For names the client (CIDRs or
	// addresses).
	AccessLog       string   `toml:"access_log"`
	AccessLogFormat string   `toml:"access_log_format"`
	TrustedProxies  []string `toml:"trusted_proxies"`
}

// storageFile is [storage].
type storageFile struct {
	Compression  string `toml:"compression"`
	MemoryBudget size   `toml:"memory_budget"` // e.g. "256MiB"
	HotCache     size   `toml:"hot_cache"`     // answers of hot keys, e.g. "16MiB"; "0": none
	// Listings' positions kept between pages (node list_positions.go).
	ListPositions size `toml:"list_positions"`
}

// debugFile is [debug]: the debug listener.
type debugFile struct {
	Bind       string `toml:"bind"`
	Pprof      *bool  `toml:"pprof"` // default true
	AdminToken string `toml:"admin_token"`
}

// runtimeFile is [runtime]: the Go runtime's tuning.
type runtimeFile struct {
	GCPercent   *int `toml:"gc_percent"`
	MemoryLimit size `toml:"memory_limit"`
}

// pluginsFile is [plugins]: the Wasm runtime.
type pluginsFile struct {
	CacheDir         string   `toml:"cache_dir"`
	CallTimeout      duration `toml:"call_timeout"`
	MemoryLimitPages uint32   `toml:"memory_limit_pages"`
	PoolSize         int      `toml:"pool_size"`
}

// purgeFile is [purge]: the hook run at each version switch for dbs
// without their own ([dbs.<name>.purge]).
type purgeFile struct {
	purgeFileConfig
	Timeout   duration `toml:"timeout"`
	Attempts  int      `toml:"attempts"`
	Backoff   duration `toml:"backoff"`
	BatchKeys int      `toml:"batch_keys"`
}

// purgeFileConfig is a purge hook: a request, or a command.
type purgeFileConfig struct {
	URL     string            `toml:"url"`
	Method  string            `toml:"method"`
	Headers map[string]string `toml:"headers"`
	Command []string          `toml:"command"`
	MaxKeys int               `toml:"max_keys"`
}

func (p purgeFileConfig) hook() edge.PurgeHook {
	return edge.PurgeHook{URL: p.URL, Method: p.Method, Headers: p.Headers, Command: p.Command, MaxKeys: p.MaxKeys}
}

type dbFileConfig struct {
	Partitioner          string            `toml:"partitioner"`
	Decoder              string            `toml:"decoder"`
	ContentType          string            `toml:"content_type"`
	CacheControl         string            `toml:"cache_control"`
	NegativeCacheControl string            `toml:"negative_cache_control"`
	Purge                *purgeFileConfig  `toml:"purge"`
	Activation           string            `toml:"activation"`
	Presharded           bool              `toml:"presharded"`
	Format               string            `toml:"format"`
	KeyField             string            `toml:"key_field"`
	ValueField           string            `toml:"value_field"`
	Compression          string            `toml:"compression"`
	MinRecords           int64             `toml:"min_records"`
	MaxChange            float64           `toml:"max_change"`
	CanaryKeys           []string          `toml:"canary_keys"`
	CanaryValues         map[string]string `toml:"canary_values"`
}

// duration reads Go duration strings ("10s", "1m30s").
type duration struct{ time.Duration }

func (d *duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("a duration is a string with a unit: write \"%vs\", \"%vms\" or \"0\", not %v", v, v, v)
	}
	p, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = p
	return nil
}

// size is a size in bytes as ParseBytes reads it ("64MiB", "1048576");
// "" leaves the default.
type size string

// UnmarshalTOML reads a string; a number (hot_cache = 0) is refused with
// the string to write instead.
func (s *size) UnmarshalTOML(v any) error {
	str, ok := v.(string)
	if !ok {
		return fmt.Errorf("a size is a string: write \"%v\" (bytes) or with a unit, \"16MiB\", not %v", v, v)
	}
	*s = size(str)
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
// states every default docs/CONFIGURATION.md's config block shows (tested), then
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
	// AdminToken, when set, is required of the debug listener's admin API
	// (pins) as "Authorization: Bearer <token>". Without it the admin API
	// answers only on a loopback debug listener (403 elsewhere). Default
	// "".
	AdminToken string
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
	// NATSReplyPrefixes are the reply subjects the NATS front door
	// answers ([nats] reply_prefixes; edge.NATSConfig.ReplyPrefixes).
	NATSReplyPrefixes []string
	// S3 configures an s3:// source.
	S3 s3.Config
	// HTTP configures the HTTP front door (its Backend is set by Start).
	HTTP edge.Config
	// TLS turns HTTPS on for the HTTP door, the debug listener and the
	// requests to peers when its CertFile or KeyFile is set ([http]
	// tls_*); its Logger and Registerer are set by Start.
	TLS edge.TLSConfig
	// Purge configures the hooks run at version switches.
	Purge edge.PurgeConfig
	// AccessLog is the HTTP door's access log, and the admin API's
	// ([http] access_log, access_log_format, trusted_proxies); off
	// without a Path. Its Logger and Registerer are set by Start.
	AccessLog edge.AccessLogConfig
	// NATSAccessLog is the NATS door's access log ([nats] access_log,
	// access_log_format); off without a Path.
	NATSAccessLog edge.AccessLogConfig
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

// DefaultPort is the HTTP front door's port in DefaultConfig's Bind, and
// the port of the node the CLI asks when told none (LocalURL).
const DefaultPort = "9599"

// LocalURL is the base URL of a node on this host at DefaultPort: the node
// spangle get, status and ready ask by default.
const LocalURL = "http://127.0.0.1:" + DefaultPort

// DefaultConfig is every default of a spangle node: the packages' own,
// and the process's. docs/CONFIGURATION.md's config block states them (tested).
func DefaultConfig() Config {
	n := node.DefaultConfig()
	n.DataDir = "spangle-data"
	return Config{
		NATS:              kvwatch.DefaultConfig(),
		NATSReplyPrefixes: edge.DefaultNATSConfig().ReplyPrefixes,
		Node:              n,
		Cluster:           cluster.DefaultConfig(),
		S3:                s3.DefaultConfig(),
		HTTP:              edge.DefaultConfig(),
		TLS:               edge.DefaultTLSConfig(),
		Purge:             edge.DefaultPurgeConfig(),
		AccessLog:         edge.DefaultAccessLogConfig(),
		NATSAccessLog:     edge.DefaultAccessLogConfig(),
		Bind:              "0.0.0.0:" + DefaultPort,
		Pprof:             true,
		GCPercent:         200,
		MemoryLimit:       448 << 20,
		ShutdownTimeout:   30 * time.Second,
	}
}

// LoadConfig reads the TOML file path (spangle.toml, or a sequins.conf)
// into cfg, over what cfg holds. An unknown key is an error naming it;
// sequins' keys are read as sequinsKeys says. Each section is applied by
// its own function; every section's error is reported.
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
	fc.Debug.apply(cfg)
	fc.Plugins.apply(&cfg.Node)
	applyDBs(fc.DBs, &cfg.Node)
	fc.Sharding.apply(cfg)
	err = errors.Join(
		fc.apply(cfg),
		fc.Storage.apply(cfg),
		fc.Cluster.apply(cfg),
		fc.Runtime.apply(cfg),
		fc.NATS.apply(&cfg.NATS),
		fc.NATS.applyDoor(cfg),
		fc.Region.apply(&cfg.NATS),
		fc.Purge.apply(fc.DBs, &cfg.Purge),
		fc.HTTP.apply(&cfg.HTTP),
		fc.HTTP.applyTLS(&cfg.TLS),
		fc.HTTP.applyAccessLog(&cfg.AccessLog),
		fc.NATS.applyAccessLog(&cfg.NATSAccessLog),
		fc.S3.apply(&cfg.S3),
	)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// setNonZero sets *dst to v unless v is the zero value (the key is
// absent or says the default).
func setNonZero[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// setDuration sets *dst to v unless v is zero.
func setDuration(dst *time.Duration, v duration) { setNonZero(dst, v.Duration) }

// sizeKey is a size key of the file: its name (for errors), its value,
// and where it goes.
type sizeKey struct {
	key string
	v   size
	dst *int64
}

// parseSizes parses each set size key into its dst.
func parseSizes(keys ...sizeKey) error {
	for _, sz := range keys {
		if sz.v == "" {
			continue
		}
		b, err := ParseBytes(string(sz.v))
		if err != nil {
			return fmt.Errorf("%s: %w", sz.key, err)
		}
		*sz.dst = b
	}
	return nil
}

// apply applies the top-level keys.
func (fc *fileConfig) apply(cfg *Config) error {
	n := &cfg.Node
	setNonZero(&n.Source, fc.Source)
	setNonZero(&cfg.Bind, fc.Bind)
	if fc.DataDir != "" && fc.LocalStore != "" && fc.DataDir != fc.LocalStore {
		return errors.New("data_dir and local_store (its old name) disagree")
	}
	setNonZero(&n.DataDir, fc.LocalStore)
	setNonZero(&n.DataDir, fc.DataDir)
	setNonZero(&n.MaxParallelLoads, fc.MaxParallelLoads)
	n.RefreshPeriod = fc.RefreshPeriod.Duration
	if err := parseSizes(sizeKey{"max_download_bandwidth", fc.MaxDownloadBandwidth, &n.MaxDownloadBandwidth}); err != nil {
		return err
	}
	n.RequireSuccessFile = fc.RequireSuccessFile
	n.AllowExternalSymlinks = fc.AllowExternalSymlinks
	cfg.SequinsHeaders = fc.SequinsHeaders
	n.ContentType = fc.ContentType
	setNonZero(&n.CacheControl, fc.CacheControl)
	setNonZero(&n.NegativeCacheControl, fc.NegativeCacheControl)
	n.ShardID = fc.ShardID
	cfg.AdvertisedHostname = fc.AdvertisedHostname
	setNonZero(&n.DownloadRetries, fc.DownloadRetries)
	setDuration(&n.DownloadBackoff, fc.DownloadBackoff)
	setDuration(&n.RetryFailedAfter, fc.RetryFailedAfter)
	setDuration(&n.RemoveMissingAfter, fc.RemoveMissingAfter)
	return nil
}

func (f storageFile) apply(cfg *Config) error {
	setNonZero(&cfg.Node.Compression, f.Compression)
	return parseSizes(sizeKey{"storage.memory_budget", f.MemoryBudget, &cfg.Node.MemoryBudget},
		sizeKey{"storage.hot_cache", f.HotCache, &cfg.Node.HotCacheBytes},
		sizeKey{"storage.list_positions", f.ListPositions, &cfg.Node.ListPositionBytes})
}

func (f runtimeFile) apply(cfg *Config) error {
	if f.GCPercent != nil {
		cfg.GCPercent = *f.GCPercent
	}
	return parseSizes(sizeKey{"runtime.memory_limit", f.MemoryLimit, &cfg.MemoryLimit})
}

func (f debugFile) apply(cfg *Config) {
	setNonZero(&cfg.DebugBind, f.Bind)
	cfg.AdminToken = f.AdminToken
	if f.Pprof != nil {
		cfg.Pprof = *f.Pprof
	}
}

func (f pluginsFile) apply(n *node.Config) {
	setNonZero(&n.Plugins.CacheDir, f.CacheDir)
	setDuration(&n.Plugins.CallTimeout, f.CallTimeout)
	setNonZero(&n.Plugins.MemoryLimitPages, f.MemoryLimitPages)
	setNonZero(&n.Plugins.PoolSize, f.PoolSize)
}

// applyDBs applies [dbs.<name>] (their purge hooks are [purge]'s).
func applyDBs(dbs map[string]dbFileConfig, n *node.Config) {
	n.DBs = map[string]node.DBConfig{}
	for name, db := range dbs {
		n.DBs[name] = node.DBConfig{
			Partitioner:          db.Partitioner,
			Decoder:              db.Decoder,
			ContentType:          db.ContentType,
			CacheControl:         db.CacheControl,
			NegativeCacheControl: db.NegativeCacheControl,
			Activation:           db.Activation,
			Presharded:           db.Presharded,
			Format:               db.Format,
			KeyField:             db.KeyField,
			ValueField:           db.ValueField,
			Compression:          db.Compression,
			MinRecords:           db.MinRecords,
			MaxChange:            db.MaxChange,
			CanaryKeys:           db.CanaryKeys,
			CanaryValues:         db.CanaryValues,
		}
	}
}

func (f shardingFile) apply(cfg *Config) {
	c := &cfg.Cluster
	cfg.Clustered = f.Enabled
	setNonZero(&c.Replication, f.Replication)
	setNonZero(&c.MinReplication, f.MinReplication)
	setNonZero(&c.MaxReplication, f.MaxReplication)
	setNonZero(&c.Assignment, f.Assignment)
	setDuration(&c.TimeToConverge, f.TimeToConverge)
	setDuration(&c.ProxyTimeout, f.ProxyTimeout)
	setDuration(&c.ProxyStageTimeout, f.ProxyStageTimeout)
	setDuration(&c.ProxyListTimeout, f.ProxyListTimeout)
	setNonZero(&c.ProxyBatchKeys, f.ProxyBatchKeys)
	setNonZero(&c.ProxyConnsPerPeer, f.ProxyConnsPerPeer)
	setDuration(&c.VersionRemoveTimeout, f.VersionRemoveTimeout)
	setDuration(&c.HealAfter, f.HealAfter)
	setNonZero(&c.HealMaxParallel, f.HealMaxParallel)
	c.PeerToken = f.PeerToken
	cfg.HTTP.PeerToken = f.PeerToken
	cfg.Node.CursorKey = f.PeerToken // listing cursors: only the cluster's are good
	if f.Heal != nil {
		c.DisableHeal = !*f.Heal
	}
}

func (f natsFile) apply(k *kvwatch.Config) error {
	k.URLs = f.URL
	setNonZero(&k.EmbeddedListen, f.Listen)
	k.CredsFile = f.Creds
	k.NKeySeedFile = f.NKey
	k.LookupCredsFile = f.LookupCreds
	k.LookupNKeySeedFile = f.LookupNKey
	k.TLSCAFile = f.TLSCA
	k.TLSCertFile = f.TLSCert
	k.TLSKeyFile = f.TLSKey
	setNonZero(&k.ClusterName, f.ClusterName)
	setNonZero(&k.Replicas, f.Replicas)
	setNonZero(&k.MaxConsumers, f.MaxConsumers)
	setDuration(&k.EntryTTL, f.EntryTTL)
	setDuration(&k.PartitionsTTL, f.PartitionsTTL)
	setNonZero(&k.EmbeddedServerName, f.ServerName)
	setNonZero(&k.EmbeddedClusterName, f.EmbeddedCluster)
	setNonZero(&k.EmbeddedClusterListen, f.EmbeddedClusterListen)
	if len(f.EmbeddedRoutes) > 0 {
		k.EmbeddedRoutes = f.EmbeddedRoutes
	}
	for _, u := range f.Users {
		k.EmbeddedUsers = append(k.EmbeddedUsers, kvwatch.User{Name: u.Name, Password: u.Password, NKey: u.NKey, Role: u.Role, Buckets: u.Buckets})
	}
	k.EmbeddedAllowInsecure = f.AllowInsecure
	setDuration(&k.EmbeddedRecoverCheck, f.StoreRecoverCheck)
	return parseSizes(
		sizeKey{"nats.jetstream_max_memory", f.JetStreamMaxMemory, &k.EmbeddedMaxMemory},
		sizeKey{"nats.jetstream_max_store", f.JetStreamMaxStore, &k.EmbeddedMaxStore},
		sizeKey{"nats.store_min_free", f.StoreMinFree, &k.EmbeddedMinFree},
	)
}

// applyDoor applies the NATS front door's keys of [nats].
func (f natsFile) applyDoor(c *Config) error {
	if f.ReplyPrefixes == nil {
		return nil
	}
	if err := edge.CheckReplyPrefixes(f.ReplyPrefixes); err != nil {
		return fmt.Errorf("nats.reply_prefixes: %w", err)
	}
	c.NATSReplyPrefixes = f.ReplyPrefixes
	return nil
}

// apply applies [region] to n.Region. Its keys are checked by kvwatch
// (Start), which knows whether the server is embedded once the flags are
// applied too. It takes kvwatch's Config, not the region's, so that the
// root package needs nothing of kvwatch/region: kvwatch owns the wiring
// of a region.
func (f regionFile) apply(n *kvwatch.Config) error {
	r := &n.Region
	setNonZero(&r.Name, f.Name)
	setNonZero(&r.Hub, f.Hub)
	setNonZero(&r.HubDomain, f.HubDomain)
	setNonZero(&r.HubCreds, f.HubCreds)
	setNonZero(&r.HubTLSCA, f.HubTLSCA)
	setDuration(&r.HubCheckTimeout, f.HubCheckTimeout)
	setDuration(&r.HubCheckInterval, f.HubCheckInterval)
	setNonZero(&r.HubConsumers, f.HubConsumers)
	return nil
}

// apply applies [purge] and the dbs' own hooks ([dbs.<name>.purge]).
func (f purgeFile) apply(dbs map[string]dbFileConfig, pc *edge.PurgeConfig) error {
	pc.Hook = f.hook()
	setDuration(&pc.Timeout, f.Timeout)
	setNonZero(&pc.Attempts, f.Attempts)
	setDuration(&pc.Backoff, f.Backoff)
	setNonZero(&pc.BatchKeys, f.BatchKeys)
	for name, db := range dbs {
		if db.Purge != nil {
			if pc.DBs == nil {
				pc.DBs = map[string]edge.PurgeHook{}
			}
			pc.DBs[name] = db.Purge.hook()
		}
	}
	return pc.Validate()
}

func (f httpFile) apply(h *edge.Config) error {
	if f.CacheTags != nil {
		h.CacheTags = *f.CacheTags
	}
	if f.GzipMinBytes != nil {
		h.GzipMinBytes = *f.GzipMinBytes
	}
	setNonZero(&h.MaxConns, f.MaxConns)
	// Counts as written, 0 too: Validate refuses it naming the key.
	for dst, v := range map[*int]*int{&h.MaxBatchKeys: f.MaxBatchKeys, &h.MaxListKeys: f.MaxListKeys} {
		if v != nil {
			*dst = *v
		}
	}
	setDuration(&h.BatchWait, f.BatchWait)
	setNonZero(&h.H2MaxResets, f.H2MaxResets)
	setDuration(&h.H2ResetWindow, f.H2ResetWindow)
	for _, sz := range []struct {
		key string
		v   size
		dst *int
	}{
		{"http.max_header_bytes", f.MaxHeaderBytes, &h.MaxHeaderBytes},
		{"http.max_batch_bytes", f.MaxBatchBytes, &h.MaxBatchBytes},
		{"http.max_batch_reply_bytes", f.MaxBatchReplyBytes, &h.MaxBatchReplyBytes},
	} {
		b := int64(*sz.dst)
		if err := parseHTTPSize(sz.key, sz.v, &b); err != nil {
			return err
		}
		*sz.dst = int(b)
	}
	return parseHTTPSize("http.batch_bytes_in_flight", f.BatchBytesInFlight, &h.BatchBytesInFlight)
}

// applyTLS applies [http]'s tls_* keys.
func (f httpFile) applyTLS(t *edge.TLSConfig) error {
	setNonZero(&t.CertFile, f.TLSCert)
	setNonZero(&t.KeyFile, f.TLSKey)
	setNonZero(&t.ClientCAFile, f.TLSClientCA)
	setNonZero(&t.PeerCAFile, f.TLSPeerCA)
	setDuration(&t.ReloadCheck, f.TLSReloadCheck)
	return nil
}

// applyAccessLog applies [http]'s access_log keys.
func (f httpFile) applyAccessLog(a *edge.AccessLogConfig) error {
	setNonZero(&a.Path, f.AccessLog)
	setNonZero(&a.Format, f.AccessLogFormat)
	for _, p := range f.TrustedProxies {
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			addr, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return fmt.Errorf("http.trusted_proxies: %q is neither a CIDR nor an address", p)
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		a.TrustedProxies = append(a.TrustedProxies, prefix.Masked())
	}
	return checkAccessLog("http", *a)
}

// applyAccessLog applies [nats]'s access_log keys.
func (f natsFile) applyAccessLog(a *edge.AccessLogConfig) error {
	setNonZero(&a.Path, f.AccessLog)
	setNonZero(&a.Format, f.AccessLogFormat)
	return checkAccessLog("nats", *a)
}

// checkAccessLog reports a bad access_log_format of table at load time
// (the rest is checked when the log opens).
func checkAccessLog(table string, a edge.AccessLogConfig) error {
	if a.Format != edge.AccessLogCombined && a.Format != edge.AccessLogJSON {
		return fmt.Errorf("%s.access_log_format: %q is neither %q nor %q", table, a.Format, edge.AccessLogCombined, edge.AccessLogJSON)
	}
	return nil
}

// parseHTTPSize parses an [http] size, at most 1 TiB, into *dst.
func parseHTTPSize(key string, v size, dst *int64) error {
	if v == "" {
		return nil
	}
	b, err := ParseBytes(string(v))
	if err != nil || b > 1<<40 {
		return fmt.Errorf("%s: bad size %q", key, v)
	}
	*dst = b
	return nil
}

func (f s3File) apply(s3 *s3.Config) error {
	setNonZero(&s3.Region, f.Region)
	setNonZero(&s3.AccessKeyID, f.AccessKeyID)
	setNonZero(&s3.SecretAccessKey, f.SecretAccessKey)
	setNonZero(&s3.Endpoint, f.Endpoint)
	s3.PathStyle = f.PathStyle
	s3.Insecure = f.Insecure
	return s3.Validate()
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
// "1GiB", "1048576". A size that does not fit an int64 is an error.
func ParseBytes(s string) (int64, error) {
	in := s
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.m
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("bad size %q: a whole number of bytes, KiB, MiB, GiB, TiB, KB, MB, GB or TB", in)
	}
	return v * mult, nil
}
