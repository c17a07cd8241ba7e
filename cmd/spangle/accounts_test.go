package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
)

// accountsConfig returns the accounts block spangle nats-permissions
// --accounts prints, with a login in each account: "<role>" with
// password "<role>-pw" and the permissions nats-permissions prints for
// it, and the nodes' responder login, the NKey whose seed is in the file
// it returns (for [nats] lookup_nkey).
func accountsConfig(t *testing.T, bin string) (block, lookupSeed string) {
	t.Helper()
	block = permissionsBlock(t, bin, "--accounts")
	key, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := key.PublicKey()
	seed, _ := key.Seed()
	lookupSeed = writeFile(t, t.TempDir(), "lookups.nk", string(seed))
	for _, role := range []string{"node", "client", "responder", "operator", "publisher"} {
		args := []string{"--accounts", role}
		if role == "node" {
			args = args[1:]
		}
		login := fmt.Sprintf("user: %s, password: %s-pw", role, role)
		if role == "responder" {
			login = "nkey: " + pub
		}
		user := fmt.Sprintf("{ %s\n%s }", login, permissionsBlock(t, bin, args...))
		comment := fmt.Sprintf("# the %s logins, with the permissions of: spangle nats-permissions %s", role, role)
		if !strings.Contains(block, comment) {
			t.Fatalf("no place for the %s logins in:\n%s", role, block)
		}
		block = strings.Replace(block, comment, user, 1)
	}
	return block, lookupSeed
}

