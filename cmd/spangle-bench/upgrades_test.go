package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

func TestUpgradeVersions(t *testing.T) {
	prev := "1"
	for k := 1; k <= 99; k++ {
		v := upgradeVersion("1", k)
		if v <= prev || !plainName(v) {
			t.Fatalf("upgrade %d: %q does not sort after %q or is not a plain name", k, v, prev)
		}
		prev = v
	}
	p := defaultGenParams()
	q := upgradeParams(p, 3, 100)
	if q.Records != 100 || q.Version != "1-u03" || q.Seed == p.Seed || q.Files != p.Files {
		t.Errorf("upgradeParams = %+v", q)
	}
}

// TestUpgradeLoadChecks runs a reader against a fake node that answers
// with a scripted sequence of versions: the checker must count the
// regression, the wrong value and the error, and nothing else.
func TestUpgradeLoadChecks(t *testing.T) {
	p := defaultGenParams()
	p.Records = 10
	seeds := map[string]uint64{"1": p.Seed, "1-u01": p.Seed + 1}
	type answer struct {
		code    int
		version string
		wrong   bool
	}
	script := []answer{
		{200, "1", false}, {200, "1-u01", false}, {200, "1", false}, // a regression
		{200, "1-u01", true}, // a wrong value
		{500, "", false},     // a failure
		{200, "1-u01", false},
	}
	var n atomic.Int64
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if i >= len(script) {
			if i == len(script) {
				close(stop)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		a := script[i]
		k, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/"+p.DB+"/"), 16, 64)
		if err != nil {
			t.Errorf("bad path %q", r.URL.Path)
		}
		w.Header().Set("X-Spangle-Version", a.version)
		w.WriteHeader(a.code)
		v := appendValue(nil, seeds[a.version], k, p.ValueSize)
		if a.wrong {
			v[0]++
		}
		w.Write(v)
	}))
	defer srv.Close()
	node := &clusterNode{id: 1, addr: strings.TrimPrefix(srv.URL, "http://"), c: &child{name: "fake"}}
	l := &upgradeLoad{nodes: []*clusterNode{node}, p: p, records: p.Records, seeds: seeds, floors: make([]versionFloor, 1)}
	l.read(stop, 0, 1)
	// The answers after the script (503) may be counted as failures too,
	// until the reader sees stop: count only the script's.
	if got := l.regressed.Load(); got != 1 {
		t.Errorf("regressions = %d, want 1", got)
	}
	if failed := l.failed.Load() - (l.requests.Load() - int64(len(script))); failed != 2 {
		t.Errorf("failures within the script = %d, want 2 (examples %q)", failed, l.examples)
	}
	if len(l.examples) == 0 || len(l.examples) > maxExamples {
		t.Errorf("examples = %q", l.examples)
	}
}
