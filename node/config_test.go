package node

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConfigBounds: every out-of-range value is an error naming its key,
// Validate changes nothing, and a zero count or duration is an error
// rather than a silent default (defaults come from DefaultConfig only).
func TestConfigBounds(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Source, c.DataDir = "/src", "/data"
		return c
	}
	c := base()
	before := fmt.Sprintf("%+v", c)
	for range 2 {
		if err := c.Validate(); err != nil {
			t.Fatalf("defaults: %v", err)
		}
	}
	if after := fmt.Sprintf("%+v", c); after != before {
		t.Fatalf("Validate changed the config:\n%s\n%s", before, after)
	}
	for _, tc := range []struct {
		key string
		mod func(*Config)
	}{
		{"source", func(c *Config) { c.Source = "" }},
		{"data_dir", func(c *Config) { c.DataDir = "" }},
		{"max_parallel_loads", func(c *Config) { c.MaxParallelLoads = 0 }},
		{"max_parallel_loads", func(c *Config) { c.MaxParallelLoads = -3 }},
		{"memory_budget", func(c *Config) { c.MemoryBudget = 0 }},
		{"memory_budget", func(c *Config) { c.MemoryBudget = 1000 }},
		{"max_download_bandwidth", func(c *Config) { c.MaxDownloadBandwidth = -1 }},
		{"retry_failed_after", func(c *Config) { c.RetryFailedAfter = 0 }},
		{"download_backoff", func(c *Config) { c.DownloadBackoff = 0 }},
		{"download backoff maximum", func(c *Config) { c.DownloadBackoffMax = c.DownloadBackoff / 2 }},
		{"advertise retry", func(c *Config) { c.AdvertiseRetry = 0 }},
		{"refresh_period", func(c *Config) { c.RefreshPeriod = -time.Second }},
		{"node ID", func(c *Config) { c.NodeID = "a b" }},
		{"shard ID", func(c *Config) { c.ShardID = "a/b" }},
		{"compression", func(c *Config) { c.Compression = "lz4" }},
		{"replication", func(c *Config) { c.Cluster.Replication = 0 }},
		{"min_replication", func(c *Config) { c.Cluster.MinReplication = 0 }},
		{"time_to_converge", func(c *Config) { c.Cluster.TimeToConverge = 0 }},
		{"proxy_timeout", func(c *Config) { c.Cluster.ProxyTimeout = -time.Millisecond }},
		{"proxy_stage_timeout", func(c *Config) { c.Cluster.ProxyStageTimeout = -time.Millisecond }},
		{"proxy_batch_keys", func(c *Config) { c.Cluster.ProxyBatchKeys = -1 }},
		{"proxy_conns_per_peer", func(c *Config) { c.Cluster.ProxyConnsPerPeer = -1 }},
		{"version_remove_timeout", func(c *Config) { c.Cluster.VersionRemoveTimeout = 0 }},
		{"db name", func(c *Config) { c.DBs = map[string]DBConfig{"bad name": {}} }},
		{"dbs.d", func(c *Config) { c.DBs = map[string]DBConfig{"d": {Decoder: "nope"}} }},
	} {
		c := base()
		tc.mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: Validate = %v, want ErrConfig naming it", tc.key, err)
		}
	}
}

// TestConfigDocDefaults: every "Default X" in the doc comments of Config,
// ClusterConfig and DBConfig states what DefaultConfig sets.
func TestConfigDocDefaults(t *testing.T) {
	fset := token.NewFileSet()
	defaults := map[string]reflect.Value{
		"Config":        reflect.ValueOf(DefaultConfig()),
		"ClusterConfig": reflect.ValueOf(DefaultClusterConfig()),
		"DBConfig":      reflect.ValueOf(DBConfig{}),
	}
	docRE := regexp.MustCompile(`Defaults? ("[^"]*"|.+?)(?:[.:;]\s|[.:;]?$| \(|,)`)
	checked := 0
	for _, file := range []string{"config.go", "cluster_config.go"} {
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			def, ok := defaults[ts.Name.Name]
			st, isStruct := ts.Type.(*ast.StructType)
			if !ok || !isStruct {
				return false
			}
			for i, field := range st.Fields.List {
				if field.Doc == nil || len(field.Names) == 0 {
					continue
				}
				doc := strings.Join(strings.Fields(field.Doc.Text()), " ")
				m := docRE.FindStringSubmatch(doc)
				if m == nil {
					continue
				}
				stated := strings.TrimSpace(m[1])
				names := []string{field.Names[0].Name}
				values := []string{stated}
				// "Defaults 1s and 30s." covers this field and the next.
				if a, b, ok := strings.Cut(stated, " and "); ok && strings.HasPrefix(m[0], "Defaults") && i+1 < len(st.Fields.List) {
					names = append(names, st.Fields.List[i+1].Names[0].Name)
					values = []string{a, b}
				}
				for j, name := range names {
					got := def.FieldByName(name)
					if !got.IsValid() {
						t.Errorf("%s.%s: no such field", ts.Name.Name, name)
						continue
					}
					if !docStates(values[j], got.Interface()) {
						t.Errorf("%s.%s: the doc says Default %q, DefaultConfig sets %v", ts.Name.Name, name, values[j], got.Interface())
					}
					checked++
				}
			}
			return false
		})
	}
	if checked < 25 {
		t.Fatalf("only %d documented defaults checked", checked)
	}
}

// docStates reports whether a doc's stated default describes v.
func docStates(stated string, v any) bool {
	word, _, _ := strings.Cut(stated, " ")
	switch v := v.(type) {
	case time.Duration:
		if v == 0 {
			return word == "0" || word == "0s"
		}
		d, err := time.ParseDuration(word)
		return err == nil && d == v
	case bool:
		return word == strconv.FormatBool(v)
	case int:
		return word == strconv.Itoa(v) || (v == 0 && (word == "0" || word == "none"))
	case int64:
		if n, unit, ok := strings.Cut(stated, " "); ok && strings.HasPrefix(unit, "MiB") {
			x, err := strconv.ParseInt(n, 10, 64)
			return err == nil && x<<20 == v
		}
		return word == strconv.FormatInt(v, 10) || (v == 0 && word == "0")
	case string:
		if v == "" {
			return strings.HasPrefix(stated, `""`) || word == "none" || word == "off"
		}
		return strings.Trim(word, `"(),`) == v || strings.Contains(stated, `"`+v+`"`) || strings.Contains(stated, v+" ")
	}
	// Pointers, interfaces, maps and nested configs: nil or zero.
	return word == "nil" || word == "none" || strings.HasPrefix(stated, "(nil)") || reflect.ValueOf(v).IsZero()
}
