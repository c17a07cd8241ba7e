package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/kvwatch/region"
)

// permissionsBlock runs spangle nats-permissions with args and returns
// the block it prints, for a user of a nats-server configuration.
func permissionsBlock(t *testing.T, bin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, bin, append([]string{"nats-permissions", "--buckets", "data"}, args...)...)
	if code != 0 {
		t.Fatalf("nats-permissions %q: exit %d: %s", args, code, stderr)
	}
	return stdout
}

// refused reports whether the server refuses nc a request to subject:
// its permissions violation for the subject arrives before the flush's
// answer.
func refused(nc *nats.Conn, subject string) (bool, error) {
	before := nc.LastError()
	if err := nc.PublishRequest(subject, nc.NewRespInbox(), []byte("{}")); err != nil {
		return false, err
	}
	if err := nc.Flush(); err != nil {
		return false, err
	}
	err := nc.LastError()
	return err != nil && err != before && strings.Contains(err.Error(), "Permissions Violation") &&
		strings.Contains(err.Error(), `"`+subject+`"`), nil
}

// TestRegionLeastPrivilege runs a hub and region rb's own NATS server as
// processes, every login with exactly the permissions spangle
// nats-permissions prints (and the region's leafnode login with
// region.HubLeafPublish and HubLeafSubscribe), and two spangle serve nodes of rb logged in as
// the node role:
//
//   - the publisher publishes at the hub, and both nodes serve each
//     version (their mirrors of the hub's buckets fill; sharding with
//     replication 1, so membership and proxying inside the region work);
//   - a client of the region looks a key up over NATS;
//   - rb's operator rolls rb back at the hub (the verdict read from rb
//     through the hub) and sees it in status --regions, which finds rb
//     by its announcement, but may neither pin another region nor pin
//     for all;
//   - the node login may neither delete the hub's Object Store bucket
//     nor write a pin, and the nodes met no permissions violation.
//
// It runs twice: with the hub's logins in one account (the lists above),
// and with the hub's accounts (spangle nats-permissions --accounts
// --hub-domain hub --regions rb: rb's leafnode login, the publisher and
// rb's operator each in an account of their own, the hub's consumers
// made by spangle region-consumers and the nodes' mirrors using them,
// [region] hub_consumers).
func TestRegionLeastPrivilege(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	t.Run("one account", func(t *testing.T) { testRegionLeastPrivilege(t, false) })
	t.Run("accounts", func(t *testing.T) { testRegionLeastPrivilege(t, true) })
}

