package kvwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
)

// permOp is one thing a login may try: a request (JetStream API call,
// JetStream publish, lookup) or a subscription.
type permOp struct {
	name    string
	subject string
	data    []byte
	hdr     nats.Header
	sub     bool     // a subscription, not a request
	roles   []string // the roles that may do it
}

// TestRolePermissions logs in as each role on a real embedded server
// holding the cluster's buckets and two Object Store buckets (the
// publisher's "data" and someone else's "other"), tries every JetStream
// API operation on every bucket's stream, both as the cluster's account
// names it ($JS.API) and as a publisher's or operator's account imports
// it (names.ImportedAPI), the KV writes of each key kind, Object Store
// writes, lookups and answering them, and checks that exactly the roles
// the table names may do each. A refused operation
// shows as the server's permissions violation; an allowed one gets an
// answer (an API error such as "stream not found" included: the server
// let it through).
func TestRolePermissions(t *testing.T) {
	c := testConfig(t)
	c.EmbeddedUsers = []User{
		{Name: "node", Password: "pw", Role: RoleNode, Buckets: []string{"data"}},
		{Name: "operator", Password: "pw", Role: RoleOperator},
		{Name: "publisher", Password: "pw", Role: RolePublisher, Buckets: []string{"data"}},
		{Name: "client", Password: "pw", Role: RoleClient},
	}
	k := startKV(t, c)
	ctx := ctxT(t)
	admin := k.JetStream() // the node's own login: unrestricted
	for _, b := range []string{"data", "other"} {
		obs, err := admin.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := obs.PutBytes(ctx, "db/v1/part-0", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.Put(ctx, Versions, names.VersionKey("db"), []byte(`{"version":"v1"}`)); err != nil {
		t.Fatal(err)
	}

	all := []string{RoleNode, RoleOperator, RolePublisher, RoleClient}
	none := []string{}
	node := []string{RoleNode}
	mapReaders := []string{RoleNode, RoleOperator, RoleClient}
	api := names.APIPrefix("")
	imp := names.ImportedAPI // the publisher's and the operator's view of the cluster's API
	vs := names.KVStream(names.KVBucket("test", names.Versions))
	var ops []permOp
	streams := []struct {
		name                            string
		read, directGet, create, update []string
		impInfo, impCreate, impPurge    []string
	}{
		{names.KVStream(names.KVBucket("test", names.Nodes)), node, mapReaders, node, node, none, none, none},
		{names.KVStream(names.KVBucket("test", names.Partitions)), node, mapReaders, node, node, none, none, none},
		{vs, node, mapReaders, node, node, []string{RoleOperator, RolePublisher}, []string{RolePublisher}, none},
		{names.ObjectStream("data"), node, node, none, none, []string{RolePublisher}, []string{RolePublisher}, []string{RolePublisher}},
		{names.ObjectStream("other"), none, none, none, none, none, none, none},
		{"EVIL", none, none, none, none, none, none, none},
	}
	for _, st := range streams {
		cfg := []byte(`{}`)
		if info, err := admin.Stream(ctx, st.name); err == nil {
			cfg, _ = json.Marshal(info.CachedInfo().Config)
		}
		ops = append(ops,
			permOp{name: "info " + st.name, subject: api + ".STREAM.INFO." + st.name, roles: st.read},
			permOp{name: "create " + st.name, subject: api + ".STREAM.CREATE." + st.name, data: cfg, roles: st.create},
			permOp{name: "update " + st.name, subject: api + ".STREAM.UPDATE." + st.name, data: cfg, roles: st.update},
			permOp{name: "consumer create " + st.name, subject: api + ".CONSUMER.CREATE." + st.name + ".probe.>",
				data: []byte(`{"stream_name":"` + st.name + `","config":{"name":"probe","filter_subject":">","ack_policy":"none","inactive_threshold":1000000000}}`), roles: st.read},
			permOp{name: "consumer delete " + st.name, subject: api + ".CONSUMER.DELETE." + st.name + ".someone-elses", roles: st.read},
			permOp{name: "direct get " + st.name, subject: api + ".DIRECT.GET." + st.name, data: []byte(`{"seq":1}`), roles: st.directGet},
			permOp{name: "msg get " + st.name, subject: api + ".STREAM.MSG.GET." + st.name, data: []byte(`{"seq":1}`), roles: st.read},
			permOp{name: "msg delete " + st.name, subject: api + ".STREAM.MSG.DELETE." + st.name, data: []byte(`{"seq":1}`), roles: none},
			permOp{name: "durable create " + st.name, subject: api + ".CONSUMER.DURABLE.CREATE." + st.name + ".d", data: []byte(`{}`), roles: none},
			permOp{name: "list consumers " + st.name, subject: api + ".CONSUMER.LIST." + st.name, roles: none},
			permOp{name: "purge " + st.name, subject: api + ".STREAM.PURGE." + st.name, roles: none},
			// The imported API: what a publisher's or an operator's account
			// reaches of the cluster's.
			permOp{name: "imported info " + st.name, subject: imp + ".STREAM.INFO." + st.name, roles: st.impInfo},
			permOp{name: "imported create " + st.name, subject: imp + ".STREAM.CREATE." + st.name, data: cfg, roles: st.impCreate},
			permOp{name: "imported update " + st.name, subject: imp + ".STREAM.UPDATE." + st.name, data: cfg, roles: none},
			permOp{name: "imported consumer create " + st.name, subject: imp + ".CONSUMER.CREATE." + st.name + ".probe.>", data: []byte(`{}`), roles: none},
			permOp{name: "imported purge " + st.name, subject: imp + ".STREAM.PURGE." + st.name, data: []byte(`{"filter":"$O.data.C.none"}`), roles: st.impPurge},
		)
	}
	// The destructive ones last, so that a wrongly allowed delete fails
	// the test without hiding the other rows.
	for _, st := range streams {
		ops = append(ops, permOp{name: "delete " + st.name, subject: api + ".STREAM.DELETE." + st.name, roles: none},
			permOp{name: "imported delete " + st.name, subject: imp + ".STREAM.DELETE." + st.name, roles: none})
	}
	ops = append(ops,
		permOp{name: "account info", subject: api + ".INFO", roles: node},
		permOp{name: "imported account info", subject: imp + ".INFO", roles: []string{RoleOperator, RolePublisher}},
		permOp{name: "stream names", subject: api + ".STREAM.NAMES", roles: none},
		permOp{name: "account purge", subject: api + ".ACCOUNT.PURGE.x", roles: none},
		permOp{name: "imported get version", subject: imp + ".DIRECT.GET." + vs + "." + names.KVSubject(names.KVBucket("test", names.Versions), "db"), roles: []string{RoleOperator, RolePublisher}},
		permOp{name: "imported get pin", subject: imp + ".DIRECT.GET." + vs + "." + names.KVSubject(names.KVBucket("test", names.Versions), names.PinKey("db")), roles: []string{RoleOperator}},
		permOp{name: "imported get object", subject: imp + ".DIRECT.GET." + names.ObjectStream("data") + ".$O.data.M.x", roles: []string{RolePublisher}},
	)
	keys := []struct {
		kind, bucket, key string
		roles, impRoles   []string
	}{
		{"node", names.Nodes, names.NodeKey("n9"), node, none},
		{"partitions", names.Partitions, names.PartitionKey("db", "v1", "n9"), node, none},
		{"version", names.Versions, names.VersionKey("db2"), node, []string{RolePublisher}},
		{"pin", names.Versions, names.PinKey("db2"), none, []string{RoleOperator}},
		{"region pin", names.Versions, names.RegionPinKey("db2", "eu"), none, []string{RoleOperator}},
		{"other versions key", names.Versions, "db2.x", none, none},
	}
	for _, kk := range keys {
		subject := names.KVSubject(names.KVBucket("test", kk.bucket), kk.key)
		for _, op := range []string{"put", "delete", "purge"} {
			hdr := nats.Header{}
			switch op {
			case "delete":
				hdr.Set("KV-Operation", "DEL")
			case "purge":
				hdr.Set("KV-Operation", "PURGE")
				hdr.Set("Nats-Rollup", "sub")
			}
			ops = append(ops, permOp{name: "kv " + op + " " + kk.kind + " key", subject: subject, data: []byte("{}"), hdr: hdr, roles: kk.roles},
				permOp{name: "imported kv " + op + " " + kk.kind + " key", subject: imp + "." + subject, data: []byte("{}"), hdr: hdr, roles: kk.impRoles})
		}
	}
	ops = append(ops,
		permOp{name: "object put data", subject: "$O.data.C.probe", data: []byte("x"), roles: []string{RolePublisher}},
		permOp{name: "object meta data", subject: "$O.data.M.probe", data: []byte("{}"), roles: []string{RolePublisher}},
		permOp{name: "object put other", subject: "$O.other.C.probe", data: []byte("x"), roles: none},
		permOp{name: "lookup", subject: names.GetSubject("test", "db"), data: []byte("k"), roles: []string{RoleClient}},
		permOp{name: "batch lookup", subject: names.MGetSubject("test", "db"), data: []byte("k"), roles: []string{RoleClient}},
		permOp{name: "listing", subject: names.ListSubject("test", "db"), data: []byte("{}"), roles: []string{RoleClient}},
		permOp{name: "answer listings", subject: names.ListSubject("test", "db"), sub: true, roles: []string{RoleNode}},
		permOp{name: "partition lookup", subject: names.PartSubject("test", "db", "v1", 0), data: []byte("k"), roles: []string{RoleClient}},
		permOp{name: "answer lookups", subject: names.GetSubject("test", "db"), sub: true, roles: []string{RoleNode}},
		permOp{name: "answer partition lookups", subject: names.PartPrefix("test", "db", "v1") + "*", sub: true, roles: []string{RoleNode}},
		permOp{name: "listen to everything", subject: ">", sub: true, roles: none},
		permOp{name: "listen to KV writes", subject: "$KV.>", sub: true, roles: none},
		permOp{name: "replies", subject: "_INBOX.x.>", sub: true, roles: all},
	)

	for _, role := range all {
		t.Run(role, func(t *testing.T) {
			nc, err := nats.Connect(k.ClientURL(), nats.UserInfo(role, "pw"), nats.Timeout(5*time.Second),
				nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // violations are read with LastError
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			for _, op := range ops {
				allowed, err := tryOp(nc, op)
				if err != nil {
					t.Errorf("%s: %v", op.name, err)
					continue
				}
				if want := slices.Contains(op.roles, role); allowed != want {
					t.Errorf("%s (%s): allowed %v, want %v", op.name, op.subject, allowed, want)
				}
			}
		})
	}
	// Nothing of the cluster's was lost on the way.
	for _, b := range allBuckets {
		if _, err := admin.KeyValue(ctx, bucketName("test", b)); err != nil {
			t.Errorf("bucket %s: %v", b, err)
		}
	}

	// What subjects cannot stop: an announcement with "Nats-Rollup: all"
	// purges the whole versions bucket (KV deletes need rollups, and
	// permissions see subjects, not headers). The nodes' entries come
	// back by self-repair; pins do not (docs/SECURITY.md).
	pub, err := nats.Connect(k.ClientURL(), nats.UserInfo(RolePublisher, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	m := &nats.Msg{Subject: names.ImportedAPI + "." + names.KVSubject(names.KVBucket("test", names.Versions), "db3"), Data: []byte("{}"), Header: nats.Header{}}
	m.Header.Set("Nats-Rollup", "all")
	if _, err := pub.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	versions, err := admin.KeyValue(ctx, bucketName("test", Versions))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the node's version entry back", func() error {
		e, err := versions.Get(ctx, names.VersionKey("db"))
		if err != nil {
			return err
		}
		if string(e.Value()) != `{"version":"v1"}` {
			return fmt.Errorf("db = %s", e.Value())
		}
		if testutil.ToFloat64(k.met.bucketRepairs.WithLabelValues(Versions.String(), "purged")) == 0 {
			return fmt.Errorf("no repair counted: was it purged?")
		}
		return nil
	})
}

// tryOp does op on nc and reports whether the server let it through: a
// permissions violation for its subject means no; an answer to a request,
// or a subscription without violation, means yes.
func tryOp(nc *nats.Conn, op permOp) (bool, error) {
	before := nc.LastError()
	denied := func() bool {
		err := nc.LastError()
		return err != nil && err != before && strings.Contains(err.Error(), "Permissions Violation") &&
			strings.Contains(err.Error(), `"`+op.subject+`"`)
	}
	if op.sub {
		sub, err := nc.SubscribeSync(op.subject)
		if err != nil {
			return false, err
		}
		defer sub.Unsubscribe() //nolint:errcheck // the test's connection
		if err := nc.Flush(); err != nil {
			return false, err
		}
		return !denied(), nil
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return false, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the test's connection
	if err := nc.PublishMsg(&nats.Msg{Subject: op.subject, Reply: inbox, Data: op.data, Header: op.hdr}); err != nil {
		return false, err
	}
	// The server answers PUB before the flush's PING: a violation is
	// known once Flush returns.
	if err := nc.Flush(); err != nil {
		return false, err
	}
	if denied() {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sub.NextMsgWithContext(ctx); err != nil && !errors.Is(err, nats.ErrNoResponders) {
		// No responders is an answer: the server's, to a request it let
		// through.
		return false, fmt.Errorf("neither refused nor answered: %w", err)
	}
	return true, nil
}

// TestRoleNodeRuns: a KV logged in with the node role on another node's
// embedded server does all a node does — binds and watches the buckets,
// publishes, refreshes and withdraws its entries, announces a version,
// reads its source's Object Store bucket, answers lookups — without one
// permissions violation.
func TestRoleNodeRuns(t *testing.T) {
	c := testConfig(t)
	respKey, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	respPub, _ := respKey.PublicKey()
	respSeed, _ := respKey.Seed()
	c.EmbeddedUsers = []User{
		{Name: "node", Password: "pw", Role: RoleNode, Buckets: []string{"data"}},
		{Name: "client", Password: "pw", Role: RoleClient},
		{NKey: respPub, Role: RoleResponder},
	}
	k := startKV(t, c)
	ctx := ctxT(t)
	obs, err := k.JetStream().CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "db/v1/part-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(k.ClientURL(), "nats://", "nats://node:pw@", 1)
	nc := testConfig(t, url)
	nc.LookupNKeySeedFile = writeFile(t, t.TempDir(), "lookups.nk", respSeed)
	n := startKV(t, nc)
	if err := n.Publish(ctx, Nodes, names.NodeKey("n2"), []byte("node")); err != nil {
		t.Fatal(err)
	}
	if err := n.Publish(ctx, Partitions, names.PartitionKey("db", "v1", "n2"), []byte("0,1")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Put(ctx, Versions, names.VersionKey("db"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the node's entry at the other node", hasValue(k, Nodes, "n2", "node"))
	waitFor(t, 5*time.Second, "its partitions entry", hasValue(k, Partitions, "db.v1.n2", "0,1"))
	waitFor(t, 5*time.Second, "its version", hasValue(n, Versions, "db", "v1"))
	// A few heartbeats: refreshes and bucket checks.
	nodes, err := k.JetStream().KeyValue(ctx, bucketName("test", Nodes))
	if err != nil {
		t.Fatal(err)
	}
	first, err := nodes.Get(ctx, "n2")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a refresh", func() error {
		if e, err := nodes.Get(ctx, "n2"); err != nil || e.Revision() == first.Revision() {
			return fmt.Errorf("not refreshed yet (%v)", err)
		}
		return nil
	})
	nobs, err := n.JetStream().ObjectStore(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := nobs.GetBytes(ctx, "db/v1/part-0"); err != nil || string(b) != "x" {
		t.Fatalf("reading the source bucket: %q %v", b, err)
	}
	if _, err := nobs.List(ctx); err != nil {
		t.Fatalf("listing the source bucket: %v", err)
	}
	// Lookups: the clients' are answered on the node's second login, in
	// their account (LookupConn).
	lookups, err := n.LookupConn()
	if err != nil || lookups == nil {
		t.Fatalf("the node's login in the clients' account: %v %v", lookups, err)
	}
	defer lookups.Close()
	if _, err := lookups.QueueSubscribe(names.GetSubject("test", "db"), "q", func(m *nats.Msg) { _ = m.Respond([]byte("value")) }); err != nil {
		t.Fatal(err)
	}
	if err := lookups.Flush(); err != nil {
		t.Fatal(err)
	}
	client, err := nats.Connect(k.ClientURL(), nats.UserInfo("client", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if m, err := client.Request(names.GetSubject("test", "db"), []byte("k"), 5*time.Second); err != nil || string(m.Data) != "value" {
		t.Fatalf("lookup answered by the node login: %v %v (lookups %v %v)", m, err, lookups.Status(), lookups.LastError())
	}
	if err := n.Withdraw(ctx, Partitions, names.PartitionKey("db", "v1", "n2")); err != nil {
		t.Fatal(err)
	}
	if err := n.Delete(ctx, Versions, names.VersionKey("db")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the withdrawn entry gone", hasNoKey(k, Partitions, "db.v1.n2"))
	for _, c := range []*nats.Conn{n.Conn(), lookups} {
		if err := c.LastError(); err != nil {
			t.Fatalf("the node login met: %v", err)
		}
	}
}

// TestRoleNodeCreatesBuckets: the first node of a cluster on an external
// server, logged in as the node role, creates the buckets (nats.go asks
// for the account's information before it creates a KV bucket, which the
// role once lacked: Start timed out), and so may a publisher the versions
// bucket (OpenVersions) where no node has yet.
func TestRoleNodeCreatesBuckets(t *testing.T) {
	perms := func(role string) *server.Permissions {
		p, err := RolePermissions(role, Scope{Cluster: "test", ObjectBuckets: []string{"data"}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	s := natstest.RunServer(t, &server.Options{Users: []*server.User{
		{Username: "node", Password: "pw", Permissions: perms(RoleNode)},
		{Username: "etl", Password: "pw", Permissions: perms(RolePublisher)},
	}})
	as := func(user string) string { return strings.Replace(s.ClientURL(), "nats://", "nats://"+user+":pw@", 1) }
	ctx := ctxT(t)
	js := natstest.JetStream(t, as("etl"))
	c := testConfig(t, as("etl"))
	if _, err := OpenVersions(ctx, js, c); err != nil {
		t.Fatalf("the publisher creates the versions bucket: %v", err)
	}
	k := startKV(t, testConfig(t, as("node")))
	if err := k.Publish(ctx, Nodes, "n1", []byte("n1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the node's entry", hasValue(k, Nodes, "n1", "n1"))
	if err := k.Conn().LastError(); err != nil {
		t.Fatalf("the node login met: %v", err)
	}
}

// TestPermissionsConfig: the block printed for an external server, put in
// a real nats-server configuration file, gives each role the permissions
// the embedded server applies.
func TestPermissionsConfig(t *testing.T) {
	s := Scope{Cluster: "prod", ObjectBuckets: []string{"data"}}
	hub := Scope{Cluster: "prod", ObjectBuckets: []string{"data"}, HubDomain: "hub"}
	hubRA := hub
	hubRA.Region = "ra"
	acc := s
	acc.Accounts = true
	for _, tc := range []struct {
		role  string
		scope Scope
	}{
		{RoleNode, s}, {RoleOperator, s}, {RolePublisher, s}, {RoleClient, s},
		{RoleNode, acc}, {RoleOperator, acc}, {RolePublisher, acc}, {RoleClient, acc}, {RoleResponder, acc},
		{RoleNode, hub}, {RoleOperator, hub}, {RoleOperator, hubRA}, {RolePublisher, hub}, {RoleClient, hub},
	} {
		role, s := tc.role, tc.scope
		t.Run(fmt.Sprintf("%s/%s/%s/accounts=%v", role, s.HubDomain, s.Region, s.Accounts), func(t *testing.T) {
			block, err := PermissionsConfig(role, s)
			if err != nil {
				t.Fatal(err)
			}
			conf := filepath.Join(t.TempDir(), "nats.conf")
			if err := os.WriteFile(conf, []byte("authorization {\n users = [\n  { user: u, password: p\n"+block+"  }\n ]\n}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			o, err := server.ProcessConfigFile(conf)
			if err != nil {
				t.Fatalf("%v\n%s", err, block)
			}
			want, _ := RolePermissions(role, s)
			if len(o.Users) != 1 || !reflect.DeepEqual(o.Users[0].Permissions, want) {
				t.Fatalf("parsed %+v, want %+v\n%s", o.Users[0].Permissions, want, block)
			}
		})
	}
	if _, err := PermissionsConfig("admin", s); err == nil {
		t.Error("an unknown role")
	}
}

// TestAccountsConfig: the accounts block printed for an external server,
// with a login in each account, parses with nats-server's own parser into
// the accounts the embedded server makes: the cluster's with JetStream,
// the others without, each importing its role's services.
func TestAccountsConfig(t *testing.T) {
	s := Scope{Cluster: "prod", ObjectBuckets: []string{"data"}, Accounts: true}
	block, err := AccountsConfig(s, RoleClient, RoleOperator, RolePublisher)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{RoleNode, RoleClient, RoleResponder, RoleOperator, RolePublisher} {
		perms, err := PermissionsConfig(role, s)
		if err != nil {
			t.Fatal(err)
		}
		comment := fmt.Sprintf("# the %s logins, with the permissions of: spangle nats-permissions %s", role, role)
		if !strings.Contains(block, comment) {
			t.Fatalf("no place for the %s logins:\n%s", role, block)
		}
		block = strings.Replace(block, comment, "{ user: "+role+", password: pw\n"+perms+"}", 1)
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("jetstream: enabled\n"+block), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("%v\n%s", err, block)
	}
	accounts := map[string]*server.Account{}
	for _, a := range o.Accounts {
		accounts[a.Name] = a
	}
	for _, u := range o.Users {
		want := names.RoleAccount("prod", u.Username, "")
		switch u.Username {
		case RoleNode:
			want = names.ClusterAccount("prod")
		case RoleResponder: // the nodes answer the clients in their account
			want = names.RoleAccount("prod", RoleClient, "")
		}
		if u.Account == nil || u.Account.Name != want {
			t.Errorf("user %s in account %v, want %s", u.Username, u.Account, want)
		}
	}
	cluster := accounts[names.ClusterAccount("prod")]
	if cluster == nil || len(o.Users) != 5 {
		t.Fatalf("accounts %v, users %d", accounts, len(o.Users))
	}
	for _, role := range []string{RoleClient, RoleOperator, RolePublisher} {
		imp, _ := RoleImports(role, s)
		a := accounts[names.RoleAccount("prod", role, "")]
		if a == nil || a.NumServiceImports() != len(imp) {
			t.Errorf("%s's account: %v imports, want %d", role, a, len(imp))
		}
	}
	// The clients' lookups cross no import: the nodes answer them in the
	// clients' account.
	for _, subject := range lookupSubjects("prod") {
		if strings.Contains(block, `service: "`+subject+`"`) || strings.Contains(block, `subject: "`+subject+`"`) {
			t.Errorf("the accounts export or import %s:\n%s", subject, block)
		}
	}
	s2, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s2.Shutdown()
}

// TestScopeRefused: scopes that name no valid set of subjects are
// refused, saying why.
func TestScopeRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scope Scope
		err   string
	}{
		{"bad bucket", Scope{Cluster: "c", ObjectBuckets: []string{"a.b"}}, "object store bucket"},
		{"bad domain", Scope{Cluster: "c", Domain: "*"}, "domain"},
		{"bad hub domain", Scope{Cluster: "c", HubDomain: "a>"}, "hub domain"},
		{"bad region", Scope{Cluster: "c", HubDomain: "hub", Region: "r.a"}, "region"},
		{"domain and hub", Scope{Cluster: "c", Domain: "ra", HubDomain: "hub"}, "exclusive"},
		{"region without hub", Scope{Cluster: "c", Region: "ra"}, "needs the hub's domain"},
		{"region is the hub", Scope{Cluster: "c", HubDomain: "hub", Region: "hub"}, "is the hub's domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RolePermissions(RoleOperator, tc.scope); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error with %q", err, tc.err)
			}
		})
	}
}
