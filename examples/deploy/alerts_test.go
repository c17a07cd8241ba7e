package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spangledb/spangle/node/nodetest"
)

// TestAlertRules checks spangle-alerts.yml with promtool: the rules load
// (check rules), and each alert fires on the synthetic series of
// spangle-alerts.test.yml that should make it fire and not on those that
// should not (test rules). Every alert has a firing case there.
func TestAlertRules(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	for _, args := range [][]string{{"check", "rules", "spangle-alerts.yml"}, {"test", "rules", "spangle-alerts.test.yml"}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string
				ExpAlerts []any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		}
	}
	readYAML(t, "spangle-alerts.test.yml", &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			}
		}
	}
	for _, r := range alertRules(t) {
		if !fires[r.Alert] {
			t.Errorf("spangle-alerts.test.yml never makes %s fire", r.Alert)
		}
	}
}

// TestPrometheusConfig checks prometheus.yml, and the rule file it
// loads, with promtool check config.
func TestPrometheusConfig(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	out, err := exec.Command(promtool, "check", "config", "prometheus.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "spangle-alerts.yml") {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// TestDashboardQueries checks that every query of spangle-dashboard.json
// parses, with promtool: each becomes a recording rule, Grafana's
// variables replaced by what Grafana would put there.
func TestDashboardQueries(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$instance", ".*", "$db", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range dashboardQueries(t) {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query%d", i), Expr: grafana.Replace(q)})
	}
	body, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}

// exemptMetrics are names the rules and the dashboard may use that no
// node exports, each with the reason.
var exemptMetrics = map[string]string{
	"up": "Prometheus writes it for every scrape target",
}

// TestMetricNames checks every metric name in the alerting rules and the
// dashboard, and every label value they select, against the /metrics of
// a real node, so that the three cannot drift apart. The node runs in
// cluster mode (the proxy's metrics exist only there) with a purge hook
// that fails (spangle_purges_total has a series once a purge ran).
func TestMetricNames(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	var purges atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		purges.Add(1)
		http.Error(w, "purge refused by the test", http.StatusInternalServerError)
	}))
	defer hook.Close()
	dir := t.TempDir()
	data, err := filepath.Abs(exampleData(t))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "spangle.toml")
	err = os.WriteFile(config, fmt.Appendf(nil, `source = %q
data_dir = %q
require_success_file = true
[sharding]
enabled = true
time_to_converge = "100ms"
[purge]
url = "%s/purge/{db}"
attempts = 1
`, data, filepath.Join(dir, "data"), hook.URL), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, os.Environ(), buildBinary(t), "serve", "--config", config, "--bind", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	defer n.stop(t)

	var have map[string][]map[string]string
	nodetest.WaitFor(t, testTimeout, "the node ready and its purge failed", func() error {
		if code := get(t, n.http+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz %d", code)
		}
		have = scrape(t, n.http+"/metrics")
		for _, s := range have["spangle_purges_total"] {
			if s["result"] == "failed" {
				return nil
			}
		}
		return fmt.Errorf("no failed purge counted (%d hook requests)", purges.Load())
	})

	var exprs []string
	for _, r := range alertRules(t) {
		exprs = append(exprs, r.Expr)
	}
	exprs = append(exprs, dashboardQueries(t)...)
	names := map[string]bool{}
	for _, e := range exprs {
		for _, ref := range metricRefs(e) {
			names[ref.name] = true
			if why, ok := exemptMetrics[ref.name]; ok {
				t.Logf("%s: exempt (%s)", ref.name, why)
				continue
			}
			samples, ok := have[ref.name]
			if !ok {
				t.Errorf("%s (in %q) is not in a node's /metrics", ref.name, e)
				continue
			}
			for _, m := range ref.matchers {
				if !labelValueSeen(samples, m) {
					t.Errorf("%s{%s%s%q} (in %q): no series of the node has that label value", ref.name, m.label, m.op, m.value, e)
				}
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("only %d metric names found in the rules and the dashboard", len(names))
	}
	t.Logf("%d metric names checked", len(names))
}

// alertRule is one rule of spangle-alerts.yml.
type alertRule struct {
	Alert, Expr string
}

func alertRules(t testing.TB) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct{ Rules []alertRule }
	}
	readYAML(t, "spangle-alerts.yml", &f)
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("spangle-alerts.yml has no rules")
	}
	return rules
}

// dashboardQueries returns the PromQL of spangle-dashboard.json: its
// panels' targets (rows' nested panels included) and its variables'.
func dashboardQueries(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile("spangle-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string
		Targets []struct{ Expr string }
		Panels  []json.RawMessage
	}
	var d struct {
		Panels     []json.RawMessage
		Templating struct {
			List []struct {
				Type  string
				Query json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("spangle-dashboard.json: %v", err)
	}
	var qs []string
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("spangle-dashboard.json: panel: %v", err)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("panel %q has a target without a query", p.Title)
				}
				qs = append(qs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	label := regexp.MustCompile(`^label_values\((.*), *\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("spangle-dashboard.json: variable query: %v", err)
		}
		m := label.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable query %q is not label_values(selector, label)", q.Query)
		}
		qs = append(qs, m[1])
	}
	return qs
}

func readYAML(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// matcher is one label matcher of a selector.
type matcher struct{ label, op, value string }

// metricRef is a metric name in a query and the matchers of its selector.
type metricRef struct {
	name     string
	matchers []matcher
}

var (
	// Our metric names all start spangle_; up is Prometheus's. A name
	// followed by "(" is a function; label names after "by"/"on" are
	// inside parentheses, never followed by "{".
	selectorRE = regexp.MustCompile(`\b(spangle_[a-z0-9_]+|up)\b(\{[^}]*\})?`)
	matcherRE  = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
)

func metricRefs(expr string) []metricRef {
	var refs []metricRef
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		r := metricRef{name: m[1]}
		for _, mm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
			r.matchers = append(r.matchers, matcher{mm[1], mm[2], mm[3]})
		}
		refs = append(refs, r)
	}
	return refs
}

// plainAlternatives matches a regular expression that is only literal
// alternatives (a|b|c), which a series must each have.
var plainAlternatives = regexp.MustCompile(`^[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*$`)

// labelValueSeen reports whether the samples have what m selects: a
// literal value, or each literal alternative of a regular expression.
// Negative matchers, Grafana variables and other regular expressions need
// only the label (Prometheus adds job and instance: they always pass).
func labelValueSeen(samples []map[string]string, m matcher) bool {
	if m.label == "job" || m.label == "instance" {
		return true
	}
	var want []string
	switch {
	case strings.Contains(m.value, "$") || m.op == "!=" || m.op == "!~":
	case m.op == "=":
		want = []string{m.value}
	case plainAlternatives.MatchString(m.value):
		want = strings.Split(m.value, "|")
	}
	seen := map[string]bool{}
	hasLabel := false
	for _, s := range samples {
		if v, ok := s[m.label]; ok {
			hasLabel = true
			seen[v] = true
		}
	}
	for _, w := range want {
		if !seen[w] {
			return false
		}
	}
	return hasLabel
}

// scrape reads a node's /metrics as sample name → each sample's labels.
func scrape(t testing.TB, url string) map[string][]map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	samples := map[string][]map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			t.Fatalf("/metrics line %q", line)
		}
		labels := map[string]string{}
		if line[end] == '{' {
			close := strings.LastIndex(line, "}")
			for _, mm := range matcherRE.FindAllStringSubmatch(line[end:close+1], -1) {
				labels[mm[1]] = mm[3]
			}
		}
		samples[line[:end]] = append(samples[line[:end]], labels)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples
}
