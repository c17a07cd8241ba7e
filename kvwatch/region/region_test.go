package region

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.LeakOptions()...)
}

func TestDocDefaults(t *testing.T) {
	if n := nodetest.CheckDocDefaults(t, []string{"config.go"}, map[string]any{"Config": DefaultConfig()}); n < 4 {
		t.Errorf("%d fields checked, want at least 4", n)
	}
}

func TestValidate(t *testing.T) {
	with := func(f func(*Config)) Config {
		c := DefaultConfig()
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name     string
		cfg      Config
		embedded bool
		err      string // "" : valid; else in the error
	}{
		{"no region", DefaultConfig(), true, ""},
		{"no region, a hub", with(func(c *Config) { c.Hub = "nats-leaf://h:7422" }), true, "need region.name"},
		{"embedded", with(func(c *Config) { c.Name, c.Hub = "eu-1", "nats-leaf://h:7422" }), true, ""},
		{"embedded, two hub URLs", with(func(c *Config) { c.Name, c.Hub = "eu", "nats-leaf://a:7422,tls://b:7422" }), true, ""},
		{"embedded, no hub", with(func(c *Config) { c.Name = "eu" }), true, "region.hub is required"},
		{"embedded, hub without port", with(func(c *Config) { c.Name, c.Hub = "eu", "nats-leaf://h" }), true, "region.hub"},
		{"embedded, hub http", with(func(c *Config) { c.Name, c.Hub = "eu", "http://h:7422" }), true, "scheme"},
		{"own server", with(func(c *Config) { c.Name = "eu" }), false, ""},
		{"own server, a hub", with(func(c *Config) { c.Name, c.Hub = "eu", "nats-leaf://h:7422" }), false, "leafnodes.remotes"},
		{"dotted name", with(func(c *Config) { c.Name = "eu.west" }), false, `region.name "eu.west" is not a valid JetStream domain`},
		{"wildcard name", with(func(c *Config) { c.Name = "*" }), false, "region.name"},
		{"long name", with(func(c *Config) { c.Name = strings.Repeat("a", 65) }), false, "region.name"},
		{"reserved name", with(func(c *Config) { c.Name = "API" }), false, "region.name"},
		{"name is the hub's", with(func(c *Config) { c.Name = "hub" }), false, "the hub's domain"},
		{"bad hub domain", with(func(c *Config) { c.Name, c.HubDomain = "eu", "a b" }), false, "region.hub_domain"},
		{"no check timeout", with(func(c *Config) { c.Name, c.HubCheckTimeout = "eu", 0 }), false, "hub_check_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate(tc.embedded)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want ErrInvalidConfig with %q", err, tc.err)
			}
		})
	}
}

func TestRemote(t *testing.T) {
	c := DefaultConfig()
	c.Name, c.Hub = "eu", "nats-leaf://a:7422, tls://b:7423"
	r, err := Remote(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.URLs) != 2 || r.URLs[0].Host != "a:7422" || r.URLs[1].Host != "b:7423" || !r.TLS {
		t.Errorf("URLs %v, TLS %v", r.URLs, r.TLS)
	}
	if fmt.Sprint(r.DenyImports) != fmt.Sprint(Deny) || fmt.Sprint(r.DenyExports) != fmt.Sprint(Deny) {
		t.Errorf("deny imports %v, exports %v, want %v both", r.DenyImports, r.DenyExports, Deny)
	}
	c.Hub = "nats-leaf://a:7422"
	c.HubCreds = filepath.Join(t.TempDir(), "missing.creds")
	if _, err := Remote(c); err == nil || !strings.Contains(err.Error(), "region.hub_creds") {
		t.Errorf("missing creds: %v", err)
	}
	c.HubCreds = ""
	c.HubTLSCA = filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(c.HubTLSCA, []byte("not a certificate"), 0o644)
	if _, err := Remote(c); err == nil || !strings.Contains(err.Error(), "region.hub_tls_ca") {
		t.Errorf("bad CA: %v", err)
	}
}

// hubAndRegion starts a hub (domain hub, a leafnode listener) and a
// region server (domain ra) that is its leafnode, and returns a
// connection to each.
func hubAndRegion(t *testing.T) (hubSrv *server.Server, hub, region *nats.Conn, regionSrv *server.Server) {
	t.Helper()
	leaf := natstest.FreePort(t)
	o := &server.Options{ServerName: "hub", JetStreamDomain: "hub"}
	o.LeafNode.Host, o.LeafNode.Port, o.LeafNode.NoAdvertise = "127.0.0.1", leaf, true
	h := natstest.RunServer(t, o)
	c := DefaultConfig()
	c.Name, c.Hub = "ra", fmt.Sprintf("nats-leaf://127.0.0.1:%d", leaf)
	remote, err := Remote(c)
	if err != nil {
		t.Fatal(err)
	}
	ro := &server.Options{ServerName: "ra", JetStreamDomain: "ra"}
	ro.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
	ro.LeafNode.ReconnectInterval = 50 * time.Millisecond
	r := natstest.RunServer(t, ro)
	nodetest.WaitFor(t, 10*time.Second, "leafnode up", nodetest.True(func() bool { return r.NumLeafNodes() == 1 }))
	return h, connect(t, h.ClientURL()), connect(t, r.ClientURL()), r
}

