package kvwatch

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// resumeWithin is how soon an update made after a reconnect must reach the
// snapshot. Without re-created watchers it takes 10-20 s.
const resumeWithin = 3 * time.Second

// TestServerRestart stops the server a KV uses and starts a new one on the
// same port and store: the snapshot stays readable and turns stale while
// the server is away; after the restart the client reconnects, the own
// entry is re-put at once, and the watchers see new writes without the
// silence of a stale ordered consumer.
func TestServerRestart(t *testing.T) {
	o := &server.Options{Port: natstest.FreePort(t), StoreDir: t.TempDir()}
	s1 := natstest.RunServer(t, o)
	url := s1.ClientURL()
	c := testConfig(t, url)
	c.EntryTTL = 30 * time.Second  // must survive the restart: this test is about re-put, not expiry
	c.Heartbeat = 10 * time.Second // so a re-put within reputWithin is the reconnect's doing
	c.OpTimeout = 4 * time.Second  // far above a fast failure, even on a loaded machine
	const reputWithin = 4 * time.Second
	k := startKV(t, c)
	ctx := ctxT(t)
	if err := k.Publish(ctx, Nodes, "n1", []byte("n1")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "entries seen", hasValue(k, Versions, "db", "v1"))
	before, _ := k.Snapshot().Get(Nodes, "n1")

	s1.Shutdown()
	s1.WaitForShutdown()
	waitFor(t, 3*time.Second, "snapshot stale while the server is away", func() error {
		if s := k.Snapshot(); !s.Stale() || s.Connected() {
			return fmt.Errorf("stale=%v connected=%v", s.Stale(), s.Connected())
		}
		return nil
	})
	// Reads keep working from the last snapshot; writes fail fast.
	if err := hasValue(k, Versions, "db", "v1")(); err != nil {
		t.Fatalf("read while disconnected: %v", err)
	}
	start := time.Now()
	if _, err := k.Put(ctx, Versions, "db", []byte("lost")); err == nil {
		t.Error("Put while disconnected succeeded")
	}
	if d := time.Since(start); d > c.OpTimeout/2 {
		t.Errorf("Put while disconnected took %v, want a fast failure (OpTimeout %v)", d, c.OpTimeout)
	}

	natstest.RunServer(t, o)
	reconnected := time.Now()
	raw := rawKV(t, url, Nodes)
	waitFor(t, reputWithin, "own entry re-put after reconnect", func() error {
		e, err := rawGet(raw, "n1")
		if err != nil {
			return err
		}
		if e.Revision() <= before.Revision {
			return fmt.Errorf("revision %d not above %d", e.Revision(), before.Revision)
		}
		return nil
	})
	t.Logf("own entry re-put %v after the server came back", time.Since(reconnected))
	waitFor(t, resumeWithin, "snapshot current again", func() error {
		if s := k.Snapshot(); s.Stale() || !s.Connected() {
			return fmt.Errorf("stale=%v connected=%v", s.Stale(), s.Connected())
		}
		return nil
	})
	rawV := rawKV(t, url, Versions)
	if _, err := rawV.Put(ctx, "db", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, resumeWithin, "update after restart seen", hasValue(k, Versions, "db", "v2"))
}

