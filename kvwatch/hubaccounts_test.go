package kvwatch

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/kvwatch/region"
	"github.com/spangledb/spangle/node/nodetest"
)

// fillUsers puts users into the accounts block HubAccountsConfig (or
// AccountsConfig) printed: users[account] is the body of that account's
// users list, in place of its comment.
func fillUsers(t *testing.T, block string, users map[string]string) string {
	t.Helper()
	for acct, u := range users {
		head := fmt.Sprintf("  %q: {\n", acct)
		i := strings.Index(block, head)
		if i < 0 {
			t.Fatalf("no account %s in\n%s", acct, block)
		}
		j := i + strings.Index(block[i:], "users: [\n") + len("users: [\n")
		block = block[:j] + u + "\n" + block[j:]
	}
	return block
}

// leafUser is a user entry with the permissions PermissionsConfig gives
// role in scope s.
func leafUser(t *testing.T, name, role string, s Scope) string {
	t.Helper()
	p, err := PermissionsConfig(role, s)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("{ user: %s, password: pw-%s\n%s}", name, name, p)
}

// hubWithRegions runs a hub whose accounts are HubAccountsConfig's for
// regions ra and rb, each region's leafnode login in its own account,
// and the two regions' servers as its leafnodes, each with the hub's
// consumers made for it. It returns the hub, the regions and the hub's
// administrator's JetStream (the cluster's account).
func hubWithRegions(t *testing.T, ctx context.Context) (hub *server.Server, regions map[string]*server.Server, admin jetstream.JetStream) {
	t.Helper()
	s := Scope{Cluster: "c", HubDomain: "hub", ObjectBuckets: []string{"data"}, Accounts: true}
	block, err := HubAccountsConfig(s, []string{"ra", "rb"})
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]string{names.ClusterAccount("c"): "{ user: admin, password: pw-admin }"}
	for _, r := range []string{"ra", "rb"} {
		rs := s
		rs.Region = r
		users[names.RegionAccount("c", r)] = leafUser(t, r, RoleRegion, rs)
		users[names.RoleAccount("c", RoleOperator, r)] = leafUser(t, "ops-"+r, RoleOperator, rs)
	}
	users[names.RoleAccount("c", RoleOperator, "")] = leafUser(t, "ops", RoleOperator, s)
	users[names.RoleAccount("c", RolePublisher, "data")] = leafUser(t, "etl", RolePublisher, s)
	block = fillUsers(t, block, users)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	leaf := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	o := &server.Options{}
	if err := o.ProcessConfigString(fmt.Sprintf("server_name: hub\njetstream { domain: hub }\nleafnodes { listen: \"127.0.0.1:%d\", no_advertise: true }\n%s", leaf, block)); err != nil {
		t.Fatalf("%v\n%s", err, block)
	}
	hub = natstest.RunServer(t, o)
	admin = natstest.JetStream(t, strings.Replace(hub.ClientURL(), "nats://", "nats://admin:pw-admin@", 1))
	if _, err := admin.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "spangle_c_versions"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"}); err != nil {
		t.Fatal(err)
	}
	if err := region.EnsureRegionsBucket(ctx, admin, "c"); err != nil {
		t.Fatal(err)
	}
	regions = map[string]*server.Server{}
	for _, r := range []string{"ra", "rb"} {
		if _, err := region.EnsureHubConsumers(ctx, admin, r, region.MirroredStreams("c", []string{"data"})); err != nil {
			t.Fatal(err)
		}
		c := region.DefaultConfig()
		c.Name, c.HubConsumers, c.Hub = r, true, fmt.Sprintf("nats-leaf://%s:pw-%s@127.0.0.1:%d", r, r, leaf)
		remote, err := region.Remote(c)
		if err != nil {
			t.Fatal(err)
		}
		ro := &server.Options{ServerName: r, JetStreamDomain: r}
		ro.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
		ro.LeafNode.ReconnectInterval = 50 * time.Millisecond
		rs := natstest.RunServer(t, ro)
		nodetest.WaitFor(t, 10*time.Second, r+"'s leafnode up", nodetest.True(func() bool { return rs.NumLeafNodes() == 1 }))
		js := natstest.JetStream(t, rs.ClientURL(), nats.CustomInboxPrefix(region.InboxPrefix(r)))
		// A new mirror first resets its consumer at the hub: until the
		// leafnode carries the hub's interest, nodes retry, as here.
		nodetest.WaitFor(t, natstest.MirrorWait, r+"'s mirrors made", func() error {
			if err := c.EnsureObjectMirror(ctx, js, "data", 1); err != nil {
				return err
			}
			_, err := region.EnsureVersionsMirror(ctx, js, c.VersionsMirror("spangle_c_versions", "", 1), "hub")
			return err
		})
		if err := region.CheckHub(ctx, js.Conn(), c, nil); err != nil {
			t.Errorf("%s: %v", r, err)
		}
		if err := region.Announce(ctx, js.Conn(), c, "c", 5*time.Second); err != nil {
			t.Errorf("%s: %v", r, err)
		}
		regions[r] = rs
	}
	return hub, regions, admin
}

