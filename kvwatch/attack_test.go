package kvwatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
)

// The attacks of issue 32 on an embedded server with users (one account
// per role, accounts.go): every login but the node's tries to make the
// cluster's account publish for it — through the reply subject of a
// lookup, of a JetStream API request, of a direct get (which copies a
// stored message, headers included), of a pub ack — onto a pin, a node
// entry, a stream's deletion or creation; and to create consumers, durable
// or not. After all of it the buckets, their entries, the pin and the
// consumers are exactly as before.

// clusterState is what the attacks must leave unchanged: the streams,
// every KV entry (key, revision, value) and the consumer counts.
type clusterState struct {
	streams   []string
	entries   map[string]string // stream/subject → seq:value
	consumers map[string]int
}

func readClusterState(t *testing.T, ctx context.Context, js jetstream.JetStream) clusterState {
	t.Helper()
	st := clusterState{entries: map[string]string{}, consumers: map[string]int{}}
	l := js.StreamNames(ctx)
	for n := range l.Name() {
		st.streams = append(st.streams, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(st.streams)
	for _, n := range st.streams {
		s, err := js.Stream(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		st.consumers[n] = info.State.Consumers
		for subj := range info.State.Subjects {
			m, err := s.GetLastMsgForSubject(ctx, subj)
			if err != nil {
				t.Fatal(err)
			}
			st.entries[n+"/"+subj] = fmt.Sprintf("%d:%s", m.Sequence, m.Data)
		}
	}
	return st
}

// diff says how b differs from a, but for the entries in allowed (a
// role's own writes).
func (a clusterState) diff(b clusterState, allowed ...string) []string {
	var out []string
	if !slices.Equal(a.streams, b.streams) {
		out = append(out, fmt.Sprintf("streams %v, were %v", b.streams, a.streams))
	}
	for k, v := range b.entries {
		if a.entries[k] != v && !slices.Contains(allowed, k) {
			out = append(out, fmt.Sprintf("%s = %.80s, was %.80s", k, v, a.entries[k]))
		}
	}
	for k, v := range a.entries {
		if _, ok := b.entries[k]; !ok {
			out = append(out, fmt.Sprintf("%s gone, was %.80s", k, v))
		}
	}
	for k, v := range b.consumers {
		if a.consumers[k] != v {
			out = append(out, fmt.Sprintf("stream %s has %d consumers, had %d", k, v, a.consumers[k]))
		}
	}
	return out
}

func TestAttacksEmbedded(t *testing.T) {
	c := testConfig(t)
	c.EmbeddedUsers = []User{
		{Name: RoleNode, Password: "pw", Role: RoleNode, Buckets: []string{"data"}},
		{Name: RoleOperator, Password: "pw", Role: RoleOperator},
		{Name: RolePublisher, Password: "pw", Role: RolePublisher, Buckets: []string{"data"}},
		{Name: RoleClient, Password: "pw", Role: RoleClient},
	}
	k := startKV(t, c)
	ctx := ctxT(t)
	admin := k.JetStream()
	obs, err := admin.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "db/v1/part-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	versions := names.KVBucket("test", names.Versions)
	vs := names.KVStream(versions)
	evilConfig := `{"name":"EVIL","subjects":["spangle.test.get.>"]}`
	for key, value := range map[string]string{
		"db":                `{"version":"v1"}`,
		names.PinKey("db"):  `{"db":"db","version":"v1"}`,
		"evil":              evilConfig, // a payload a copy would carry
		names.PinKey("old"): `{"db":"old","version":"v0"}`,
	} {
		if _, err := k.Put(ctx, Versions, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}

	// A node login answers lookups as a node does: an empty answer to
	// an unknown key, a value otherwise, to whatever reply it was given.
	node, err := nats.Connect(k.ClientURL(), nats.UserInfo(RoleNode, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, err := node.QueueSubscribe(names.GetSubject("test", "db"), "q", func(m *nats.Msg) { m.Respond(nil) }); err != nil {
		t.Fatal(err)
	}
	if err := node.Flush(); err != nil {
		t.Fatal(err)
	}
	// The node's own login in the clients' account (LookupConn) is where
	// their lookups are answered: here as naively, to whatever reply, and
	// whatever a reply names is a subject of the clients' account.
	lookups, err := k.LookupConn()
	if err != nil || lookups == nil {
		t.Fatalf("no login in the clients' account: %v", err)
	}
	defer lookups.Close()
	answered := make(chan string, 100)
	if _, err := lookups.QueueSubscribe(names.GetSubject("test", "db"), "q", func(m *nats.Msg) {
		m.Respond(nil) //nolint:errcheck // a refused answer is the server's to log
		answered <- m.Reply
	}); err != nil {
		t.Fatal(err)
	}
	if err := lookups.Flush(); err != nil {
		t.Fatal(err)
	}
	before := readClusterState(t, ctx, admin)

	// Where a crafted reply would write, in the cluster's account.
	targets := []string{
		"$JS.API.STREAM.DELETE." + names.ObjectStream("data"),
		"$JS.API.STREAM.DELETE." + vs,
		"$JS.API.STREAM.PURGE." + vs,
		"$JS.API.STREAM.CREATE.EVIL",
		names.KVSubject(versions, names.PinKey("db")),
		names.KVSubject(versions, names.PinKey("new")),
		names.KVSubject(names.KVBucket("test", names.Nodes), "forged"),
		names.KVSubject(names.KVBucket("test", names.Partitions), "db.v1.forged"),
	}
	// What each role may ask, whose answer goes to the reply it names.
	imp := names.ImportedAPI
	requests := map[string][]*nats.Msg{
		RoleClient: {
			{Subject: names.GetSubject("test", "db"), Data: []byte("no-such-key")},
			{Subject: "$JS.API.DIRECT.GET." + vs, Data: []byte(`{"last_by_subj":"` + names.KVSubject(versions, "evil") + `"}`)},
			{Subject: "$JS.API.DIRECT.GET." + vs, Data: []byte(`{"last_by_subj":"` + names.KVSubject(versions, "db") + `"}`)},
			{Subject: "$JS.API.DIRECT.GET." + vs, Data: []byte(`{"multi_last":["$KV.` + versions + `.>"],"batch":10}`)},
		},
		RolePublisher: {
			{Subject: imp + ".DIRECT.GET." + vs + "." + names.KVSubject(versions, "evil")},
			{Subject: imp + ".DIRECT.GET." + vs + "." + names.KVSubject(versions, "db")},
			{Subject: imp + ".STREAM.INFO." + vs},
			{Subject: imp + ".INFO"},
			{Subject: imp + "." + names.KVSubject(versions, "db2"), Data: []byte(evilConfig)},
			{Subject: "$O.data.C.probe", Data: []byte("x")},
		},
		RoleOperator: {
			{Subject: imp + ".DIRECT.GET." + vs + "." + names.KVSubject(versions, "evil")},
			{Subject: imp + ".DIRECT.GET." + vs + "." + names.KVSubject(versions, names.PinKey("old"))},
			{Subject: "$JS.API.DIRECT.GET." + names.KVStream(names.KVBucket("test", names.Nodes)), Data: []byte(`{"multi_last":["$KV.>"],"batch":10}`)},
		},
	}
	// Consumers: plain, durable by name, the old durable API, push with a
	// deliver subject in the cluster's account, mass creation.
	consumerBody := func(stream, name, deliver string) []byte {
		cfg := map[string]any{"name": name, "durable_name": name, "ack_policy": "none"}
		if deliver != "" {
			cfg["deliver_subject"] = deliver
		}
		b, _ := json.Marshal(map[string]any{"stream_name": stream, "config": cfg})
		return b
	}
	for _, role := range []string{RoleClient, RolePublisher, RoleOperator} {
		t.Run(role, func(t *testing.T) {
			v := &violations{}
			nc, err := nats.Connect(k.ClientURL(), nats.UserInfo(role, "pw"), nats.ErrorHandler(v.handler))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			inbox := nc.NewRespInbox()
			own, err := nc.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			// 1, 2: crafted replies. The answer of an allowed request comes
			// back to the requester (its own inbox, seen here through a
			// second request) and nowhere else.
			for _, req := range requests[role] {
				for _, target := range targets {
					m := &nats.Msg{Subject: req.Subject, Reply: target, Data: req.Data, Header: req.Header}
					if err := nc.PublishMsg(m); err != nil {
						t.Fatal(err)
					}
				}
				if err := nc.PublishMsg(&nats.Msg{Subject: req.Subject, Reply: inbox, Data: req.Data}); err != nil {
					t.Fatal(err)
				}
				if _, err := own.NextMsg(5 * time.Second); err != nil {
					t.Errorf("%s: no answer to its own inbox: %v", req.Subject, err)
				}
				for n, _, _ := own.Pending(); n > 0; n, _, _ = own.Pending() { // batched answers
					own.NextMsg(time.Second) //nolint:errcheck // drained
				}
			}
			// 3: consumers, through every name the role could try.
			for _, api := range []string{"$JS.API", imp} {
				for _, stream := range []string{vs, names.KVStream(names.KVBucket("test", names.Nodes)), names.ObjectStream("data")} {
					for i := range 5 {
						name := fmt.Sprintf("evil%d", i)
						for _, subj := range []string{
							api + ".CONSUMER.CREATE." + stream,
							api + ".CONSUMER.CREATE." + stream + "." + name,
							api + ".CONSUMER.CREATE." + stream + "." + name + ".>",
							api + ".CONSUMER.DURABLE.CREATE." + stream + "." + name,
						} {
							for _, deliver := range []string{"", targets[0], names.KVSubject(versions, names.PinKey("db"))} {
								if err := nc.PublishMsg(&nats.Msg{Subject: subj, Reply: inbox, Data: consumerBody(stream, name, deliver)}); err != nil {
									t.Fatal(err)
								}
							}
						}
					}
				}
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			// Direct attempts on what the role may not publish are refused
			// and logged by the server (a permissions violation each).
			for _, target := range targets {
				nc.Publish(target, []byte(evilConfig)) //nolint:errcheck // refused
			}
			nc.Flush() //nolint:errcheck // refused
			waitFor(t, 5*time.Second, "the direct attempts refused", v.has(`Publish to "`+targets[0]+`"`))
			// Nobody but a node answers lookups in the clients' account.
			nc.QueueSubscribe(names.GetSubject("test", "db"), "q", func(*nats.Msg) {}) //nolint:errcheck // refused
			nc.Flush()                                                                 //nolint:errcheck // refused
			waitFor(t, 5*time.Second, "the lookup subscription refused", v.has(`Subscription to "`+names.GetSubject("test", "db")+`"`))
		})
	}
	// The crafted replies reached the node's login in the clients'
	// account, as they were.
	got := map[string]bool{}
	for len(answered) > 0 {
		got[<-answered] = true
	}
	for _, target := range targets {
		if !got[target] {
			t.Errorf("the lookup with reply %s never reached the clients' account's responder", target)
		}
	}
	// Every answer has been sent by now: the requester's own got back.
	after := readClusterState(t, ctx, admin)
	if d := before.diff(after, vs+"/"+names.KVSubject(versions, "db2"), names.ObjectStream("data")+"/$O.data.C.probe"); len(d) > 0 {
		t.Errorf("the attacks changed the cluster:\n%s", strings.Join(d, "\n"))
	}
	if e, err := k.Snapshot().Get(Versions, names.PinKey("db")); !err || string(e.Value) != `{"db":"db","version":"v1"}` {
		t.Errorf("the pin as the node sees it: %s %v", e.Value, err)
	}
}

// TestAttackSharedAccount is the first attack where every role shares
// one account (an external server given only RolePermissions' lists, as
// before accounts): a client's lookup whose reply names the Object Store
// stream's deletion deletes it, through the node's answer. The accounts
// of TestAttacksEmbedded are what stop it.
func TestAttackSharedAccount(t *testing.T) {
	perms := func(role string) *server.Permissions {
		p, err := RolePermissions(role, Scope{Cluster: "test", ObjectBuckets: []string{"data"}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	s := natstest.RunServer(t, &server.Options{Users: []*server.User{
		{Username: "admin", Password: "pw"},
		{Username: RoleNode, Password: "pw", Permissions: perms(RoleNode)},
		{Username: RoleClient, Password: "pw", Permissions: perms(RoleClient)},
	}})
	ctx := ctxT(t)
	admin := natstest.JetStream(t, strings.Replace(s.ClientURL(), "nats://", "nats://admin:pw@", 1))
	if _, err := admin.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"}); err != nil {
		t.Fatal(err)
	}
	node, err := nats.Connect(s.ClientURL(), nats.UserInfo(RoleNode, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, err := node.QueueSubscribe(names.GetSubject("test", "db"), "q", func(m *nats.Msg) { m.Respond(nil) }); err != nil {
		t.Fatal(err)
	}
	node.Flush() //nolint:errcheck // the request below waits
	client, err := nats.Connect(s.ClientURL(), nats.UserInfo(RoleClient, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.PublishRequest(names.GetSubject("test", "db"), "$JS.API.STREAM.DELETE."+names.ObjectStream("data"), []byte("no-such-key")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the Object Store stream deleted by the node's answer", func() error {
		if _, err := admin.Stream(ctx, names.ObjectStream("data")); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}
