package edge_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/edge/internal/natswire"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/batchwire"
)

// panicky is a backend whose lookups of key "boom" (and every batch)
// panic, as a bug below a handler would.
type panicky struct{ *fakeBackend }

func (p panicky) Get(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error) {
	if string(key) == "boom" {
		panic("lookup exploded")
	}
	return node.Result{Value: []byte("ok"), Found: true, Version: "v1"}, nil
}

func (p panicky) GetMany(context.Context, string, [][]byte, node.GetOptions) (string, []node.Result, error) {
	panic("batch exploded")
}

func (p panicky) Held() ([]node.HeldVersion, <-chan struct{}) { return nil, make(chan struct{}) }

func (p panicky) GetPart(ctx context.Context, db, _ string, _ int, key []byte, opts node.GetOptions) (node.Result, error) {
	return p.Get(ctx, db, key, opts)
}

// TestHTTPPanicRecovered: a handler that panics answers 500 (not an empty
// reply), is counted, and the server goes on answering.
func TestHTTPPanicRecovered(t *testing.T) {
	ts := startServer(t, panicky{newFake()})
	for _, req := range []func() (*http.Response, error){
		func() (*http.Response, error) { return ts.client.Get(ts.url + "/d/boom") },
		func() (*http.Response, error) {
			return ts.client.Post(ts.url+"/d/_batch", "application/octet-stream", bytes.NewReader(batchwire.AppendRequest(nil, [][]byte{[]byte("k")})))
		},
	} {
		resp, err := req()
		if err != nil {
			t.Fatalf("a panicking handler: %v (empty reply?)", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("status %d %q, want 500", resp.StatusCode, body)
		}
	}
	resp, err := ts.client.Get(ts.url + "/d/fine")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the panics: %v %v", resp, err)
	}
	resp.Body.Close()
	if got := panicsCounted(t, ts.registry, "http"); got != 2 {
		t.Errorf("spangle_panics_total{door=http} = %v", got)
	}
}

// TestNATSPanicRecovered: a NATS handler that panics answers 500 instead
// of ending the process (nats.go runs handlers on its own goroutines).
func TestNATSPanicRecovered(t *testing.T) {
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	reg := prometheus.NewRegistry()
	cfg := edge.DefaultNATSConfig()
	cfg.Conn = kv.Conn()
	cfg.Backend = panicky{newFake()}
	cfg.ClusterName = edgetest.Cluster
	cfg.Logger = edgetest.Logger()
	cfg.Registerer = reg
	ns, err := edge.NewNATSServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ns.Shutdown(ctx)
	})
	nc := edgetest.Connect(t, kv.ClientURL())
	get := "spangle." + edgetest.Cluster + ".get.d"
	edgetest.WaitFor(t, "get answers", func() error {
		_, err := nc.Request(get, []byte("fine"), time.Second)
		return err
	})
	for _, req := range []*nats.Msg{
		{Subject: get, Data: []byte("boom")},
		{Subject: "spangle." + edgetest.Cluster + ".mget.d", Data: batchwire.AppendRequest(nil, [][]byte{[]byte("k")})},
	} {
		m, err := nc.RequestMsg(req, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", req.Subject, err)
		}
		if st := m.Header.Get(natswire.HeaderStatus); st != "500" || !strings.Contains(m.Header.Get(natswire.HeaderError), "exploded") {
			t.Errorf("%s: status %q error %q, want 500", req.Subject, st, m.Header.Get(natswire.HeaderError))
		}
	}
	if m, err := nc.Request(get, []byte("fine"), 5*time.Second); err != nil || string(m.Data) != "ok" {
		t.Fatalf("after the panics: %v %v", m, err)
	}
	if got := panicsCounted(t, reg, "nats"); got != 2 {
		t.Errorf("spangle_panics_total{door=nats} = %v, want 2", got)
	}
}

// panicsCounted returns spangle_panics_total{door} from reg (0 if absent).
func panicsCounted(t *testing.T, reg *prometheus.Registry, door string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "spangle_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "door" && l.GetValue() == door {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