// TestHubAccounts: with HubAccountsConfig at the hub and regions whose
// mirrors use the hub's consumers, each region's mirrors fill and keep
// following the hub, the region checks and announces itself at the hub,
// and the hub's operators read the regions through their accounts.
func TestHubAccounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*natstest.MirrorWait)
	defer cancel()
	hub, regions, admin := hubWithRegions(t, ctx)
	kv, err := admin.KeyValue(ctx, "spangle_c_versions")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := kv.Put(ctx, "d", fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
		for r, rs := range regions {
			js := natstest.JetStream(t, rs.ClientURL())
			nodetest.WaitFor(t, natstest.MirrorWait, r+" mirrors v"+fmt.Sprint(i), func() error {
				rkv, err := js.KeyValue(ctx, "spangle_c_versions")
				if err != nil {
					return err
				}
				e, err := rkv.Get(ctx, "d")
				if err != nil {
					return err
				}
				if string(e.Value()) != fmt.Sprintf("v%d", i) {
					return fmt.Errorf("value %q", e.Value())
				}
				return nil
			})
		}
	}
	ops := natstest.JetStream(t, strings.Replace(hub.ClientURL(), "nats://", "nats://ops:pw-ops@", 1))
	for r := range regions {
		m, err := region.MirrorState(ctx, ops.Conn(), r, "KV_spangle_c_versions")
		if err != nil || !m.Connected {
			t.Errorf("operator reads %s's mirror: %+v %v", r, m, err)
		}
	}
}

// TestHubAccountsRegionWiped: a region whose mirror of the versions bucket
// is lost (a wiped data dir, its store gone) and made again gets every
// entry of the hub back through the hub's consumer, not only those after
// the consumer's acknowledged position.
func TestHubAccountsRegionWiped(t *testing.T) {
	const entries = 400
	ctx, cancel := context.WithTimeout(context.Background(), 3*natstest.MirrorWait)
	defer cancel()
	_, regions, admin := hubWithRegions(t, ctx)
	kv, err := admin.KeyValue(ctx, "spangle_c_versions")
	if err != nil {
		t.Fatal(err)
	}
	// Enough bytes that the hub's consumer is acknowledged by flow
	// control while the mirror fills.
	value := make([]byte, 64<<10)
	for i := range entries {
		if _, err := kv.Put(ctx, fmt.Sprintf("k%d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	js := natstest.JetStream(t, regions["ra"].ClientURL())
	count := func() (uint64, error) {
		s, err := js.Stream(ctx, "KV_spangle_c_versions")
		if err != nil {
			return 0, err
		}
		return s.CachedInfo().State.Msgs, nil
	}
	nodetest.WaitFor(t, natstest.MirrorWait, "ra's mirror filled", func() error {
		n, err := count()
		if err != nil || n != entries {
			return fmt.Errorf("%d %v", n, err)
		}
		return nil
	})
	if err := js.DeleteStream(ctx, "KV_spangle_c_versions"); err != nil {
		t.Fatal(err)
	}
	c := region.DefaultConfig()
	c.Name, c.HubConsumers = "ra", true
	if _, err := region.EnsureVersionsMirror(ctx, js, c.VersionsMirror("spangle_c_versions", "", 1), "hub"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "after", []byte("x")); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, natstest.MirrorWait, "ra's new mirror has every entry", func() error {
		s, err := js.Stream(ctx, "KV_spangle_c_versions")
		if err != nil {
			return err
		}
		st := s.CachedInfo().State
		if st.Msgs != entries+1 {
			var missing []uint64
			for q := uint64(1); q <= st.LastSeq && len(missing) < 5; q++ {
				if _, err := s.GetMsg(ctx, q); err != nil {
					missing = append(missing, q)
				}
			}
			return fmt.Errorf("missing %v; %d msgs first %d last %d; mirror %+v", missing, st.Msgs, st.FirstSeq, st.LastSeq, s.CachedInfo().Mirror)
		}
		return nil
	})
}