// TestAccountsExternal runs an external nats-server process configured
// with the accounts block and the permissions spangle nats-permissions
// --accounts prints, a spangle serve node logged in as the node role,
// spangle publish as the publisher, spangle get as the client, spangle
// rollback, activate and status as the operator: all work, and the
// server logs no violation. Then each role replays the attacks of issue
// 32 that its login allows (a lookup whose reply names the Object Store
// stream's deletion or a pin, a direct get copying an announcement onto a
// pin, consumer creation): the bucket, the versions and the pins are
// intact, and the node serves on.
func TestAccountsExternal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	const keys = 20
	bin, natsBin := buildBinary(t), buildNATSServer(t)
	dir := t.TempDir()
	port := natstest.FreePort(t)
	srv := &natsProc{name: "nats", url: fmt.Sprintf("nats://127.0.0.1:%d", port),
		storeDir: filepath.Join(dir, "store"), logPath: filepath.Join(dir, "nats.log")}
	accounts, lookupSeed := accountsConfig(t, bin)
	srv.args = []string{"-c", writeFile(t, dir, "nats.conf", fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n%s",
		port, srv.storeDir, accounts))}
	srv.start(t, natsBin)
	srv.cleanup(t)
	as := func(role string) string {
		return strings.Replace(srv.url, "nats://", "nats://"+role+":"+role+"-pw@", 1)
	}

	src := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		writeVersion(t, src, "d", v, 2, keys)
	}
	publish := publisher(t, bin, src, "nats-object://data", as("publisher"))
	waitFor(t, "publish v1 as the publisher", func() error { return publish("v1") })
	n := startRegionNode(t, bin, 1, "data", fmt.Sprintf("require_success_file = true\n[nats]\nurl = %q\nlookup_nkey = %q\nentry_ttl = \"2s\"\n", as("node"), lookupSeed))
	waitFor(t, "the node serves v1", func() error { return readAll(n.base, "v1", keys) })
	if err := publish("v2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node serves v2", func() error { return readAll(n.base, "v2", keys) })
	waitFor(t, "a lookup as the client", func() error {
		if code, stdout, stderr := runCLI(t, bin, "get", "--nats", as("client"), "d", "key-3"); code != 0 || stdout != "v2:3\n" {
			return fmt.Errorf("exit %d %q %s", code, stdout, stderr)
		}
		return nil
	})
	if code, stdout, stderr := runCLI(t, bin, "rollback", "--nats", as("operator"), "d", "v1"); code != 0 {
		t.Fatalf("rollback as the operator: exit %d\n%s%s", code, stdout, stderr)
	}
	waitFor(t, "the node back on v1", func() error { return readAll(n.base, "v1", keys) })
	if code, stdout, stderr := runCLI(t, bin, "status", "--nats", as("operator")); code != 0 || !strings.Contains(stdout, "d") {
		t.Errorf("status as the operator: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runCLI(t, bin, "activate", "--nats", as("operator"), "--latest", "d"); code != 0 {
		t.Fatalf("activate --latest as the operator: exit %d\n%s%s", code, stdout, stderr)
	}
	waitFor(t, "the node on v2 again", func() error { return readAll(n.base, "v2", keys) })
	if b, err := os.ReadFile(srv.logPath); err != nil || strings.Contains(string(b), "Violation") {
		t.Errorf("the server's log has a violation (%v):\n%s", err, b)
	}

	// The attacks.
	versions := names.KVBucket("spangle", names.Versions)
	vs := names.KVStream(versions)
	pin := names.KVSubject(versions, names.PinKey("d"))
	conn := func(role string) *nats.Conn {
		nc, err := nats.Connect(as(role), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	client, pub, ops := conn("client"), conn("publisher"), conn("operator")
	// state is what the attacks must leave as it is: the last message of
	// the announcement and of the pin, the streams' consumer counts and
	// the Object Store stream's existence, read through the operator's
	// and the publisher's imports.
	state := func() string {
		var b strings.Builder
		for _, subj := range []string{names.KVSubject(versions, "d"), pin} {
			m, err := ops.Request(names.ImportedAPI+".DIRECT.GET."+vs+"."+subj, nil, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s: seq %s status %s op %s %q\n", subj, m.Header.Get("Nats-Sequence"), m.Header.Get("Status"), m.Header.Get("KV-Operation"), m.Data)
		}
		for _, q := range []struct {
			nc      *nats.Conn
			subject string
		}{{ops, names.ImportedAPI + ".STREAM.INFO." + vs}, {pub, names.ImportedAPI + ".STREAM.INFO.OBJ_data"}} {
			m, err := q.nc.Request(q.subject, nil, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var info struct {
				Error *struct{ Description string }
				State struct {
					Consumers int `json:"consumer_count"`
				}
			}
			if err := json.Unmarshal(m.Data, &info); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s: error %v consumers %d\n", q.subject, info.Error, info.State.Consumers)
		}
		return b.String()
	}
	before := state()
	for _, reply := range []string{"$JS.API.STREAM.DELETE.OBJ_data", "$JS.API.STREAM.DELETE." + vs, pin} {
		client.PublishRequest(names.GetSubject("spangle", "d"), reply, []byte("no-such-key"))                                                    //nolint:errcheck // checked below
		client.PublishRequest("$JS.API.DIRECT.GET."+vs, reply, []byte(`{"last_by_subj":"`+names.KVSubject(versions, "d")+`"}`))                  //nolint:errcheck // checked below
		pub.PublishRequest(names.ImportedAPI+".DIRECT.GET."+vs+"."+names.KVSubject(versions, "d"), reply, nil)                                   //nolint:errcheck // checked below
		ops.PublishRequest(names.ImportedAPI+".DIRECT.GET."+vs+"."+names.KVSubject(versions, "d"), reply, nil)                                   //nolint:errcheck // checked below
		client.PublishRequest("$JS.API.CONSUMER.CREATE."+vs+".evil", reply, []byte(`{"stream_name":"`+vs+`","config":{"durable_name":"evil"}}`)) //nolint:errcheck // refused
	}
	for _, nc := range []*nats.Conn{client, pub, ops} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Answers to the attacker's own requests come after those to the
	// attacks: the cluster's state is read once they are in.
	if after := state(); after != before {
		t.Errorf("the attacks changed the cluster:\n%s\nwas\n%s", after, before)
	}
	if err := readAll(n.base, "v2", keys); err != nil {
		t.Errorf("the node after the attacks: %v", err)
	}
}
