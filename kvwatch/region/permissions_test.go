package region

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestLeafPermissions: with each region logging in to the hub's leafnode
// listener as its own user, allowed to send into the hub only
// HubLeafPublish(hub) (docs/SECURITY.md), a region's mirrors of the hub
// fill, the hub reads a region's buckets, and a region cannot reach
// another region's JetStream (not even to read it) nor write the hub's
// buckets; each region announces itself in the hub's bucket of regions,
// and cannot write another region's entry.
func TestLeafPermissions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*natstest.MirrorWait)
	defer cancel()
	leaf := natstest.FreePort(t)
	o := &server.Options{ServerName: "hub", JetStreamDomain: "hub"}
	o.LeafNode.Host, o.LeafNode.Port, o.LeafNode.NoAdvertise = "127.0.0.1", leaf, true
	// The hub's users (nats-server's authorization { users }), which its
	// leafnode listener also takes logins from: an operator without
	// limits, and one user per region.
	o.Users = []*server.User{{Username: "admin", Password: "pw-admin"}}
	for _, r := range []string{"ra", "rb"} {
		o.Users = append(o.Users, &server.User{Username: r, Password: "pw-" + r,
			Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: HubLeafPublish("hub", "c", r)},
				Subscribe: &server.SubjectPermission{Allow: HubLeafSubscribe(r)},
			}})
	}
	hub := natstest.RunServer(t, o)
	regionSrv := func(name string) *server.Server {
		c := DefaultConfig()
		c.Name, c.Hub = name, fmt.Sprintf("nats-leaf://%s:pw-%s@127.0.0.1:%d", name, name, leaf)
		remote, err := Remote(c)
		if err != nil {
			t.Fatal(err)
		}
		ro := &server.Options{ServerName: name, JetStreamDomain: name}
		ro.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
		ro.LeafNode.ReconnectInterval = 50 * time.Millisecond
		s := natstest.RunServer(t, ro)
		nodetest.WaitFor(t, 10*time.Second, name+"'s leafnode up", nodetest.True(func() bool { return s.NumLeafNodes() == 1 }))
		return s
	}
	ra, rb := regionSrv("ra"), regionSrv("rb")
	hjs := natstest.JetStream(t, strings.Replace(hub.ClientURL(), "nats://", "nats://admin:pw-admin@", 1))
	// The regions' nodes' connections, with their regions' inbox
	// prefixes (kvwatch sets them).
	ajs := natstest.JetStream(t, ra.ClientURL(), nats.CustomInboxPrefix(InboxPrefix("ra")))
	bjs := natstest.JetStream(t, rb.ClientURL(), nats.CustomInboxPrefix(InboxPrefix("rb")))

	hkv, err := hjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "spangle_c_versions"})
	if err != nil {
		t.Fatal(err)
	}
	hobs, err := hjs.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"})
	if err != nil {
		t.Fatal(err)
	}
	hkv.Put(ctx, "d", []byte("v1"))
	hobs.PutBytes(ctx, "d/v1/part-0", []byte("hello"))
	if _, err := bjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "spangle_c_nodes"}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureObjectMirror(ctx, ajs, "data", "hub", 1); err != nil {
		t.Fatal(err)
	}
	kv, err := EnsureVersionsMirror(ctx, ajs, VersionsMirror("spangle_c_versions", "hub", "", 1), "hub")
	if err != nil {
		t.Fatal(err)
	}
	obs, err := ajs.ObjectStore(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, natstest.MirrorWait, "ra's mirrors", func() error {
		if b, err := obs.GetBytes(ctx, "d/v1/part-0"); err != nil || string(b) != "hello" {
			return fmt.Errorf("object: %q, %v", b, err)
		}
		if e, err := kv.Get(ctx, "d"); err != nil || string(e.Value()) != "v1" {
			return fmt.Errorf("versions: %v", err)
		}
		return nil
	})

	// The hub reads rb's buckets through the leafnode (status --regions).
	hubToB, err := jetstream.NewWithDomain(hjs.Conn(), "rb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hubToB.KeyValue(ctx, "spangle_c_nodes"); err != nil {
		t.Errorf("the hub cannot read rb's bucket: %v", err)
	}

	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 500*time.Millisecond) }
	// ra reaches neither rb's JetStream nor the hub's writes.
	aToB, _ := jetstream.NewWithDomain(ajs.Conn(), "rb")
	c1, cancel1 := short()
	defer cancel1()
	if _, err := aToB.KeyValue(c1, "spangle_c_nodes"); err == nil {
		t.Error("ra reads rb's bucket")
	}
	c2, cancel2 := short()
	defer cancel2()
	if err := aToB.DeleteStream(c2, "KV_spangle_c_nodes"); err == nil {
		t.Error("ra deleted rb's bucket")
	}
	if _, err := bjs.KeyValue(ctx, "spangle_c_nodes"); err != nil {
		t.Errorf("rb's bucket: %v", err)
	}
	c3, cancel3 := short()
	defer cancel3()
	if _, err := kv.Put(c3, "d", []byte("forged")); err == nil { // nats.go sends it to the hub
		t.Error("ra wrote the hub's versions bucket through its mirror")
	}
	aToHub, _ := jetstream.NewWithDomain(ajs.Conn(), "hub")
	c4, cancel4 := short()
	defer cancel4()
	if err := aToHub.DeleteStream(c4, "OBJ_data"); err == nil {
		t.Error("ra deleted the hub's Object Store bucket")
	}
	if e, err := hkv.Get(ctx, "d"); err != nil || string(e.Value()) != "v1" {
		t.Errorf("the hub's versions entry: %v", err)
	}

	// Announcements: each region its own entry, listed at the hub; ra
	// may not write rb's (its entry through the hub's prefix is dropped
	// at the hub, so the request goes unanswered).
	ra2 := DefaultConfig()
	ra2.Name = "ra"
	rb2 := DefaultConfig()
	rb2.Name = "rb"
	if err := Announce(ctx, ajs.Conn(), ra2, "c", 5*time.Second); err != nil {
		t.Fatalf("ra announces: %v", err)
	}
	if err := Announce(ctx, bjs.Conn(), rb2, "c", time.Minute); err != nil {
		t.Fatalf("rb announces: %v", err)
	}
	if got, err := Regions(ctx, hjs, "c"); err != nil || fmt.Sprint(got) != "[ra rb]" {
		t.Errorf("the hub's regions: %q %v", got, err)
	}
	hregions, err := hjs.KeyValue(ctx, "spangle_c_regions")
	if err != nil {
		t.Fatal(err)
	}
	before, err := hregions.Get(ctx, "rb")
	if err != nil {
		t.Fatal(err)
	}
	c6, cancel6 := short()
	defer cancel6()
	if err := Announce(c6, ajs.Conn(), rb2, "c", time.Minute); err == nil {
		t.Error("ra wrote rb's entry")
	}
	if after, err := hregions.Get(ctx, "rb"); err != nil || after.Revision() != before.Revision() {
		t.Errorf("rb's entry after ra's attempt: %v", err)
	}
	// An entry lives its time to live: a region gone quiet drops out.
	if err := Announce(ctx, ajs.Conn(), ra2, "c", time.Second); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, 10*time.Second, "ra's entry expired", func() error {
		if got, err := Regions(ctx, hjs, "c"); err != nil || fmt.Sprint(got) != "[rb]" {
			return fmt.Errorf("the hub's regions: %q %v", got, err)
		}
		return nil
	})
	// What the hub sends into a region: ra listens for requests meant
	// for rb (to answer them in its place) and hears none, while those
	// addressed to ra reach it. Messages cross ra's leafnode link in
	// order, so a sentinel sent after the request to rb tells that it was
	// not delivered.
	spy, err := nats.Connect(ra.ClientURL(), nats.Timeout(natstest.ConnectTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	forged, err := spy.SubscribeSync("$JS.rb.API.>")
	if err != nil {
		t.Fatal(err)
	}
	sentinel, err := spy.SubscribeSync("$JS.ra.API.sentinel")
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	hnc := hjs.Conn()
	nodetest.WaitFor(t, 10*time.Second, "ra's interest at the hub", func() error {
		if err := hnc.Publish("$JS.ra.API.sentinel", nil); err != nil {
			return err
		}
		_, err := sentinel.NextMsg(50 * time.Millisecond)
		return err
	})
	if err := hnc.Publish("$JS.rb.API.STREAM.INFO.KV_spangle_c_nodes", []byte("for rb")); err != nil {
		t.Fatal(err)
	}
	if err := hnc.Publish("$JS.ra.API.sentinel", []byte("after")); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := sentinel.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("the sentinel after the request to rb: %v", err)
		}
		if string(m.Data) == "after" {
			break
		}
	}
	if m, err := forged.NextMsg(0); err == nil {
		t.Errorf("ra received %s, a request for rb", m.Subject)
	}
	// Nor does rb hear what is meant for ra or for the hub's clients
	// (issue 32): replies to ra's nodes and to the hub's own clients.
	bspy, err := nats.Connect(rb.ClientURL(), nats.Timeout(natstest.ConnectTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer bspy.Close()
	snoop := make(chan *nats.Msg, 1024)
	for _, subject := range []string{">", "_INBOX.>", "$JS.M.>"} {
		if _, err := bspy.ChanSubscribe(subject, snoop); err != nil {
			t.Fatal(err)
		}
	}
	bsentinel, err := bspy.SubscribeSync(InboxPrefix("rb") + ".sentinel")
	if err != nil {
		t.Fatal(err)
	}
	if err := bspy.Flush(); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, 10*time.Second, "rb's interest at the hub", func() error {
		if err := hnc.Publish(InboxPrefix("rb")+".sentinel", nil); err != nil {
			return err
		}
		_, err := bsentinel.NextMsg(50 * time.Millisecond)
		return err
	})
	if err := Announce(ctx, ajs.Conn(), ra2, "c", time.Minute); err != nil { // a reply to ra's node
		t.Fatal(err)
	}
	if _, err := hjs.AccountInfo(ctx); err != nil { // a reply to the hub's client
		t.Fatal(err)
	}
	if _, err := hkv.Put(ctx, "d", []byte("v2")); err != nil { // a delivery to ra's mirror
		t.Fatal(err)
	}
	nodetest.WaitFor(t, 30*time.Second, "v2 in ra's mirror", func() error {
		if e, err := kv.Get(ctx, "d"); err != nil || string(e.Value()) != "v2" {
			return fmt.Errorf("versions: %v", err)
		}
		return nil
	})
	if err := hnc.Publish(InboxPrefix("rb")+".sentinel", []byte("after")); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := bsentinel.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("the sentinel after ra's traffic: %v", err)
		}
		if string(m.Data) == "after" {
			break
		}
	}
	for len(snoop) > 0 {
		m := <-snoop
		if strings.HasPrefix(m.Subject, "_INBOX.") && !strings.HasPrefix(m.Subject, InboxPrefix("rb")+".") {
			t.Errorf("rb heard %s, meant for someone else", m.Subject)
		}
	}
	// Bad credentials: the link never comes up, and the check says so
	// and what to look at.
	c := DefaultConfig()
	c.Name, c.Hub = "rc", fmt.Sprintf("nats-leaf://rc:wrong@127.0.0.1:%d", leaf)
	remote, err := Remote(c)
	if err != nil {
		t.Fatal(err)
	}
	ro := &server.Options{ServerName: "rc", JetStreamDomain: "rc"}
	ro.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
	rc := natstest.RunServer(t, ro)
	c5, cancel5 := context.WithTimeout(ctx, time.Second)
	defer cancel5()
	err = CheckHub(c5, natstest.JetStream(t, rc.ClientURL()).Conn(), c, func() int { return rc.NumLeafNodes() })
	if err == nil || !strings.Contains(err.Error(), "region.hub_creds") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("bad credentials: %v; want the keys to check, and no password", err)
	}
}
