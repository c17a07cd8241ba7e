package kvwatch

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
)

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestEntries covers one KV's own and plain entries: an own entry outlives
// several TTLs thanks to the heartbeat, a plain Put stays, Withdraw and
// Delete remove them, and a snapshot never changes once taken.
func TestEntries(t *testing.T) {
	k := startKV(t, testConfig(t))
	ctx := ctxT(t)

	if err := k.Publish(ctx, Nodes, names.NodeKey("n1"), []byte("serving")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, Versions, names.VersionKey("db"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "own entry and version seen", func() error {
		if err := hasValue(k, Nodes, "n1", "serving")(); err != nil {
			return err
		}
		return hasValue(k, Versions, "db", "v1")()
	})
	before := k.Snapshot()
	firstRev, _ := before.Get(Nodes, "n1")
	skipped := testutil.ToFloat64(k.met.refreshesSkipped)

	// Watch for three TTLs: the own entry must never disappear and the
	// heartbeat must have refreshed it; the plain entry must stay.
	end := time.Now().Add(3 * k.cfg.EntryTTL)
	for time.Now().Before(end) {
		if err := hasValue(k, Nodes, "n1", "serving")(); err != nil {
			t.Fatalf("own entry lost while alive: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // sampling interval of an observation window
	}
	// The refreshes reached the watcher, which left the snapshot alone.
	if refreshes := testutil.ToFloat64(k.met.refreshesSkipped) - skipped; refreshes < 5 {
		t.Errorf("own entry refreshed %v times in 3 TTLs, want >= 5", refreshes)
	}
	if last, _ := k.Snapshot().Get(Nodes, "n1"); last.Revision != firstRev.Revision {
		t.Errorf("a refresh changed the snapshot: revision %d, then %d", firstRev.Revision, last.Revision)
	}
	if err := hasValue(k, Versions, "db", "v1")(); err != nil {
		t.Fatalf("plain entry after 3 TTLs: %v", err)
	}

	// Updating an own entry goes through the same CAS write.
	if err := k.Publish(ctx, Nodes, "n1", []byte("draining")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "own entry updated", hasValue(k, Nodes, "n1", "draining"))
	if _, err := k.Put(ctx, Versions, "db", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "version updated", hasValue(k, Versions, "db", "v2"))

	// The snapshot taken before is unchanged.
	if e, _ := before.Get(Nodes, "n1"); string(e.Value) != "serving" || e.Revision != firstRev.Revision {
		t.Errorf("old snapshot changed: n1 = %q rev %d", e.Value, e.Revision)
	}
	if e, _ := before.Get(Versions, "db"); string(e.Value) != "v1" {
		t.Errorf("old snapshot changed: db = %q", e.Value)
	}

	if err := k.Withdraw(ctx, Nodes, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := k.Delete(ctx, Versions, "db"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "withdrawn entry gone", hasNoKey(k, Nodes, "n1"))
	waitFor(t, 3*time.Second, "deleted version gone", hasNoKey(k, Versions, "db"))

	// A withdrawn key can be published again (Create over the purge marker).
	if err := k.Publish(ctx, Nodes, "n1", []byte("back")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "republished entry", hasValue(k, Nodes, "n1", "back"))
}

func TestWrongBucketAndKey(t *testing.T) {
	k := startKV(t, testConfig(t))
	ctx := ctxT(t)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"Publish Versions", k.Publish(ctx, Versions, "db", nil), ErrWrongBucket},
		{"Withdraw Versions", k.Withdraw(ctx, Versions, "db"), ErrWrongBucket},
		{"Put Nodes", func() error { _, err := k.Put(ctx, Nodes, "n", nil); return err }(), ErrWrongBucket},
		{"Delete Partitions", k.Delete(ctx, Partitions, "a.b.c"), ErrWrongBucket},
		{"Publish bad key", k.Publish(ctx, Nodes, "a b", nil), ErrInvalidKey},
		{"Publish empty key", k.Publish(ctx, Partitions, "", nil), ErrInvalidKey},
		{"Put wildcard", func() error { _, err := k.Put(ctx, Versions, "db.>", nil); return err }(), ErrInvalidKey},
		{"Publish bad bucket", k.Publish(ctx, Bucket(7), "n", nil), ErrWrongBucket},
		{"Withdraw unknown", k.Withdraw(ctx, Nodes, "nobody"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Errorf("err = %v, want %v", tt.err, tt.want)
			}
		})
	}
}

// TestTwoNodes runs two KVs on one server (the second connects to the
// first's embedded server over TCP): each sees the other's entries, also
// under concurrent writes and reads.
func TestTwoNodes(t *testing.T) {
	a := startKV(t, testConfig(t))
	b := startKV(t, testConfig(t, a.ClientURL()))
	if b.ClientURL() != "" {
		t.Errorf("ClientURL of a client-only KV = %q, want empty", b.ClientURL())
	}
	ctx := ctxT(t)

	var wg sync.WaitGroup
	for i, k := range []*KV{a, b} {
		node := "n" + strconv.Itoa(i)
		wg.Go(func() {
			if err := k.Publish(ctx, Nodes, names.NodeKey(node), []byte(node)); err != nil {
				t.Error(err)
			}
			for v := range 5 {
				if err := k.Publish(ctx, Partitions, names.PartitionKey("db", "v"+strconv.Itoa(v), node), []byte("0,1")); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Go(func() { // a reader racing the writers
			for range 200 {
				s := k.Snapshot()
				s.Range(Partitions, "db.", func(string, Entry) bool { return true })
				_ = s.Keys(Nodes)
			}
		})
	}
	wg.Wait()
	for _, k := range []*KV{a, b} {
		waitFor(t, 3*time.Second, "both nodes seen", func() error {
			s := k.Snapshot()
			if s.Len(Nodes) != 2 || s.Len(Partitions) != 10 {
				return fmt.Errorf("nodes %v, partitions %v", s.Keys(Nodes), s.Keys(Partitions))
			}
			return nil
		})
	}
	var holders []string
	a.Snapshot().Range(Partitions, names.PartitionPrefix("db", "v3"), func(key string, _ Entry) bool {
		_, _, node, ok := names.ParsePartitionKey(key)
		if !ok {
			t.Errorf("bad partition key %q", key)
		}
		holders = append(holders, node)
		return true
	})
	if fmt.Sprint(holders) != "[n0 n1]" {
		t.Errorf("holders of db v3 = %v, want [n0 n1]", holders)
	}
}

// TestUncleanStopExpires: a node that vanishes without Shutdown (its
// connection closed, nothing deleted) disappears from another node's view
// once its entries' TTL runs out.
func TestUncleanStopExpires(t *testing.T) {
	a := startKV(t, testConfig(t))
	bc := testConfig(t, a.ClientURL())
	bc.PartitionsTTL = 3 * time.Second
	b := startKV(t, bc)
	ctx := ctxT(t)
	if err := b.Publish(ctx, Nodes, "nb", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, Partitions, names.PartitionKey("db", "v1", "nb"), []byte("0")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "b's entries seen by a", hasValue(a, Partitions, "db.v1.nb", "0"))
	waitFor(t, 3*time.Second, "b's node entry seen by a", hasValue(a, Nodes, "nb", "b"))

	b.Conn().Close() // the process is gone: no delete, no more heartbeats
	cut := time.Now()
	ttl := a.cfg.EntryTTL
	waitFor(t, ttl+2*time.Second, "b's node entry expired", hasNoKey(a, Nodes, "nb"))
	// It must not go sooner than the TTL allows after its last refresh.
	if gone := time.Since(cut); gone < ttl-a.cfg.Heartbeat-100*time.Millisecond {
		t.Errorf("entry gone %v after the stop, before TTL %v minus a heartbeat", gone, ttl)
	}
	// The partitions entry lives PartitionsTTL (readers ignore it once
	// its node entry is gone), then goes too.
	if err := hasValue(a, Partitions, "db.v1.nb", "0")(); err != nil && time.Since(cut) < bc.PartitionsTTL-time.Second {
		t.Errorf("b's partitions entry went with its node entry: %v", err)
	}
	waitFor(t, bc.PartitionsTTL+2*time.Second, "b's partition entry expired", hasNoKey(a, Partitions, "db.v1.nb"))
	waitFor(t, 3*time.Second, "b sees itself disconnected", func() error {
		if s := b.Snapshot(); !s.Stale() || s.Connected() {
			return fmt.Errorf("stale=%v connected=%v", s.Stale(), s.Connected())
		}
		// The stale age counts, from the disconnect or from a watcher
		// restart just before it.
		if age := b.staleSeconds(); age <= 0 {
			return fmt.Errorf("stale for %vs, disconnected %v ago", age, time.Since(cut))
		}
		return nil
	})
}

// TestShutdownDeletes: a clean Shutdown deletes own entries at once.
func TestShutdownDeletes(t *testing.T) {
	a := startKV(t, testConfig(t))
	c := testConfig(t, a.ClientURL())
	c.EntryTTL = time.Minute // expiry must not be what removes it
	c.Heartbeat = time.Second
	b := startKV(t, c)
	ctx := ctxT(t)
	if err := b.Publish(ctx, Nodes, "nb", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "b seen", hasValue(a, Nodes, "nb", "b"))
	waitFor(t, 3*time.Second, "version seen", hasValue(b, Versions, "db", "v1"))
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "b gone after shutdown", hasNoKey(a, Nodes, "nb"))
	if err := b.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown = %v, want nil", err)
	}
	if err := b.Publish(ctx, Nodes, "nb", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Shutdown = %v, want ErrClosed", err)
	}
	// The last snapshot stays readable, marked stale.
	if s := b.Snapshot(); !s.Stale() || s.Connected() || s.Len(Versions) != 1 {
		t.Errorf("snapshot after Shutdown: stale=%v connected=%v versions=%d", s.Stale(), s.Connected(), s.Len(Versions))
	}
}

// TestTakeOver: a key left by an earlier run of the node (same node ID) is
// taken over; one changed under a running node is taken back.
func TestTakeOver(t *testing.T) {
	k := startKV(t, testConfig(t))
	raw := rawKV(t, k.ClientURL(), Nodes)
	ctx := ctxT(t)
	if _, err := raw.Create(ctx, "n1", []byte("old run"), jetstream.KeyTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := k.Publish(ctx, Nodes, "n1", []byte("new run")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "taken over", hasValue(k, Nodes, "n1", "new run"))

	if _, err := raw.Put(ctx, "n1", []byte("intruder")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "taken back by the heartbeat", func() error {
		e, err := rawGet(raw, "n1")
		if err != nil {
			return err
		}
		if string(e.Value()) != "new run" {
			return fmt.Errorf("server has %q", e.Value())
		}
		return nil
	})
	// Written back with a TTL: once the node is gone (its connection
	// closed: no delete, no more heartbeats) it expires.
	k.Conn().Close()
	waitFor(t, 3*time.Second, "expired after the heartbeat stopped", func() error {
		if e, err := rawGet(raw, "n1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("still there (%v): %v", e, err)
		}
		return nil
	})
}

func TestSubscribe(t *testing.T) {
	k := startKV(t, testConfig(t))
	ctx := ctxT(t)
	ch, cancel := k.Subscribe()
	first := <-ch
	if first == nil {
		t.Fatal("first snapshot is nil")
	}

	// A consumer that does not read gets the latest snapshot in the end.
	var rev uint64
	for i := range 20 {
		r, err := k.Put(ctx, Versions, "db", []byte("v"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		rev = r
	}
	waitFor(t, 3*time.Second, "last put applied", func() error {
		if got := k.Snapshot().Revision(Versions); got < rev {
			return fmt.Errorf("revision %d < %d", got, rev)
		}
		return nil
	})
	var last *Snapshot
	waitFor(t, 3*time.Second, "latest snapshot delivered", func() error {
		select {
		case s := <-ch:
			last = s
		default:
		}
		if last == nil || last.Revision(Versions) < rev {
			return errors.New("not yet")
		}
		return nil
	})
	if e, _ := last.Get(Versions, "db"); string(e.Value) != "v19" {
		t.Errorf("latest delivered value %q, want v19", e.Value)
	}

	// Snapshots arrive in order.
	var prev uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case s, ok := <-ch:
				if !ok {
					return
				}
				if r := s.Revision(Versions); r < prev {
					t.Errorf("snapshot revision went back: %d after %d", r, prev)
				} else {
					prev = r
				}
			case <-done:
				return
			}
		}
	})
	for i := range 20 {
		if _, err := k.Put(ctx, Versions, "db", []byte("w"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 3*time.Second, "applied", hasValue(k, Versions, "db", "w19"))
	close(done)
	wg.Wait()

	cancel()
	cancel() // idempotent
	for range ch {
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := testConfig(t)
	c.Registerer = reg
	k := startKV(t, c)
	if _, err := k.Put(ctxT(t), Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "metrics", func() error {
		mfs, err := reg.Gather()
		if err != nil {
			return err
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				name := mf.GetName()
				for _, l := range m.GetLabel() {
					name += "/" + l.GetValue()
				}
				got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		if got["spangle_kvwatch_connected"] != 1 || got["spangle_kvwatch_snapshot_revision/versions"] < 1 {
			return fmt.Errorf("metrics %v", got)
		}
		if v, ok := got["spangle_kvwatch_snapshot_stale_seconds"]; !ok || v != 0 {
			return fmt.Errorf("stale seconds %v (present %v)", v, ok)
		}
		return nil
	})
	// Shutdown unregisters, so a new KV can use the same registry.
	if err := k.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	c2 := testConfig(t)
	c2.Registerer = reg
	startKV(t, c2)
}

func TestLifecycle(t *testing.T) {
	t.Run("shutdown before start", func(t *testing.T) {
		k, err := New(testConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		if k.Snapshot() == nil || !k.Snapshot().Stale() {
			t.Fatal("New: want a non-nil, stale snapshot")
		}
		if err := k.Publish(ctxT(t), Nodes, "n", nil); !errors.Is(err, ErrNotStarted) {
			t.Errorf("Publish before Start = %v, want ErrNotStarted", err)
		}
		if err := k.Shutdown(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if err := k.Start(ctxT(t)); !errors.Is(err, ErrClosed) {
			t.Errorf("Start after Shutdown = %v, want ErrClosed", err)
		}
	})
	t.Run("start twice", func(t *testing.T) {
		k := startKV(t, testConfig(t))
		if err := k.Start(ctxT(t)); !errors.Is(err, ErrStarted) {
			t.Errorf("second Start = %v, want ErrStarted", err)
		}
	})
	t.Run("start times out, then shutdown", func(t *testing.T) {
		// Nothing listens on this port: Start retries until its context ends.
		k := newKV(t, testConfig(t, "nats://127.0.0.1:"+strconv.Itoa(natstest.FreePort(t))))
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := k.Start(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Start = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("shutdown cancels start", func(t *testing.T) {
		k := newKV(t, testConfig(t, "nats://127.0.0.1:"+strconv.Itoa(natstest.FreePort(t))))
		errc := make(chan error, 1)
		go func() { errc <- k.Start(context.Background()) }()
		waitFor(t, 3*time.Second, "Start under way", func() error {
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.state != stateStarting {
				return errors.New("not starting")
			}
			return nil
		})
		if err := k.Shutdown(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err == nil {
			t.Error("Start returned nil after Shutdown")
		}
	})
	t.Run("missing nkey seed file", func(t *testing.T) {
		s := natstest.RunServer(t, nil)
		c := testConfig(t, s.ClientURL())
		c.NKeySeedFile = filepath.Join(t.TempDir(), "missing.nk")
		k := newKV(t, c)
		if err := k.Start(ctxT(t)); err == nil || !strings.Contains(err.Error(), "nkey seed") {
			t.Errorf("Start = %v, want an nkey seed error", err)
		}
	})
	t.Run("replicas beyond the deployment", func(t *testing.T) {
		c := testConfig(t)
		c.Replicas = 3 // one server: JetStream refuses (10074)
		k := newKV(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if err := k.Start(ctx); err == nil {
			t.Error("Start with Replicas 3 on one server succeeded")
		}
		if k.ClientURL() != "" {
			t.Error("embedded server left running after a failed Start")
		}
	})
}

// TestConcurrentOwnWrites races Publish and Withdraw of the same keys with
// the heartbeat and readers; run with -race. The last write of each key
// must win.
func TestConcurrentOwnWrites(t *testing.T) {
	k := startKV(t, testConfig(t))
	ctx := ctxT(t)
	keys := []string{"n1", "n2", "n3"}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 15 {
				key := keys[(g+i)%len(keys)]
				var err error
				if i%4 == 3 {
					err = k.Withdraw(ctx, Nodes, key)
				} else {
					err = k.Publish(ctx, Nodes, key, []byte(strconv.Itoa(g)))
				}
				if err != nil {
					t.Error(err)
				}
				_ = k.Snapshot().Keys(Nodes)
			}
		})
	}
	wg.Wait()
	for _, key := range keys {
		if err := k.Publish(ctx, Nodes, key, []byte("final-"+key)); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range keys {
		waitFor(t, 3*time.Second, "last write wins", hasValue(k, Nodes, key, "final-"+key))
	}
	// And they stay: the heartbeat refreshes the registered values.
	skipped := testutil.ToFloat64(k.met.refreshesSkipped)
	waitFor(t, 3*time.Second, "refreshed", func() error {
		if got := testutil.ToFloat64(k.met.refreshesSkipped) - skipped; got < 3 {
			return fmt.Errorf("%v refreshes", got)
		}
		return hasValue(k, Nodes, "n1", "final-n1")()
	})
}

// TestPublishWaitEndsWithCtx: a Publish queued behind a write of the
// same key that the server does not answer returns when its ctx ends,
// not when that write times out. It fails with the key locks the own
// loop replaced: the Publish waited on the key's lock for the held
// write's OpTimeout.
func TestPublishWaitEndsWithCtx(t *testing.T) {
	s := natstest.RunServer(t, nil)
	p := newProxy(t, s.Addr().String())
	c := testConfig(t, p.url())
	c.EntryTTL, c.Heartbeat = time.Minute, 20*time.Second // no ping nor refresh while held
	c.OpTimeout = 5 * time.Second
	k := startKV(t, c)
	ctx := ctxT(t)
	if err := k.Publish(ctx, Nodes, "n1", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	p.hold(true)
	first := make(chan error, 1)
	go func() { first <- k.Publish(ctx, Nodes, "n1", []byte("v2")) }()
	waitFor(t, c.OpTimeout/2, "the first write held", func() error {
		if !p.holds(".n1") {
			return errors.New("not held yet")
		}
		return nil
	})
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := k.Publish(short, Nodes, "n1", []byte("v3"))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued Publish = %v, want its ctx's deadline", err)
	}
	if took > c.OpTimeout/2 {
		t.Errorf("queued Publish returned after %v: it waited for the held write (OpTimeout %v)", took, c.OpTimeout)
	}
	select {
	case err := <-first:
		t.Fatalf("the held write returned first (%v)", err)
	default:
	}
	p.hold(false)
	<-first
}

// TestShutdownDrainsPublishes races Publishes with Shutdown: each returns
// nil or ErrClosed, none hangs, and the deletes of Shutdown run after the
// writes asked for before them, so no own entry is left on the server.
func TestShutdownDrainsPublishes(t *testing.T) {
	a := startKV(t, testConfig(t))
	c := testConfig(t, a.ClientURL())
	c.EntryTTL, c.Heartbeat = time.Minute, time.Second // expiry must not be what removes them
	b := startKV(t, c)
	ctx := ctxT(t)
	var published atomic.Int64
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for g := range cap(errs) {
		wg.Go(func() {
			for i := range 500 {
				err := b.Publish(ctx, Nodes, fmt.Sprintf("n%d-%d", g, i), []byte("x"))
				if err != nil {
					errs <- err
					return
				}
				published.Add(1)
			}
			errs <- nil
		})
	}
	waitFor(t, 5*time.Second, "some entries published", func() error {
		if n := published.Load(); n < 20 {
			return fmt.Errorf("%d published", n)
		}
		return nil
	})
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Publish racing Shutdown = %v, want nil or ErrClosed", err)
		}
	}
	raw := rawKV(t, a.ClientURL(), Nodes)
	keys, err := raw.Keys(ctx)
	if !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Errorf("after Shutdown (%d published) the bucket holds %d keys (%v)", published.Load(), len(keys), err)
	}
}
