package kvwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/kvwatch/region"
)

// mirrorWait bounds the waits for a region's mirror to fill
// (natstest.MirrorWait).
const mirrorWait = natstest.MirrorWait

// TestRegion runs a KV whose embedded server is region ra of a hub: the
// server has the region's domain and is a leafnode of the hub, Versions is
// the mirror of the hub's bucket (its entries arrive, writes are refused),
// the nodes bucket is the region's own (the hub has none), and the hub
// check reports the hub. With users, the same holds with the server's
// accounts (the leafnode link bound to the cluster's account), and a
// client login reads the mirror through its account's imports, and its
// lookups are answered in its account, on the node's LookupConn.
func TestRegion(t *testing.T) {
	for _, users := range []bool{false, true} {
		t.Run(fmt.Sprintf("users=%v", users), func(t *testing.T) { testRegion(t, users) })
	}
}

func testRegion(t *testing.T, users bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*mirrorWait)
	defer cancel()
	leaf := natstest.FreePort(t)
	o := &server.Options{ServerName: "hub", JetStreamDomain: "hub"}
	o.LeafNode.Host, o.LeafNode.Port, o.LeafNode.NoAdvertise = "127.0.0.1", leaf, true
	hub := natstest.RunServer(t, o)
	hjs := natstest.JetStream(t, hub.ClientURL())
	hkv, err := hjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucketName("test", Versions)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hkv.Put(ctx, "d", []byte("from the hub")); err != nil {
		t.Fatal(err)
	}

	c := testConfig(t)
	c.Region = region.DefaultConfig()
	c.Region.Name, c.Region.Hub = "ra", fmt.Sprintf("nats-leaf://127.0.0.1:%d", leaf)
	c.Region.HubCheckInterval = 100 * time.Millisecond
	if users {
		c.EmbeddedUsers = []User{{Name: "app", Password: "pw", Role: RoleClient}}
	}
	k := startKV(t, c)
	// The mirror may be created before the leafnode link is up: nats-server
	// then retries its consumer after 10 s, 20 s after a second failure.
	waitFor(t, mirrorWait, "the hub's entry in the mirror", hasValue(k, Versions, "d", "from the hub"))
	if users {
		app, err := nats.Connect(k.ClientURL(), nats.UserInfo("app", "pw"))
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()
		vb := bucketName("test", Versions)
		m, err := app.Request("$JS.API.DIRECT.GET."+names.KVStream(vb), []byte(`{"last_by_subj":"`+names.KVSubject(vb, "d")+`"}`), 5*time.Second)
		if err != nil || string(m.Data) != "from the hub" {
			t.Fatalf("the client reads the mirror: %v %v", m, err)
		}
		// The region's nodes answer its clients in their account.
		lookups, err := k.LookupConn()
		if err != nil || lookups == nil {
			t.Fatalf("no login in the region's clients' account: %v", err)
		}
		defer lookups.Close()
		if _, err := lookups.Subscribe(names.GetSubject("test", "d"), func(m *nats.Msg) { m.Respond([]byte("ra")) }); err != nil { //nolint:errcheck // the request checks the answer
			t.Fatal(err)
		}
		lookups.Flush() //nolint:errcheck // the request below waits
		if m, err := app.Request(names.GetSubject("test", "d"), []byte("k"), 5*time.Second); err != nil || string(m.Data) != "ra" {
			t.Fatalf("the region's client's lookup: %v %v", m, err)
		}
	}
	if _, err := hkv.Put(ctx, "d.pin.ra", []byte("pin")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, mirrorWait, "a later entry", hasValue(k, Versions, "d.pin.ra", "pin"))
	if _, err := k.Put(ctx, Versions, "d", []byte("x")); !errors.Is(err, ErrMirror) {
		t.Errorf("Put to the mirror: %v, want ErrMirror", err)
	}
	if err := k.Delete(ctx, Versions, "d"); !errors.Is(err, ErrMirror) {
		t.Errorf("Delete in the mirror: %v, want ErrMirror", err)
	}
	if err := k.Publish(ctx, Nodes, "n1", []byte("node")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "own entry", hasValue(k, Nodes, "n1", "node"))
	if _, err := hjs.KeyValue(ctx, bucketName("test", Nodes)); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("the hub has a nodes bucket: %v", err)
	}
	waitFor(t, 5*time.Second, "the hub check", func() error {
		if got := testutil.ToFloat64(k.met.hubConnected); got != 1 {
			return fmt.Errorf("hub_connected %v", got)
		}
		return nil
	})
	if e, _ := hkv.Get(ctx, "d"); string(e.Value()) != "from the hub" {
		t.Errorf("the hub's entry changed: %q", e.Value())
	}
	waitFor(t, 5*time.Second, "the region announced at the hub", func() error {
		if got, err := region.Regions(ctx, hjs, "test"); err != nil || fmt.Sprint(got) != "[ra]" {
			return fmt.Errorf("the hub's regions: %q %v", got, err)
		}
		return nil
	})
	// The Object Store source's JetStream: the region's mirror of the
	// hub's bucket exists once it is returned, under the bucket's name.
	rjs, err := k.SourceJetStream("data")(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := rjs.Stream(ctx, "OBJ_data")
	if err != nil {
		t.Fatalf("the region's Object Store mirror: %v", err)
	}
	if !region.IsMirrorOf(s.CachedInfo().Config, "OBJ_data", "hub") {
		t.Errorf("OBJ_data in the region is %+v, want the hub's mirror", s.CachedInfo().Config.Mirror)
	}
}

