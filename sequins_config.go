package spangle

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// A sequins config file is read as a spangle one: keys that mean the same
// are spangle's own, the keys below are aliases or are mapped onto
// spangle's, and the keys in sequinsRemoved stop the start with what
// replaces each (docs/MIGRATING.md).

// sequinsFile holds the sequins keys that spangle maps onto its own.
type sequinsFile struct {
	// sequins' bandwidth cap in MiB per second: max_download_bandwidth.
	MaxDownloadMBPerSecond *int64 `toml:"max_download_bandwidth_mb_per_second"`
	S3                     struct {
		MaxRetries *int `toml:"max_retries"` // download_retries
	} `toml:"s3"`
	Sharding struct {
		ClusterName        string `toml:"cluster_name"`        // [nats] cluster_name
		AdvertisedHostname string `toml:"advertised_hostname"` // advertised_hostname
		ShardID            string `toml:"shard_id"`            // shard_id
	} `toml:"sharding"`
	Debug struct {
		// With request_log_enable, request_log_file (default "stdout")
		// is [http] access_log ("-" for stdout).
		RequestLogEnable bool   `toml:"request_log_enable"`
		RequestLogFile   string `toml:"request_log_file"`
	} `toml:"debug"`
}

// sequinsMapped are the keys sequinsFile decodes.
var sequinsMapped = map[string]bool{
	"max_download_bandwidth_mb_per_second": true,
	"s3.max_retries":                       true,
	"sharding.cluster_name":                true,
	"sharding.advertised_hostname":         true,
	"sharding.shard_id":                    true,
	"debug.request_log_enable":             true,
	"debug.request_log_file":               true,
}

// sequinsRemoved are sequins' keys (or tables, with every key under them)
// that have no meaning here, each with what replaces it.
var sequinsRemoved = map[string]string{
	"throttle_loads":         `use max_download_bandwidth = "50MiB" to slow builds down`,
	"write_buffer_size":      "no meaning: partitions are bbolt files written in one pass",
	"goforit_flag_json_path": `no feature flags: refresh_period = "0s" and SIGHUP control refreshes`,
	"storage.block_size":     `no meaning: the default layout (s2-blocks) compresses records in blocks of a fixed 4 KiB; [storage] compression chooses the layout`,
	"zk":                     `NATS replaces ZooKeeper: [nats] url = "nats://..." (empty: the embedded server); session_timeout is [nats] entry_ttl`,
	"datadog":                "metrics are Prometheus, at /metrics (Datadog's OpenMetrics check scrapes it)",
	"debug.expvars":          "metrics are Prometheus, at /metrics",
	"test":                   "sequins' test-only keys",
}

// sequinsKeys sorts the keys the spangle config did not decode: sequins'
// mapped keys are decoded from data into fc; removed ones make an error
// that lists each with its replacement; any other is an unknown key.
func sequinsKeys(data string, undecoded []toml.Key, fc *fileConfig) error {
	var unknown, removed []string
	seen := map[string]bool{}
	mapped := false
	for _, k := range undecoded {
		key := k.String()
		if sequinsMapped[key] {
			mapped = true
			continue
		}
		if top := sequinsRemovedKey(key); top != "" {
			if !seen[top] {
				seen[top] = true
				removed = append(removed, fmt.Sprintf("  %s: %s", top, sequinsRemoved[top]))
			}
			continue
		}
		unknown = append(unknown, key)
	}
	if len(unknown) > 0 {
		return unknownKeysError(data, unknown)
	}
	if len(removed) > 0 {
		sort.Strings(removed)
		return fmt.Errorf("sequins keys with no meaning in spangle (remove them; see docs/MIGRATING.md):\n%s",
			strings.Join(removed, "\n"))
	}
	if !mapped {
		return nil
	}
	var sf sequinsFile
	if _, err := toml.Decode(data, &sf); err != nil {
		return err
	}
	alias := func(dst *string, v, name, old string) error {
		if v == "" {
			return nil
		}
		if *dst != "" && *dst != v {
			return fmt.Errorf("%s and %s (its sequins name) disagree", name, old)
		}
		*dst = v
		return nil
	}
	sh := sf.Sharding
	if err := alias(&fc.NATS.ClusterName, sh.ClusterName, "nats.cluster_name", "sharding.cluster_name"); err != nil {
		return err
	}
	if err := alias(&fc.AdvertisedHostname, sh.AdvertisedHostname, "advertised_hostname", "sharding.advertised_hostname"); err != nil {
		return err
	}
	if err := alias(&fc.ShardID, sh.ShardID, "shard_id", "sharding.shard_id"); err != nil {
		return err
	}
	if mb := sf.MaxDownloadMBPerSecond; mb != nil {
		if *mb < 0 || *mb > 1<<20 {
			return fmt.Errorf("max_download_bandwidth_mb_per_second: %d out of range [0, %d]", *mb, 1<<20)
		}
		bw := ""
		if *mb > 0 {
			bw = strconv.FormatInt(*mb, 10) + "MiB"
		}
		mdb := string(fc.MaxDownloadBandwidth)
		if err := alias(&mdb, bw, "max_download_bandwidth", "max_download_bandwidth_mb_per_second"); err != nil {
			return err
		}
		fc.MaxDownloadBandwidth = size(mdb)
	}
	if d := sf.Debug; d.RequestLogEnable {
		path := d.RequestLogFile
		if path == "" || path == "stdout" {
			path = "-"
		}
		if err := alias(&fc.HTTP.AccessLog, path, "http.access_log", "debug.request_log_file"); err != nil {
			return err
		}
	}
	if r := sf.S3.MaxRetries; r != nil {
		if fc.DownloadRetries != 0 && fc.DownloadRetries != *r {
			return fmt.Errorf("download_retries and s3.max_retries (its sequins name) disagree")
		}
		fc.DownloadRetries = *r
	}
	return nil
}

// sequinsRemovedKey returns the entry of sequinsRemoved that key is or is
// under, or "".
func sequinsRemovedKey(key string) string {
	for k := key; ; {
		if _, ok := sequinsRemoved[k]; ok {
			return k
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return ""
		}
		k = k[:i]
	}
}
