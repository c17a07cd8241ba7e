package edge_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/node/listwire"
)

// TestNATSClientAccount: on an embedded server with users, the front door
// answers a client login's get, part, mget and list requests on the
// node's login in the clients' account (NATSConfig.ClientConn), where
// they cross no service import (the clients' account imports none of the
// lookup subjects: without ClientConn nobody answers them there), and
// still answers in the cluster's account (here the KV's own connection; a
// client account still importing the lookups, as an external server's
// configured before, reaches the nodes there); a part subject
// counts once in spangle_nats_part_subscriptions though it is subscribed
// on both connections; after Shutdown neither account has a responder.
func TestNATSClientAccount(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 4, edgetest.Numbered("v1", 100))
	kcfg := edgetest.NATSConfig(t)
	kcfg.EmbeddedUsers = []kvwatch.User{
		{Name: "n", Password: "pw", Role: kvwatch.RoleNode},
		{Name: "c", Password: "pw", Role: kvwatch.RoleClient},
	}
	kv := edgetest.StartKV(t, kcfg)
	reg := prometheus.NewRegistry()
	n := edgetest.StartNode(t, kv, root, edgetest.Options{NATS: func(c *edge.NATSConfig) { c.Registerer = reg }})
	if n.NATS == nil {
		t.Fatal("no NATS door")
	}
	client := edgetest.Connect(t, kv.ClientURL(), nats.UserInfo("c", "pw"))
	cluster := kv.Conn()
	key := []byte("key-7")
	requests := []struct {
		subject string
		data    []byte
		check   func(*nats.Msg) error
	}{
		{"spangle.test.get.d", key, value("v1:7")},
		{partOf(t, key), key, value("v1:7")},
		{"spangle.test.mget.d", batchwire.AppendRequest(nil, [][]byte{key}), func(m *nats.Msg) error {
			r, err := batchwire.DecodeReply(m.Data, 1)
			if err != nil || string(r.Items[0].Value) != "v1:7" {
				return fmt.Errorf("mget: %+v %v", r, err)
			}
			return nil
		}},
		{"spangle.test.list.d", listwire.AppendRequest(nil, listwire.Request{Prefix: []byte("key-7"), Limit: 100}), func(m *nats.Msg) error {
			page, err := listwire.DecodeReply(m.Data, 100)
			if err != nil || len(page.Keys) != 11 {
				return fmt.Errorf("list: %+v %v", page, err)
			}
			return nil
		}},
	}
	for _, nc := range []*nats.Conn{client, cluster} {
		for _, r := range requests {
			edgetest.WaitFor(t, r.subject+" answered", func() error {
				m, err := nc.Request(r.subject, r.data, time.Second)
				if err != nil {
					return err
				}
				return r.check(m)
			})
		}
	}
	if got := testutil.ToFloat64(gauge(t, reg, "spangle_nats_part_subscriptions")); got != 4 {
		t.Errorf("spangle_nats_part_subscriptions = %v, want 4", got)
	}
	n.Stop(t)
	for _, nc := range []*nats.Conn{client, cluster} {
		for _, r := range requests {
			if _, err := nc.Request(r.subject, r.data, time.Second); !errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("%s after Shutdown: %v, want no responders", r.subject, err)
			}
		}
	}
}

// value checks a lookup's answer.
func value(want string) func(*nats.Msg) error {
	return func(m *nats.Msg) error {
		if m.Header.Get("Spangle-Status") != "200" || string(m.Data) != want {
			return fmt.Errorf("%v %q, want %q", m.Header, m.Data, want)
		}
		return nil
	}
}

// gauge returns the gauge named name of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
			g.Set(mf.GetMetric()[0].GetGauge().GetValue())
			return g
		}
	}
	t.Fatalf("no gauge %s", name)
	return nil
}