// TestRegionWrongDomain: with [nats] url, a server whose JetStream domain
// is not the region's name stops Start with an error saying so.
func TestRegionWrongDomain(t *testing.T) {
	s := natstest.RunServer(t, &server.Options{JetStreamDomain: "elsewhere"})
	c := testConfig(t, s.ClientURL())
	c.Region = region.DefaultConfig()
	c.Region.Name = "ra"
	k := newKV(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Start(ctx); err == nil || !errors.Is(err, region.ErrInvalidConfig) {
		t.Fatalf("Start: %v, want the domain refused", err)
	}
}

// TestRegionPermissions runs a hub and a region's own NATS server (a
// leafnode of the hub, deployment (b)) whose users have exactly the
// permissions RolePermissions gives with the hub's domain: two region
// nodes log in as the node role and work — their server's domain and
// the hub are checked, the mirrors of the hub's versions and Object
// Store buckets are created and fill, each sees the other's membership
// and partitions entries, a client's lookup is answered — without one
// permissions violation. The hub's operators (one of every region, one
// of ra only) read ra's buckets through the hub and pin where they may;
// what no login may do (delete a hub bucket, write a pin as a node, a
// region's pin as another region's operator, reach another region) is
// refused, and nothing is lost.
func TestRegionPermissions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*mirrorWait)
	defer cancel()
	perms := func(role string, s Scope) *server.Permissions {
		t.Helper()
		p, err := RolePermissions(role, s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	scope := Scope{Cluster: "test", ObjectBuckets: []string{"data"}, HubDomain: "hub"}
	opsRA := scope
	opsRA.Region = "ra"

	leaf := natstest.FreePort(t)
	o := &server.Options{ServerName: "hub", JetStreamDomain: "hub"}
	o.LeafNode.Host, o.LeafNode.Port, o.LeafNode.NoAdvertise = "127.0.0.1", leaf, true
	o.Users = []*server.User{
		{Username: "admin", Password: "pw"},
		{Username: "ra", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: region.HubLeafPublish("hub", "test", "ra")},
			Subscribe: &server.SubjectPermission{Allow: region.HubLeafSubscribe("ra")},
		}},
		{Username: "ops", Password: "pw", Permissions: perms(RoleOperator, scope)},
		{Username: "ops-ra", Password: "pw", Permissions: perms(RoleOperator, opsRA)},
		{Username: "etl", Password: "pw", Permissions: perms(RolePublisher, scope)},
	}
	hub := natstest.RunServer(t, o)
	rc := region.DefaultConfig()
	rc.Name, rc.Hub = "ra", fmt.Sprintf("nats-leaf://ra:pw@127.0.0.1:%d", leaf)
	remote, err := region.Remote(rc)
	if err != nil {
		t.Fatal(err)
	}
	ro := &server.Options{ServerName: "ra", JetStreamDomain: "ra"}
	ro.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
	ro.LeafNode.ReconnectInterval = 50 * time.Millisecond
	ro.Users = []*server.User{
		{Username: "node", Password: "pw", Permissions: perms(RoleNode, scope)},
		{Username: "client", Password: "pw", Permissions: perms(RoleClient, scope)},
	}
	ra := natstest.RunServer(t, ro)
	waitFor(t, 10*time.Second, "ra's leafnode up", func() error {
		if ra.NumLeafNodes() != 1 {
			return fmt.Errorf("%d leafnodes", ra.NumLeafNodes())
		}
		return nil
	})
	as := func(s *server.Server, user string) string {
		return strings.Replace(s.ClientURL(), "nats://", "nats://"+user+":pw@", 1)
	}

	// The hub's buckets, made by its administrator.
	admin := natstest.JetStream(t, as(hub, "admin"))
	versions := bucketName("test", Versions)
	hkv, err := admin.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: versions})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hkv.Put(ctx, "d", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	hobs, err := admin.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hobs.PutBytes(ctx, "d/v1/part-0", []byte("hello")); err != nil {
		t.Fatal(err)
	}

	// Two nodes of region ra.
	node := func() *KV {
		c := testConfig(t, as(ra, "node"))
		c.Region = region.DefaultConfig()
		c.Region.Name = "ra"
		c.Region.HubCheckInterval = 100 * time.Millisecond
		return startKV(t, c)
	}
	n1, n2 := node(), node()
	if err := region.EnsureObjectMirror(ctx, n1.JetStream(), "data", "hub", 1); err != nil {
		t.Fatal(err)
	}
	if err := region.EnsureObjectMirror(ctx, n2.JetStream(), "data", "hub", 1); err != nil {
		t.Fatal(err)
	}
	for i, k := range []*KV{n1, n2} {
		id := fmt.Sprintf("n%d", i+1)
		if err := k.Publish(ctx, Nodes, id, []byte(id)); err != nil {
			t.Fatal(err)
		}
		if err := k.Publish(ctx, Partitions, names.PartitionKey("d", "v1", id), []byte("0")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []*KV{n1, n2} {
		waitFor(t, mirrorWait, "the hub's version in the mirror", hasValue(k, Versions, "d", "v1"))
		waitFor(t, 5*time.Second, "both nodes' entries", func() error {
			for _, id := range []string{"n1", "n2"} {
				if err := hasValue(k, Nodes, id, id)(); err != nil {
					return err
				}
				if err := hasValue(k, Partitions, names.PartitionKey("d", "v1", id), "0")(); err != nil {
					return err
				}
			}
			return nil
		})
		obs, err := k.JetStream().ObjectStore(ctx, "data")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, mirrorWait, "the hub's object in the mirror", func() error {
			b, err := obs.GetBytes(ctx, "d/v1/part-0")
			if err == nil && string(b) != "hello" {
				err = fmt.Errorf("%q", b)
			}
			return err
		})
		waitFor(t, 5*time.Second, "the hub check", func() error {
			if got := testutil.ToFloat64(k.met.hubConnected); got != 1 {
				return fmt.Errorf("hub_connected %v", got)
			}
			return nil
		})
	}
	// A lookup, answered by a node.
	if _, err := n1.Conn().QueueSubscribe(names.GetSubject("test", "d"), "q", func(m *nats.Msg) { _ = m.Respond([]byte("value")) }); err != nil {
		t.Fatal(err)
	}
	if err := n1.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	client := natstest.JetStream(t, as(ra, "client")).Conn()
	if m, err := client.Request(names.GetSubject("test", "d"), []byte("k"), 5*time.Second); err != nil || string(m.Data) != "value" {
		t.Fatalf("lookup: %v %v", m, err)
	}
	// The region's operator pins in its region, and reads the region's
	// nodes (the pin's verdict) and its mirror (status --regions).
	ops := natstest.JetStream(t, as(hub, "ops-ra"))
	okv, err := ops.KeyValue(ctx, versions)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := okv.Put(ctx, names.RegionPinKey("d", "ra"), []byte("pin")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, mirrorWait, "the region pin in the mirror", hasValue(n1, Versions, names.RegionPinKey("d", "ra"), "pin"))
	toRA, err := jetstream.NewWithDomain(ops.Conn(), "ra")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := toRA.KeyValue(ctx, bucketName("test", Nodes))
	if err != nil {
		t.Fatal(err)
	}
	if e, err := nodes.Get(ctx, "n2"); err != nil || string(e.Value()) != "n2" {
		t.Fatalf("ra's nodes bucket through the hub: %v", err)
	}
	if _, err := region.MirrorState(ctx, ops.Conn(), "ra", names.KVStream(versions)); err != nil {
		t.Fatalf("ra's mirror through the hub: %v", err)
	}
	waitFor(t, 5*time.Second, "the region announced at the hub", func() error {
		if got, err := region.Regions(ctx, admin, "test"); err != nil || fmt.Sprint(got) != "[ra]" {
			return fmt.Errorf("the hub's regions: %q %v", got, err)
		}
		return nil
	})
	// (ra's entry lives 1 s, three checks of 100 ms rounded up: wait for
	// it again rather than assume a loaded machine refreshed it in time.)
	waitFor(t, 5*time.Second, "the hub's regions, as ra's operator", func() error {
		if got, err := region.Regions(ctx, ops, "test"); err != nil || fmt.Sprint(got) != "[ra]" {
			return fmt.Errorf("the hub's regions: %q %v", got, err)
		}
		return nil
	})
	for i, k := range []*KV{n1, n2} {
		if err := k.Conn().LastError(); err != nil {
			t.Fatalf("node %d met: %v", i+1, err)
		}
	}

	// What each login may and may not do.
	conns := map[string]*nats.Conn{}
	for user, s := range map[string]*server.Server{"node": ra, "client": ra, "ops": hub, "ops-ra": hub, "etl": hub} {
		opts := []nats.Option{nats.Timeout(5 * time.Second),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})} // violations are read with LastError
		if user == "node" {
			// A region's nodes' inbox prefix: the hub sends the region
			// only the replies under it.
			opts = append(opts, nats.CustomInboxPrefix(region.InboxPrefix("ra")))
		}
		nc, err := nats.Connect(as(s, user), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns[user] = nc
	}
	kv := func(key string) string { return names.KVSubject(versions, key) }
	nodesStream := names.KVStream(bucketName("test", Nodes))
	mirrorCfg, _ := json.Marshal(region.ObjectMirror("data", "hub", 1))
	ops2 := []struct {
		login, name, subject string
		data                 []byte
		allowed              bool
	}{
		{"node", "account info", "$JS.API.INFO", nil, true},
		{"node", "the hub's account info", "$JS.hub.API.INFO", nil, true},
		{"node", "create the object mirror", "$JS.API.STREAM.CREATE.OBJ_data", mirrorCfg, true},
		{"node", "update the versions mirror", "$JS.API.STREAM.UPDATE." + names.KVStream(versions), []byte(`{}`), false},
		{"node", "write a version", kv("d"), []byte("{}"), false},
		{"node", "write a pin", kv(names.PinKey("d")), []byte("{}"), false},
		{"node", "write a pin through the mirror", "$JS.hub.API." + kv(names.PinKey("d")), []byte("{}"), false},
		{"node", "delete the hub's Object Store bucket", "$JS.hub.API.STREAM.DELETE.OBJ_data", nil, false},
		{"node", "delete the hub's versions bucket", "$JS.hub.API.STREAM.DELETE." + names.KVStream(versions), nil, false},
		{"node", "delete the region's nodes bucket", "$JS.API.STREAM.DELETE." + nodesStream, nil, false},
		{"node", "read another region", "$JS.rb.API.STREAM.INFO." + nodesStream, nil, false},
		{"node", "a version at the hub", "$JS.hub.API." + names.KVSubject(bucketName("test", Versions), "x"), []byte("{}"), false},
		{"client", "lookup", names.GetSubject("test", "d"), []byte("k"), true},
		{"client", "the hub's account info", "$JS.hub.API.INFO", nil, false},
		{"client", "create the object mirror", "$JS.API.STREAM.CREATE.OBJ_data", mirrorCfg, false},
		{"ops-ra", "its region's pin", kv(names.RegionPinKey("d", "ra")), []byte("{}"), true},
		{"ops-ra", "another region's pin", kv(names.RegionPinKey("d", "rb")), []byte("{}"), false},
		{"ops-ra", "the pin for all", kv(names.PinKey("d")), []byte("{}"), false},
		{"ops-ra", "a version", kv("d"), []byte("{}"), false},
		{"ops-ra", "its region's nodes", "$JS.ra.API.STREAM.INFO." + nodesStream, nil, true},
		{"ops-ra", "another region's nodes", "$JS.rb.API.STREAM.INFO." + nodesStream, nil, false},
		{"ops-ra", "delete its region's nodes bucket", "$JS.ra.API.STREAM.DELETE." + nodesStream, nil, false},
		{"ops", "the pin for all", kv(names.PinKey("d")), []byte("{}"), true},
		{"ops", "a region's pin", kv(names.RegionPinKey("d", "rb")), []byte("{}"), true},
		{"ops", "any region's nodes", "$JS.rb.API.STREAM.INFO." + nodesStream, nil, true},
		{"ops", "delete a region's nodes bucket", "$JS.ra.API.STREAM.DELETE." + nodesStream, nil, false},
		{"ops", "delete the versions bucket", "$JS.API.STREAM.DELETE." + names.KVStream(versions), nil, false},
		{"etl", "a version", kv("d2"), []byte("{}"), true},
		{"etl", "a pin", kv(names.PinKey("d2")), []byte("{}"), false},
		{"etl", "a region's nodes", "$JS.ra.API.STREAM.INFO." + nodesStream, nil, false},
		{"etl", "delete the Object Store bucket", "$JS.API.STREAM.DELETE.OBJ_data", nil, false},
	}
	for _, op := range ops2 {
		allowed, err := tryOp(conns[op.login], permOp{name: op.name, subject: op.subject, data: op.data})
		if err != nil {
			t.Errorf("%s, %s: %v", op.login, op.name, err)
			continue
		}
		if allowed != op.allowed {
			t.Errorf("%s, %s (%s): allowed %v, want %v", op.login, op.name, op.subject, allowed, op.allowed)
		}
	}
	// Nothing was lost.
	if b, err := hobs.GetBytes(ctx, "d/v1/part-0"); err != nil || string(b) != "hello" {
		t.Errorf("the hub's object: %q %v", b, err)
	}
	if e, err := hkv.Get(ctx, "d"); err != nil || string(e.Value()) != "v1" {
		t.Errorf("the hub's version: %v", err)
	}
	if _, err := hkv.Get(ctx, names.PinKey("d2")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the publisher's pin: %v", err)
	}
	waitFor(t, 5*time.Second, "the nodes' entries", hasValue(n2, Nodes, "n1", "n1"))
	// The node login may name another region's entry at the hub (its
	// permissions do not know its region), but the hub takes ra's entry
	// only from ra's leafnode login: the write goes unanswered (the hub
	// does not even tell the leafnode of interest in it).
	regions, err := admin.KeyValue(ctx, names.KVBucket("test", names.Regions))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conns["node"].Request("$JS.hub.API."+names.KVSubject(names.KVBucket("test", names.Regions), "rb"), []byte("rb"), time.Second); err == nil {
		t.Error("the hub took ra's write of rb's entry")
	}
	if _, err := regions.Get(ctx, "rb"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("rb's entry at the hub: %v", err)
	}
}