func testRegionLeastPrivilege(t *testing.T, accounts bool) {
	const keys = 20
	bin, natsBin := buildBinary(t), buildNATSServer(t)
	quoted := func(subjects []string) string {
		q := make([]string, len(subjects))
		for i, s := range subjects {
			q[i] = fmt.Sprintf("%q", s)
		}
		return strings.Join(q, ", ")
	}

	hubDir := t.TempDir()
	hubPort, leafPort := natstest.FreePort(t), natstest.FreePort(t)
	hub := &natsProc{name: "hub", url: fmt.Sprintf("nats://127.0.0.1:%d", hubPort),
		storeDir: filepath.Join(hubDir, "store"), logPath: filepath.Join(hubDir, "nats.log")}
	users := fmt.Sprintf(`authorization {
  users = [
    { user: rb, password: rb-pw, permissions: { publish: { allow: [ %s ] }, subscribe: { allow: [ %s ] } } }
    { user: etl, password: etl-pw
%s    }
    { user: ops, password: ops-pw
%s    }
  ]
}
`, quoted(region.HubLeafPublish("hub", "spangle", "rb")), quoted(region.HubLeafSubscribe("rb")),
		permissionsBlock(t, bin, "--hub-domain", "hub", "publisher"),
		permissionsBlock(t, bin, "--hub-domain", "hub", "--region", "rb", "operator"))
	if accounts {
		users = permissionsBlock(t, bin, "--accounts", "--hub-domain", "hub", "--regions", "rb")
		users = fillAccount(t, users, names.ClusterAccount("spangle"), "{ user: admin, password: admin-pw }")
		users = fillAccount(t, users, names.RegionAccount("spangle", "rb"), hubUser(t, bin, "rb", "--accounts", "--hub-domain", "hub", "--region", "rb", "region"))
		users = fillAccount(t, users, names.RoleAccount("spangle", "operator", "rb"), hubUser(t, bin, "ops", "--accounts", "--hub-domain", "hub", "--region", "rb", "operator"))
		users = fillAccount(t, users, names.RoleAccount("spangle", "publisher", "data"), hubUser(t, bin, "etl", "--accounts", "--hub-domain", "hub", "publisher"))
	}
	hub.args = []string{"-c", writeFile(t, hubDir, "hub.conf", fmt.Sprintf(`server_name: hub
listen: "127.0.0.1:%d"
jetstream { domain: hub, store_dir: %q }
leafnodes { listen: "127.0.0.1:%d", no_advertise: true }
%s`, hubPort, hub.storeDir, leafPort, users))}
	hub.start(t, natsBin)
	hub.cleanup(t)

	rbDir := t.TempDir()
	rbPort := natstest.FreePort(t)
	rb := &natsProc{name: "rb", url: fmt.Sprintf("nats://127.0.0.1:%d", rbPort),
		storeDir: filepath.Join(rbDir, "store"), logPath: filepath.Join(rbDir, "nats.log")}
	rb.args = []string{"-c", writeFile(t, rbDir, "rb.conf", fmt.Sprintf(`server_name: rb
listen: "127.0.0.1:%d"
jetstream { domain: rb, store_dir: %q }
leafnodes {
  remotes: [ { url: "nats-leaf://rb:rb-pw@127.0.0.1:%d", deny_imports: ["spangle.>", "$KV.>"], deny_exports: ["spangle.>", "$KV.>"] } ]
}
authorization {
  users = [
    { user: node, password: node-pw
%s    }
    { user: app, password: app-pw
%s    }
  ]
}
`, rbPort, rb.storeDir, leafPort,
		permissionsBlock(t, bin, "--hub-domain", "hub", "node"),
		permissionsBlock(t, bin, "--hub-domain", "hub", "client")))}
	rb.start(t, natsBin)
	rb.cleanup(t)
	as := func(p *natsProc, user string) string {
		return strings.Replace(p.url, "nats://", "nats://"+user+":"+user+"-pw@", 1)
	}

	src := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		writeVersion(t, src, "d", v, 3, keys)
	}
	publish := publisher(t, bin, src, "nats-object://data", as(hub, "etl"))
	waitFor(t, "publish v1 as the publisher", func() error { return publish("v1") })
	nodeConf := func(id int) string { return regionBNode(id, as(rb, "node")) }
	if accounts {
		code, stdout, stderr := runCLI(t, bin, "region-consumers", "--nats", as(hub, "admin"), "--buckets", "data", "rb")
		if code != 0 {
			t.Fatalf("region-consumers: exit %d\n%s%s", code, stdout, stderr)
		}
		nodeConf = func(id int) string {
			return strings.Replace(regionBNode(id, as(rb, "node")), "[region]\n", "[region]\nhub_consumers = true\n", 1)
		}
	}
	b1 := startRegionNode(t, bin, 1, "data", nodeConf(1))
	b2 := startRegionNode(t, bin, 2, "data", nodeConf(2))
	nodes := []*clusterProc{b1, b2}
	for _, n := range nodes {
		waitMirror(t, "rb serves v1", func() error { return readAll(n.base, "v1", keys) })
	}
	if p, err := proxiedKeys(b1.base, "v1", keys); err != nil || p == 0 {
		t.Errorf("rb node 1: %d of %d keys proxied (%v): want some, inside the region", p, keys, err)
	}
	if code, stdout, stderr := runCLI(t, bin, "get", "--nats", as(rb, "app"), "d", "key-3"); code != 0 || stdout != "v1:3\n" {
		t.Errorf("lookup as the region's client: exit %d %q %s", code, stdout, stderr)
	}
	if err := publish("v2"); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitMirror(t, "rb serves v2", func() error { return readAll(n.base, "v2", keys) })
	}

	// rb's operator.
	if code, stdout, stderr := runCLI(t, bin, "rollback", "--region", "rb", "--nats", as(hub, "ops"), "d", "v1"); code != 0 {
		t.Fatalf("rollback --region rb as rb's operator: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, n := range nodes {
		waitMirror(t, "rb back at v1", func() error { return readAll(n.base, "v1", keys) })
	}
	waitFor(t, "status --regions as rb's operator", func() error {
		code, stdout, stderr := runCLI(t, bin, "status", "--regions", "--json", "--timeout", "3s", "--nats", as(hub, "ops"))
		if code != 0 || !strings.Contains(stdout, `"connected": true`) || strings.Count(stdout, `"id":`) != 2 {
			return fmt.Errorf("exit %d: %s%s", code, stdout, stderr)
		}
		return nil
	})
	// Up to here every login did only what it may: neither server logged
	// a violation (the nodes, the publisher, the operator, the region's
	// mirrors through the leafnode).
	for _, p := range []*natsProc{hub, rb} {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "Violation") {
			t.Errorf("%s's log has a violation:\n%s", p.name, b)
		}
	}
	for _, args := range [][]string{{"rollback", "--region", "ra", "d", "v1"}, {"activate", "d", "v2"}} {
		args = append(args[:1], append([]string{"--timeout", "2s", "--nats", as(hub, "ops")}, args[1:]...)...)
		if code, _, stderr := runCLI(t, bin, args...); code == 0 || !strings.Contains(stderr, "Permissions Violation") {
			t.Errorf("%q as rb's operator: exit %d, want refused\n%s", args, code, stderr)
		}
	}

	// The node login's limits, and no violation met by the nodes.
	nc, err := nats.Connect(as(rb, "node"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, subject := range []string{
		"$JS.hub.API.STREAM.DELETE.OBJ_data",
		"$JS.hub.API.STREAM.PURGE.KV_spangle_spangle_versions",
		"$KV.spangle_spangle_versions.d.pin",
		"$JS.hub.API.$KV.spangle_spangle_versions.d.pin",
	} {
		if ok, err := refused(nc, subject); err != nil || !ok {
			t.Errorf("the node login's %s: refused %v (%v)", subject, ok, err)
		}
	}
	for _, n := range nodes {
		if err := readAll(n.base, "v1", keys); err != nil {
			t.Errorf("node %d after the refused requests: %v", n.id, err)
		}
		if strings.Contains(strings.ToLower(n.log()), "permissions violation") {
			t.Errorf("node %d met a permissions violation:\n%s", n.id, tail(n.log(), 4000))
		}
	}
}
