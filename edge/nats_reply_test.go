package edge_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/node/listwire"
)

// replyEnv is a node serving db "d" (v1, 4 partitions) over the open
// embedded server, with one handler per subject (so that requests to one
// subject are handled in the order they were sent), an Object Store
// bucket "data", and a connection with the unrestricted view of that
// server (no users: anyone may publish anything).
type replyEnv struct {
	node *edgetest.Node
	nc   *nats.Conn
	js   jetstream.JetStream
	reg  *prometheus.Registry
	logs *logRecorder
}

func startReplyEnv(t *testing.T, prefixes ...string) *replyEnv {
	t.Helper()
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 4, edgetest.Numbered("v1", 100))
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	reg := prometheus.NewRegistry()
	logs := &logRecorder{}
	n := edgetest.StartNode(t, kv, root, edgetest.Options{
		NATS: func(c *edge.NATSConfig) {
			c.Registerer = reg
			c.Logger = slog.New(logs)
			c.Handlers = 1
			if prefixes != nil {
				c.ReplyPrefixes = prefixes
			}
		},
	})
	nc := edgetest.Connect(t, kv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
	defer cancel()
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"}); err != nil {
		t.Fatal(err)
	}
	env := &replyEnv{node: n, nc: nc, js: js, reg: reg, logs: logs}
	edgetest.WaitFor(t, "part subjects answer", func() error {
		_, err := nc.Request(partOf(t, []byte("key-0")), []byte("key-0"), time.Second)
		return err
	})
	return env
}

// refusedCount returns spangle_nats_refused_replies_total{op,reason}.
func (e *replyEnv) refusedCount(t *testing.T, op, reason string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "spangle_nats_refused_replies_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["op"] == op && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no spangle_nats_refused_replies_total{op=%q,reason=%q}", op, reason)
	return 0
}

