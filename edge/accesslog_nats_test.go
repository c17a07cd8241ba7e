package edge_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/node/listwire"
)

// TestAccessLogNATS: the NATS door's own log has a line per request,
// with its subject, db, keys, status, version and reply bytes.
func TestAccessLogNATS(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 4, edgetest.Numbered("v1", 100))
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	reg := prometheus.NewRegistry()
	l, path := startAccessLog(t, reg, func(c *edge.AccessLogConfig) { c.Format = edge.AccessLogJSON })
	edgetest.StartNode(t, kv, root, edgetest.Options{
		NATS: func(c *edge.NATSConfig) { c.Registerer, c.AccessLog = reg, l },
	})
	nc := edgetest.Connect(t, kv.ClientURL())
	edgetest.WaitFor(t, "the get subject answers", func() error {
		_, err := nc.Request("spangle.test.get.d", []byte("key-0"), time.Second)
		return err
	})
	before := len(waitLines(t, l, path, 1))
	for _, r := range []struct {
		subject string
		data    []byte
	}{
		{"spangle.test.get.d", []byte("key-1")},
		{"spangle.test.get.d", []byte("none")},
		{"spangle.test.get.nodb", []byte("key-1")},
		{"spangle.test.mget.d", batchwire.AppendRequest(nil, [][]byte{[]byte("key-1"), []byte("key-2"), []byte("x")})},
		{"spangle.test.list.d", listwire.AppendRequest(nil, listwire.Request{Prefix: []byte("key-1"), Limit: 4})},
	} {
		if _, err := nc.Request(r.subject, r.data, 5*time.Second); err != nil {
			t.Fatalf("%s: %v", r.subject, err)
		}
	}
	// A line is written once its handler returns, after the reply: wait
	// for them, in any order (the handlers are several goroutines).
	lines := waitLines(t, l, path, before+5)[before:]
	slices.SortStableFunc(lines, func(a, b accessLine) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), a.Status-b.Status)
	})
	want := []struct {
		subject     string
		db, version string
		status      int
		keys        int
	}{ // sorted as lines are
		{"spangle.test.get.d", "d", "v1", 200, 1},
		{"spangle.test.get.d", "d", "v1", 404, 1},
		{"spangle.test.get.nodb", "nodb", "", 404, 1},
		{"spangle.test.list.d", "d", "v1", 200, 4},
		{"spangle.test.mget.d", "d", "v1", 200, 3},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines for %d requests: %+v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.Path != w.subject || l.Proto != "NATS" || l.DB != w.db || l.Version != w.version || l.Status != w.status || l.Keys != w.keys {
			t.Errorf("line %d: %+v, want %+v", i, l, w)
		}
		if w.status == 200 && l.Bytes == 0 {
			t.Errorf("line %d: no bytes", i)
		}
	}
	// A part subject's line names its db too.
	if _, err := nc.Request("spangle.test.part.d.v1.0", []byte("key-0"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	all := waitLines(t, l, path, before+6)
	last := all[len(all)-1]
	if !strings.HasPrefix(last.Path, "spangle.test.part.d.v1.") || last.DB != "d" || last.Keys != 1 {
		t.Errorf("a part's line: %+v", last)
	}
}

// waitLines waits until path holds at least n lines (flushing l) and
// returns them.
func waitLines(t *testing.T, l *edge.AccessLog, path string, n int) []accessLine {
	t.Helper()
	var lines []accessLine
	edgetest.WaitFor(t, fmt.Sprint(n, " access log lines"), func() error {
		flush(t, l)
		if lines = decodeJSONLines(t, path); len(lines) < n {
			return fmt.Errorf("%d lines", len(lines))
		}
		return nil
	})
	return lines
}
