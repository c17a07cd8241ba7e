package kvwatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/spangledb/spangle/kvwatch/names"
)

// violations collects a connection's asynchronous permission errors.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
}

func (v *violations) has(substr string) func() error {
	return func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		for _, e := range v.errs {
			if strings.Contains(e, substr) {
				return nil
			}
		}
		return errors.New("no permissions violation for " + substr)
	}
}

// TestEmbeddedAuth runs the embedded server with users: a connection with
// no login is refused; a client may request lookups and read the buckets
// but not listen to everything, join a lookup queue group or write an
// entry; a node user may; a publisher may write the versions bucket only;
// an NKey user logs in by signing; the KV's own connection logs in with
// its generated NKey.
func TestEmbeddedAuth(t *testing.T) {
	nodeKey, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	nodePub, _ := nodeKey.PublicKey()
	respKey, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	respPub, _ := respKey.PublicKey()
	c := testConfig(t)
	c.EmbeddedUsers = []User{
		{Name: "app", Password: "app-secret", Role: RoleClient},
		{Name: "job", Password: "job-secret", Role: RolePublisher, Buckets: []string{"data"}},
		{NKey: nodePub, Role: RoleNode},
		{NKey: respPub, Role: RoleResponder},
	}
	k := startKV(t, c)
	if _, err := k.Put(context.Background(), Versions, "d", []byte(`{"version":"v1"}`)); err != nil {
		t.Fatalf("the KV's own connection: %v", err)
	}
	url := k.ClientURL()

	if nc, err := nats.Connect(url, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a connection with no login was accepted")
	}
	connect := func(opts ...nats.Option) (*nats.Conn, *violations) {
		t.Helper()
		v := &violations{}
		nc, err := nats.Connect(url, append(opts, nats.ErrorHandler(v.handler))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc, v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, time.Second) // a refused publish gets no answer
		t.Cleanup(cancel)
		return c
	}

	// The clients' lookups are answered in their account, by a node's
	// login of the responder role, which may publish nothing else; the
	// node user's subscription in the cluster's account sees none of
	// them.
	resp, rv := connect(nats.Nkey(respPub, respKey.Sign))
	if _, err := resp.QueueSubscribe("spangle.test.get.d", "q", func(m *nats.Msg) { m.Respond([]byte("value")) }); err != nil {
		t.Fatal(err)
	}
	resp.Flush()
	resp.Publish("$JS.API.DIRECT.GET."+names.KVStream(names.KVBucket("test", names.Versions)), nil)
	resp.Flush()
	waitFor(t, 5*time.Second, "a responder may publish nothing but answers", rv.has(`Publish to "$JS.API.DIRECT.GET.`))
	node, _ := connect(nats.Nkey(nodePub, nodeKey.Sign))
	if _, err := node.QueueSubscribe("spangle.test.get.d", "q", func(m *nats.Msg) { m.Respond([]byte("cluster")) }); err != nil {
		t.Fatal(err)
	}
	node.Flush()
	njs, _ := jetstream.New(node)
	nkv, err := njs.KeyValue(ctx, names.KVBucket("test", names.Nodes))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nkv.Put(ctx, "n9", []byte("{}")); err != nil {
		t.Fatalf("node user put: %v", err)
	}

	client, cv := connect(nats.UserInfo("app", "app-secret"))
	for range 10 {
		if m, err := client.Request("spangle.test.get.d", []byte("k"), 5*time.Second); err != nil || string(m.Data) != "value" {
			t.Fatalf("client lookup: %v %v", m, err)
		}
	}
	// The client reads the cluster map with batched direct gets, and has
	// no JetStream of its own: it cannot bind, watch or write a bucket.
	vbucket := names.KVBucket("test", names.Versions)
	m, err := client.Request("$JS.API.DIRECT.GET."+names.KVStream(vbucket), []byte(`{"multi_last":["$KV.`+vbucket+`.>"],"batch":10}`), 5*time.Second)
	if err != nil || m.Header.Get("Nats-Subject") != names.KVSubject(vbucket, "d") {
		t.Fatalf("client reads the versions bucket: %v %v", m, err)
	}
	cjs, _ := jetstream.New(client)
	if _, err := cjs.KeyValue(short(), vbucket); err == nil {
		t.Fatal("a client bound a bucket: its account has JetStream")
	}
	if _, err := cjs.Publish(short(), names.KVSubject(vbucket, "d"), []byte(`{"version":"v9"}`)); err == nil {
		t.Fatal("a client wrote the versions bucket")
	}
	client.Subscribe(">", func(*nats.Msg) {})
	client.QueueSubscribe("spangle.test.get.d", "q", func(*nats.Msg) {})
	client.Flush()
	waitFor(t, 5*time.Second, "client may not listen to everything", cv.has(`Subscription to ">"`))
	waitFor(t, 5*time.Second, "client may not answer lookups", cv.has(`Subscription to "spangle.test.get.d"`))

	job, _ := connect(nats.UserInfo("job", "job-secret"))
	jjs, _ := jetstream.NewWithAPIPrefix(job, names.ImportedAPI)
	jkv, err := jjs.KeyValue(ctx, names.KVBucket("test", names.Versions))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jkv.Put(ctx, "d", []byte(`{"version":"v2"}`)); err != nil {
		t.Fatalf("publisher announces: %v", err)
	}
	if _, err := jjs.KeyValue(short(), names.KVBucket("test", names.Nodes)); err == nil {
		t.Fatal("a publisher read the nodes bucket")
	}
	if _, err := jjs.Publish(short(), names.ImportedAPI+"."+names.KVSubject(names.KVBucket("test", names.Nodes), "n8"), []byte("{}")); err == nil {
		t.Fatal("a publisher wrote the nodes bucket")
	}
	if _, err := job.Request("spangle.test.get.d", []byte("k"), time.Second); err == nil {
		t.Fatal("a publisher looked a key up")
	}

	js := k.emb.srv.Load().JetStreamConfig()
	if js == nil || js.MaxMemory != c.EmbeddedMaxMemory || js.MaxStore != c.EmbeddedMaxStore {
		t.Fatalf("JetStream limits %+v, want %d and %d", js, c.EmbeddedMaxMemory, c.EmbeddedMaxStore)
	}
}

// TestEmbeddedInsecure: an embedded server without users may listen on
// loopback only, unless allowed; users or allow_insecure lift that.
func TestEmbeddedInsecure(t *testing.T) {
	for _, tc := range []struct {
		listen   string
		users    bool
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:4222", false, false, true},
		{"localhost:4222", false, false, true},
		{"[::1]:4222", false, false, true},
		{"0.0.0.0:4222", false, false, false},
		{"10.1.2.3:4222", false, false, false},
		{":4222", false, false, false},
		{"0.0.0.0:4222", true, false, true},
		{"0.0.0.0:4222", false, true, true},
	} {
		c := testConfig(t)
		c.EmbeddedListen = tc.listen
		c.EmbeddedAllowInsecure = tc.insecure
		if tc.users {
			c.EmbeddedUsers = []User{{Name: "a", Password: "b", Role: RoleClient}}
		}
		err := c.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInsecure)) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	c := testConfig(t)
	c.EmbeddedUsers = []User{{Name: "a", Password: "b", Role: "admin"}}
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "unknown role") {
		t.Errorf("unknown role: %v", err)
	}
	c.EmbeddedUsers = []User{{NKey: "not-a-key", Role: RoleNode}}
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad nkey: %v", err)
	}
}