// TestNATSReplySubjectsRefused (issue 32): a lookup whose reply subject
// names JetStream's API or a KV key, or holds a wildcard, is not
// answered: before, the node published its answer there from its own
// connection, so that a client deleted the Object Store stream
// ($JS.API.STREAM.DELETE.OBJ_data: an empty 404 is a valid request),
// overwrote a pin ($KV.<versions>.<db>.pin) or asked for a stream. For
// every operation (get, part, mget, list) and every such reply: nothing
// is published on it (watched from the unrestricted view, up to the
// answer of a legitimate lookup sent after it on the same subject,
// which one handler answers in order), the stream, the versions bucket
// and the pin's absence are intact, and each refusal is counted by
// reason and logged. It fails without the reply check.
func TestNATSReplySubjectsRefused(t *testing.T) {
	e := startReplyEnv(t)
	versions := names.KVBucket(edgetest.Cluster, names.Versions)
	crafted := []struct{ reply, reason string }{
		{"$JS.API.STREAM.DELETE.OBJ_data", "prefix"},
		{"$JS.API.STREAM.DELETE." + names.KVStream(versions), "prefix"},
		{names.KVSubject(versions, names.PinKey("d")), "prefix"},
		{"$JS.API.STREAM.CREATE.EVIL", "prefix"},
		{"_INBOX.evil.*", "invalid"},
		{"_INBOX.evil..x", "invalid"},
	}
	// The spies: every crafted subject, as anyone may subscribe here.
	var spies []*nats.Subscription
	for _, c := range crafted {
		subject := c.reply
		if c.reason == "invalid" {
			subject = "_INBOX.evil.>"
		}
		sub, err := e.nc.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		spies = append(spies, sub)
	}
	missing := []byte("no-such-key") // answered 404 with an empty body: a valid DELETE request
	ops := []struct {
		op, subject string
		data        []byte
	}{
		{"get", names.GetSubject(edgetest.Cluster, "d"), missing},
		{"part", partOf(t, missing), missing},
		{"mget", names.MGetSubject(edgetest.Cluster, "d"), batchwire.AppendRequest(nil, [][]byte{missing})},
		{"list", names.ListSubject(edgetest.Cluster, "d"), listwire.AppendRequest(nil, listwire.Request{Prefix: missing})},
	}
	for _, op := range ops {
		for _, c := range crafted {
			if err := e.nc.PublishRequest(op.subject, c.reply, op.data); err != nil {
				t.Fatal(err)
			}
			// A lookup sent after it, on the same subject, is handled
			// after it: once answered, whatever the node published for
			// the crafted one has reached this connection.
			if _, err := e.nc.Request(op.subject, op.data, edgetest.Timeout); err != nil {
				t.Fatalf("%s after reply %q: %v", op.op, c.reply, err)
			}
			for _, sub := range spies {
				if m, err := sub.NextMsg(0); err == nil {
					t.Errorf("%s with reply %q: the node published on %s: %q %v", op.op, c.reply, m.Subject, m.Data, m.Header)
				}
			}
		}
		for _, reason := range []string{"prefix", "invalid"} {
			want := 0
			for _, c := range crafted {
				if c.reason == reason {
					want++
				}
			}
			if got := e.refusedCount(t, op.op, reason); got != float64(want) {
				t.Errorf("refused{op=%s,reason=%s} = %v, want %d", op.op, reason, got, want)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
	defer cancel()
	for _, stream := range []string{"OBJ_data", names.KVStream(versions)} {
		if _, err := e.js.Stream(ctx, stream); err != nil {
			t.Errorf("stream %s: %v", stream, err)
		}
	}
	if _, err := e.js.Stream(ctx, "EVIL"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream EVIL: %v, want not found", err)
	}
	vkv, err := e.js.KeyValue(ctx, versions)
	if err != nil {
		t.Fatal(err)
	}
	if en, err := vkv.Get(ctx, names.PinKey("d")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("pin of d: %v %v, want none", en, err)
	}
	if !strings.Contains(e.logs.all(), "reply subject is refused") {
		t.Error("no refusal logged")
	}
}

// TestNATSReplyPrefixes: a request without a reply subject is counted
// and not looked up; a client with a custom inbox prefix is answered once
// its prefix is configured, another is not.
func TestNATSReplyPrefixes(t *testing.T) {
	e := startReplyEnv(t, "_INBOX.", "_APP.")
	url := e.nc.ConnectedUrl()
	app := edgetest.Connect(t, url, nats.CustomInboxPrefix("_APP"))
	get := names.GetSubject(edgetest.Cluster, "d")
	m, err := app.Request(get, []byte("key-3"), edgetest.Timeout)
	if err != nil || string(m.Data) != "v1:3" {
		t.Fatalf("a client of prefix _APP: %v %v", m, err)
	}
	want := map[string]float64{}
	for _, c := range []struct{ reply, reason string }{{"_OTHER.x", "prefix"}, {"_APPS.x", "prefix"}, {"", "none"}} {
		err := e.nc.PublishRequest(get, c.reply, []byte("key-3"))
		if c.reply == "" {
			err = e.nc.Publish(get, []byte("key-3"))
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.nc.Request(get, []byte("key-3"), edgetest.Timeout); err != nil {
			t.Fatal(err)
		}
		want[c.reason]++
		for _, reason := range []string{"prefix", "none"} {
			if got := e.refusedCount(t, "get", reason); got != want[reason] {
				t.Errorf("after reply %q: refused{reason=%s} = %v, want %v", c.reply, reason, got, want[reason])
			}
		}
	}
}

// TestNATSReplyPrefixesValidate: a prefix that could match the start of
// a token, holds a wildcard or names a system subject is refused, naming
// the key.
func TestNATSReplyPrefixesValidate(t *testing.T) {
	for _, prefixes := range [][]string{{}, {"_INBOX"}, {"_INBOX.>."}, {"$JS."}, {"."}, {"_IN BOX."}} {
		c := edge.DefaultNATSConfig()
		c.Conn, c.Backend = new(nats.Conn), panicky{newFake()}
		c.ReplyPrefixes = prefixes
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "ReplyPrefixes") {
			t.Errorf("%q: %v", prefixes, err)
		}
	}
	c := edge.DefaultNATSConfig()
	c.Conn, c.Backend = new(nats.Conn), panicky{newFake()}
	c.ReplyPrefixes = []string{"_INBOX.", "_my.app."}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}
