package proxy

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	good := startPeer(t, value("v1", "ok"))
	bad := startPeer(t, status(http.StatusServiceUnavailable))
	p := newProxy(t, func(c *Config) { c.Registerer = reg; c.StageTimeout = c.Timeout })

	if _, err := get(p, "a", bad.addr, bad.addr); !errors.Is(err, ErrNoReplica) {
		t.Fatal(err)
	}
	if _, err := get(p, "b", good.addr); err != nil {
		t.Fatal(err)
	}
	if _, err := get(p, "c"); !errors.Is(err, ErrNoReplica) {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		got  prometheus.Collector
		want float64
	}{
		{"requests ok", p.m.byOutcome[outcomeOK], 1},
		{"requests no_replica", p.m.byOutcome[outcomeNoReplica], 2},
		{"attempts status", p.m.byAttempt[outcomeStatus], 2},
		{"attempts ok", p.m.byAttempt[outcomeOK], 1},
		{"coalesced", p.m.coalesced, 0},
	} {
		if got := testutil.ToFloat64(c.got); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(p.m.duration); n != 1 {
		t.Errorf("duration histogram: %d series", n)
	}
	// Three requests to peers (two to the bad one, one to the good), a
	// lookup each.
	want := `# HELP spangle_proxy_request_keys Requests sent to peers, by the number of lookups each carried (1: a GET; more: a batch).
# TYPE spangle_proxy_request_keys histogram
spangle_proxy_request_keys_bucket{le="1"} 3
spangle_proxy_request_keys_bucket{le="2"} 3
spangle_proxy_request_keys_bucket{le="4"} 3
spangle_proxy_request_keys_bucket{le="8"} 3
spangle_proxy_request_keys_bucket{le="16"} 3
spangle_proxy_request_keys_bucket{le="32"} 3
spangle_proxy_request_keys_bucket{le="64"} 3
spangle_proxy_request_keys_bucket{le="128"} 3
spangle_proxy_request_keys_bucket{le="+Inf"} 3
spangle_proxy_request_keys_sum 3
spangle_proxy_request_keys_count 3
`
	if err := testutil.CollectAndCompare(p.m.batchKeys, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("Gather: %v", err)
	}

	// A second Proxy on the same registry fails cleanly, registering
	// nothing.
	cfg := DefaultConfig()
	cfg.Registerer = reg
	if _, err := New(cfg); err == nil {
		t.Fatal("duplicate registration accepted")
	}
}
