package spangle_test

import (
	"github.com/spangledb/spangle"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSequinsConfig hands spangle a sequins config with every key set:
// one error lists each key with no meaning here and what replaces it
// (nothing is reported as merely "unknown"); with those lines removed, the
// file loads, and sequins' aliases and mapped keys land on spangle's.
func TestSequinsConfig(t *testing.T) {
	src := filepath.Join("testdata", "config", "sequins.conf")
	cfg := spangle.DefaultConfig()
	err := spangle.LoadConfig(src, &cfg)
	if err == nil {
		t.Fatal("a sequins config with [zk] and throttle_loads loaded")
	}
	msg := err.Error()
	if strings.Contains(msg, "unknown keys") {
		t.Fatalf("sequins keys reported as unknown: %v", err)
	}
	for _, want := range []string{
		"throttle_loads: use max_download_bandwidth", "write_buffer_size:", "goforit_flag_json_path:",
		"storage.block_size:", "zk: NATS replaces ZooKeeper", "datadog:", "debug.expvars:", "test:",
	} {
		if !strings.Contains(msg, "\n  "+want) {
			t.Errorf("error does not list %q:\n%v", want, err)
		}
	}
	for _, mapped := range []string{"max_retries", "cluster_name", "shard_id", "advertised_hostname", "mb_per_second", "request_log"} {
		if strings.Contains(msg, mapped) {
			t.Errorf("mapped key %s reported: %v", mapped, err)
		}
	}

	// The operator removes what the error lists.
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	removed := regexp.MustCompile(`(?m)^(throttle_loads|write_buffer_size|goforit_flag_json_path|block_size|expvars) = .*\n`)
	body := removed.ReplaceAllString(string(b), "")
	for _, table := range []string{"[zk]", "[datadog]", "[test]"} {
		i := strings.Index(body, table)
		j := strings.Index(body[i+1:], "\n[")
		if j < 0 {
			body = body[:i]
		} else {
			body = body[:i] + body[i+1+j+1:]
		}
	}
	p := filepath.Join(t.TempDir(), "sequins.conf")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = spangle.DefaultConfig()
	if err := spangle.LoadConfig(p, &cfg); err != nil {
		t.Fatalf("the edited sequins config: %v\n%s", err, body)
	}
	n := cfg.Node
	if cfg.NATS.ClusterName != "names" || n.ShardID != "sequins1" || cfg.AdvertisedHostname != "sequins1.example.com" {
		t.Errorf("aliases: cluster %q, shard %q, host %q", cfg.NATS.ClusterName, n.ShardID, cfg.AdvertisedHostname)
	}
	if cfg.AccessLog.Path != "" {
		t.Errorf("request_log_enable = false turned the access log on: %q", cfg.AccessLog.Path)
	}
	if n.MaxDownloadBandwidth != 50<<20 || n.DownloadRetries != 3 {
		t.Errorf("mapped: bandwidth %d, retries %d", n.MaxDownloadBandwidth, n.DownloadRetries)
	}
	if n.DataDir != "/var/sequins/" || n.Compression != "snappy" || !cfg.Clustered || cfg.Cluster.ProxyStageTimeout != 50*time.Millisecond {
		t.Errorf("shared keys: data dir %q, compression %q, sharding %v, stage %v",
			n.DataDir, n.Compression, cfg.Clustered, cfg.Cluster.ProxyStageTimeout)
	}
}

// TestSequinsAliasConflict: a key and its sequins alias that disagree are
// an error, one that agrees is not.
func TestSequinsAliasConflict(t *testing.T) {
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{"shard_id = \"a\"\n[sharding]\nshard_id = \"b\"\n", false},
		{"shard_id = \"a\"\n[sharding]\nshard_id = \"a\"\n", true},
		{"[nats]\ncluster_name = \"x\"\n[sharding]\ncluster_name = \"y\"\n", false},
		{"max_download_bandwidth = \"10MiB\"\nmax_download_bandwidth_mb_per_second = 20\n", false},
		{"max_download_bandwidth_mb_per_second = -1\n", false},
		{"download_retries = 2\n[s3]\nmax_retries = 5\n", false},
		{"[sharding]\nno_such_key = 1\n", false},
	} {
		p := filepath.Join(t.TempDir(), "c.toml")
		if err := os.WriteFile(p, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := spangle.DefaultConfig()
		if err := spangle.LoadConfig(p, &cfg); (err == nil) != tt.ok {
			t.Errorf("%q: err %v, want ok=%v", tt.body, err, tt.ok)
		}
	}
}

// TestSequinsRequestLog: sequins' request log keys turn the access log
// on: request_log_file (stdout by default) is [http] access_log, "-" for
// standard output; one that disagrees with access_log is an error.
func TestSequinsRequestLog(t *testing.T) {
	for _, tc := range []struct {
		name, body, want, err string
	}{
		{"a file", "[debug]\nrequest_log_enable = true\nrequest_log_file = \"/var/log/r.log\"\n", "/var/log/r.log", ""},
		{"stdout by default", "[debug]\nrequest_log_enable = true\n", "-", ""},
		{"stdout", "[debug]\nrequest_log_enable = true\nrequest_log_file = \"stdout\"\n", "-", ""},
		{"off", "[debug]\nrequest_log_enable = false\nrequest_log_file = \"/var/log/r.log\"\n", "", ""},
		{"the same as access_log", "[http]\naccess_log = \"/a.log\"\n[debug]\nrequest_log_enable = true\nrequest_log_file = \"/a.log\"\n", "/a.log", ""},
		{"disagreeing", "[http]\naccess_log = \"/a.log\"\n[debug]\nrequest_log_enable = true\nrequest_log_file = \"/b.log\"\n", "", "disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "sequins.conf")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := spangle.DefaultConfig()
			err := spangle.LoadConfig(p, &cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AccessLog.Path != tc.want || cfg.AccessLog.Format != "combined" {
				t.Errorf("access log %q (%s), want %q", cfg.AccessLog.Path, cfg.AccessLog.Format, tc.want)
			}
		})
	}
}