// TestMissedWhileDisconnected cuts a KV off a server that keeps running
// (through a proxy): a version published meanwhile is seen after the
// connection returns, and the own entry, which expired meanwhile, is
// created again at once.
func TestMissedWhileDisconnected(t *testing.T) {
	s := natstest.RunServer(t, nil)
	p := newProxy(t, s.Addr().String())
	k := startKV(t, testConfig(t, p.url()))
	ctx := ctxT(t)
	if err := k.Publish(ctx, Nodes, "n1", []byte("n1")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "entries seen", hasValue(k, Versions, "db", "v1"))
	waitFor(t, 3*time.Second, "entries seen", hasValue(k, Nodes, "n1", "n1"))

	p.setUp(false)
	waitFor(t, 3*time.Second, "stale", func() error {
		if !k.Snapshot().Stale() {
			return errors.New("not stale")
		}
		return nil
	})
	rawN := rawKV(t, s.ClientURL(), Nodes)
	rawV := rawKV(t, s.ClientURL(), Versions)
	if _, err := rawV.Put(ctx, "db", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if _, err := rawV.Put(ctx, "other", []byte("x1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "own entry expired on the server", func() error {
		if _, err := rawGet(rawN, "n1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("get: %v", err)
		}
		return nil
	})
	// The snapshot still holds it: with no connection, expiry cannot be
	// seen (that is what Stale says).
	if err := hasValue(k, Nodes, "n1", "n1")(); err != nil {
		t.Errorf("while cut off: %v", err)
	}

	p.setUp(true)
	waitFor(t, resumeWithin, "version published during the outage seen", hasValue(k, Versions, "db", "v2"))
	waitFor(t, resumeWithin, "new key published during the outage seen", hasValue(k, Versions, "other", "x1"))
	waitFor(t, resumeWithin, "own entry created again", func() error {
		_, err := rawGet(rawN, "n1")
		return err
	})
	waitFor(t, resumeWithin, "current again", func() error {
		if s := k.Snapshot(); s.Stale() {
			return errors.New("stale")
		}
		return nil
	})
}

// TestLongOutageReloads: after an outage longer than MarkerTTL/2 the
// watchers reload their buckets whole, so a key whose delete marker may
// have been dropped meanwhile does not linger.
func TestLongOutageReloads(t *testing.T) {
	s := natstest.RunServer(t, nil)
	p := newProxy(t, s.Addr().String())
	c := testConfig(t, p.url())
	c.MarkerTTL = time.Second // so that an outage of half a second counts as long
	k := startKV(t, c)
	ctx := ctxT(t)
	for i := range 3 {
		if _, err := k.Put(ctx, Versions, "db"+strconv.Itoa(i), []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 3*time.Second, "seen", hasValue(k, Versions, "db2", "v1"))

	p.setUp(false)
	cut := time.Now()
	rawV := rawKV(t, s.ClientURL(), Versions)
	// Remove db1 without leaving any marker at all (a purge whose marker
	// expired looks the same to a resuming watcher), and change db2.
	if err := rawV.Purge(ctx, "db1"); err != nil {
		t.Fatal(err)
	}
	if err := rawV.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(-1)); err != nil {
		t.Fatal(err)
	}
	if _, err := rawV.Put(ctx, "db2", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "outage longer than MarkerTTL/2", func() error {
		if time.Since(cut) < c.MarkerTTL {
			return errors.New("not yet")
		}
		return nil
	})
	p.setUp(true)
	waitFor(t, resumeWithin, "changed key seen", hasValue(k, Versions, "db2", "v2"))
	waitFor(t, resumeWithin, "key removed without a marker is gone", hasNoKey(k, Versions, "db1"))
	if err := hasValue(k, Versions, "db0", "v1")(); err != nil {
		t.Error(err)
	}
}

// TestEmbeddedServerReplaced: the in-process connection follows the
// embedded server's atomic pointer, so the client reconnects to a new
// server instance (a client given the *server.Server never would).
func TestEmbeddedServerReplaced(t *testing.T) {
	c := testConfig(t)
	k := startKV(t, c)
	ctx := ctxT(t)
	if _, err := k.Put(ctx, Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "seen", hasValue(k, Versions, "db", "v1"))

	old := k.emb.srv.Load()
	old.Shutdown()
	old.WaitForShutdown()
	waitFor(t, 3*time.Second, "disconnected", func() error {
		if k.Snapshot().Connected() {
			return errors.New("still connected")
		}
		return nil
	})
	opts, err := serverOptions(k.cfg, k.self)
	if err != nil {
		t.Fatal(err)
	}
	s, err := k.emb.startServer(ctx, opts, k.cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	k.emb.srv.Store(s)
	waitFor(t, resumeWithin, "reconnected and current", func() error {
		if s := k.Snapshot(); s.Stale() || !s.Connected() {
			return fmt.Errorf("stale=%v connected=%v", s.Stale(), s.Connected())
		}
		return nil
	})
	waitFor(t, resumeWithin, "write after the replacement", func() error {
		_, err := k.Put(ctx, Versions, "db", []byte("v2"))
		return err
	})
	waitFor(t, resumeWithin, "seen", hasValue(k, Versions, "db", "v2"))
}