func connect(t *testing.T, url string) *nats.Conn {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestMirrors creates both mirrors in a region, twice (idempotent), and
// reads through them what the hub holds, including what the hub writes
// after the mirrors exist.
func TestMirrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*natstest.MirrorWait)
	defer cancel()
	_, hub, reg, _ := hubAndRegion(t)
	hjs, _ := jetstream.New(hub)
	rjs, _ := jetstream.New(reg)
	hkv, err := hjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "spangle_c_versions"})
	if err != nil {
		t.Fatal(err)
	}
	hobs, err := hjs.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hkv.Put(ctx, "d", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := hobs.PutBytes(ctx, "d/v1/part-0", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	want := VersionsMirror("spangle_c_versions", "hub", "test", 1)
	var kv jetstream.KeyValue
	for range 2 {
		if err := EnsureObjectMirror(ctx, rjs, "data", "hub", 1); err != nil {
			t.Fatal(err)
		}
		if kv, err = EnsureVersionsMirror(ctx, rjs, want, "hub"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := hkv.Put(ctx, "d.pin.ra", []byte("pin")); err != nil {
		t.Fatal(err)
	}
	obs, err := rjs.ObjectStore(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, natstest.MirrorWait, "the mirrors", func() error {
		b, err := obs.GetBytes(ctx, "d/v1/part-0")
		if err != nil || string(b) != "hello" {
			return fmt.Errorf("object: %q, %v", b, err)
		}
		e, err := kv.Get(ctx, "d.pin.ra")
		if err != nil || string(e.Value()) != "pin" {
			return fmt.Errorf("pin: %v", err)
		}
		return nil
	})
	// The hub asks the region for the state of its mirrors.
	for _, stream := range []string{"KV_spangle_c_versions", "OBJ_data"} {
		m, err := MirrorState(ctx, hub, "ra", stream)
		if err != nil || !m.Connected || m.Pending != 0 || m.Error != "" {
			t.Errorf("mirror %s of ra: %+v, %v; want connected, nothing pending", stream, m, err)
		}
	}
	if _, err := MirrorState(ctx, hub, "ra", "KV_nothing"); err == nil {
		t.Error("the state of a stream that does not exist")
	}

	// A stream of that name that is not the mirror is refused, naming it.
	if _, err := rjs.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "own"}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureObjectMirror(ctx, rjs, "own", "hub", 1); !errors.Is(err, ErrNotMirror) || !strings.Contains(err.Error(), "OBJ_own") {
		t.Errorf("own bucket: %v, want ErrNotMirror naming OBJ_own", err)
	}
	if _, err := rjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "spangle_x_versions"}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureVersionsMirror(ctx, rjs, VersionsMirror("spangle_x_versions", "hub", "", 1), "hub"); !errors.Is(err, ErrNotMirror) {
		t.Errorf("own versions bucket: %v, want ErrNotMirror", err)
	}
}

// TestCheck: the region's domain is checked, and a hub that does not
// answer is told apart from a link that is down.
func TestCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hub, _, reg, srv := hubAndRegion(t)
	c := DefaultConfig()
	c.Name, c.Hub = "ra", "nats-leaf://127.0.0.1:1"
	if err := CheckDomain(ctx, reg, "ra"); err != nil {
		t.Fatal(err)
	}
	if err := CheckDomain(ctx, reg, "rb"); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `domain "ra"`) {
		t.Errorf("wrong domain: %v", err)
	}
	leafs := func() int { return srv.NumLeafNodes() }
	if err := CheckHub(ctx, reg, c, leafs); err != nil {
		t.Fatalf("hub up: %v", err)
	}
	c.HubDomain = "elsewhere"
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if err := CheckHub(short, reg, c, leafs); !errors.Is(err, ErrHub) || !strings.Contains(err.Error(), `no JetStream answers in domain "elsewhere"`) {
		t.Errorf("no JetStream in the hub's domain: %v", err)
	}
	c.HubDomain = "hub"
	hub.Shutdown()
	nodetest.WaitFor(t, 10*time.Second, "leafnode down", nodetest.True(func() bool { return srv.NumLeafNodes() == 0 }))
	short3, cancel3 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel3()
	if err := CheckHub(short3, reg, c, leafs); !errors.Is(err, ErrHub) || !strings.Contains(err.Error(), "leafnode link to the hub") {
		t.Errorf("link down: %v", err)
	}
}
