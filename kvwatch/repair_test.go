package kvwatch

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
)

// TestRepairBucket deletes, purges and re-creates each bucket under a
// running KV, as another client, and checks that the KV's own entries come
// back on the server and in its snapshot within a few heartbeats, with the
// repair counted, and that another writer's purged key leaves the
// snapshot (a purge sends watchers nothing: only the reload removes it).
// PartitionsTTL is long, so the partitions entry would otherwise come
// back only after its refresh, a third of it later.
func TestRepairBucket(t *testing.T) {
	c := testConfig(t)
	c.PartitionsTTL = 3 * time.Minute
	k := startKV(t, c)
	ctx := ctxT(t)
	own := map[Bucket][2]string{
		Nodes:      {"n1", "node"},
		Partitions: {"db.v1.n1", "0,1"},
		Versions:   {"db", "v1"},
	}
	write := func() {
		t.Helper()
		for b, kv := range own {
			var err error
			if b == Versions {
				_, err = k.Put(ctx, b, kv[0], []byte(kv[1]))
			} else {
				err = k.Publish(ctx, b, kv[0], []byte(kv[1]))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	write()
	js := natstest.JetStream(t, k.ClientURL())
	for _, b := range allBuckets {
		for _, action := range []string{"delete", "purge", "recreate"} {
			t.Run(fmt.Sprintf("%s/%s", b, action), func(t *testing.T) {
				ctx := ctxT(t)
				w := watched{b: b, name: bucketName("test", b)}
				// Another writer's permanent key, only in Versions (the
				// TTL'd buckets refuse plain puts from a KV; a raw one
				// would do, but the point is made once).
				if b == Versions {
					if _, err := k.Put(ctx, Versions, "other", []byte("x")); err != nil {
						t.Fatal(err)
					}
					k.puts.forget("other") // as if another node had written it
					waitFor(t, 5*time.Second, "the other key", hasValue(k, Versions, "other", "x"))
				}
				before := testutil.ToFloat64(k.met.bucketRepairs.WithLabelValues(b.String(), action))
				stream := "KV_" + w.name
				switch action {
				case "delete":
					if err := js.DeleteStream(ctx, stream); err != nil {
						t.Fatal(err)
					}
				case "purge":
					s, err := js.Stream(ctx, stream)
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Purge(ctx); err != nil {
						t.Fatal(err)
					}
				case "recreate":
					if err := js.DeleteStream(ctx, stream); err != nil {
						t.Fatal(err)
					}
					if _, err := k.ensureBucket(ctx, js, w, 5*time.Second); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				key, value := own[b][0], own[b][1]
				waitFor(t, 5*time.Second, "the own entry back on the server", func() error {
					raw, err := js.KeyValue(ctx, w.name)
					if err != nil {
						return err
					}
					e, err := rawGet(raw, key)
					if err != nil {
						return err
					}
					if string(e.Value()) != value {
						return fmt.Errorf("%s = %q", key, e.Value())
					}
					return nil
				})
				waitFor(t, 5*time.Second, "the own entry in the snapshot", hasValue(k, b, key, value))
				if b == Versions {
					waitFor(t, 5*time.Second, "the purged key gone from the snapshot", hasNoKey(k, Versions, "other"))
				}
				t.Logf("repaired after %v", time.Since(start).Round(time.Millisecond))
				waitFor(t, 5*time.Second, "the repair counted", func() error {
					var got float64
					for _, reason := range []string{"deleted", "recreated", "purged"} {
						got += testutil.ToFloat64(k.met.bucketRepairs.WithLabelValues(b.String(), reason))
					}
					if got <= before {
						return fmt.Errorf("repairs of %s: %v", b, got)
					}
					return nil
				})
			})
		}
	}
}

// TestRepairWaitsACheck: a bucket found deleted is created again only
// at the next check, not at once: nats-server
// forgets a deleted stream before it moves the stream's files away, and
// a stream created in that moment recovers them as they vanish. The
// heartbeat is made long: the test makes the checks.
func TestRepairWaitsACheck(t *testing.T) {
	c := testConfig(t)
	c.EntryTTL, c.Heartbeat = time.Hour, 30*time.Minute
	k := startKV(t, c)
	ctx := ctxT(t)
	if _, err := k.Put(ctx, Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, k.ClientURL())
	stream := "KV_" + bucketName("test", Versions)
	var seen [numBuckets]bucketSeen
	k.checkBuckets(ctx, &seen)
	if err := js.DeleteStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	k.checkBuckets(ctx, &seen)
	if _, err := js.Stream(ctx, stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the bucket was created again before a second check: %v", err)
	}
	k.checkBuckets(ctx, &seen)
	raw := rawKV(t, k.ClientURL(), Versions)
	if e, err := rawGet(raw, "db"); err != nil || string(e.Value()) != "v1" {
		t.Fatalf("after the second check: db = %v, %v; want v1", e, err)
	}
}

// TestRepairKeepsNewerVersion: a versions entry another writer replaced
// is not written back by a repair.
func TestRepairKeepsNewerVersion(t *testing.T) {
	k := startKV(t, testConfig(t))
	ctx := ctxT(t)
	if _, err := k.Put(ctx, Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	raw := rawKV(t, k.ClientURL(), Versions)
	if _, err := raw.Put(ctx, "db", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "v2", hasValue(k, Versions, "db", "v2"))
	// The KV's write of v1 is gone (history 1): the next check sees a
	// revision the bucket no longer holds, and tries to create the key
	// again, which exists: v2 stays, and the KV forgets its v1.
	waitFor(t, 5*time.Second, "v1 forgotten", func() error {
		if _, _, ok := k.puts.get("db"); ok {
			return fmt.Errorf("still tracked")
		}
		return nil
	})
	if e, err := rawGet(raw, "db"); err != nil || string(e.Value()) != "v2" {
		t.Fatalf("db = %v, %v; want v2", e, err)
	}
	if got := testutil.ToFloat64(k.met.bucketRepairs.WithLabelValues(Versions.String(), "purged")); got != 0 {
		t.Errorf("a replaced versions entry counted as %v repairs", got)
	}
}

// TestRepairCluster: three KVs on a three-server cluster (R3 buckets),
// each with a long-lived partitions entry; the partitions bucket is
// deleted, then the versions bucket purged, under them. Every node's
// entries come back, in every node's snapshot, within a few heartbeats,
// though several nodes re-create and repair the same bucket at once.
func TestRepairCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three-server cluster")
	}
	cfgs := clusterConfigs(t, 3)
	for i := range cfgs {
		cfgs[i].PartitionsTTL = 3 * time.Minute
	}
	kvs := startAll(t, cfgs)
	for i, k := range kvs {
		node := "n" + strconv.Itoa(i+1)
		waitFor(t, 15*time.Second, node+" published", func() error {
			if err := k.Publish(ctxT(t), Partitions, names.PartitionKey("db", "v1", node), []byte(node)); err != nil {
				return err
			}
			_, err := k.Put(ctxT(t), Versions, names.VersionKey("db-"+node), []byte(node))
			return err
		})
	}
	complete := func(what string) {
		t.Helper()
		start := time.Now()
		for _, k := range kvs {
			for i := range kvs {
				node := "n" + strconv.Itoa(i+1)
				waitFor(t, 15*time.Second, what+": "+node+"'s partitions entry", hasValue(k, Partitions, names.PartitionKey("db", "v1", node), node))
				waitFor(t, 15*time.Second, what+": "+node+"'s versions entry", hasValue(k, Versions, names.VersionKey("db-"+node), node))
			}
		}
		t.Logf("%s: complete everywhere after %v", what, time.Since(start).Round(time.Millisecond))
	}
	complete("start")
	js := natstest.JetStream(t, kvs[0].ClientURL())
	if err := js.DeleteStream(ctxT(t), "KV_"+bucketName("test", Partitions)); err != nil {
		t.Fatal(err)
	}
	// The bucket is gone on the server: the snapshots must lose nothing
	// for good, and the server must hold every entry again.
	waitFor(t, 15*time.Second, "every partitions entry back on the server", func() error {
		kv, err := js.KeyValue(ctxT(t), bucketName("test", Partitions))
		if err != nil {
			return err
		}
		for i := range kvs {
			if _, err := rawGet(kv, names.PartitionKey("db", "v1", "n"+strconv.Itoa(i+1))); err != nil {
				return fmt.Errorf("n%d: %w", i+1, err)
			}
		}
		return nil
	})
	complete("after the partitions bucket was deleted")
	s, err := js.Stream(ctxT(t), "KV_"+bucketName("test", Versions))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "every versions entry back on the server", func() error {
		kv, err := js.KeyValue(ctxT(t), bucketName("test", Versions))
		if err != nil {
			return err
		}
		for i := range kvs {
			if _, err := rawGet(kv, names.VersionKey("db-n"+strconv.Itoa(i+1))); err != nil {
				return fmt.Errorf("n%d: %w", i+1, err)
			}
		}
		return nil
	})
	complete("after the versions bucket was purged")
}

// TestOpenVersions: OpenVersions (spangle publish) creates a missing
// versions bucket with the nodes' configuration and no other bucket (it
// created the nodes and partitions buckets at a hub of regions, where no
// node uses them); it binds an existing one as it is, where a KV's Start
// updates it to its Config (a publish with its default --replicas 1 used
// to turn a three-server cluster's buckets to one replica that way).
func TestOpenVersions(t *testing.T) {
	s := natstest.RunServer(t, nil)
	js := natstest.JetStream(t, s.ClientURL())
	ctx := ctxT(t)
	c := testConfig(t, s.ClientURL())
	kv, err := OpenVersions(ctx, js, c)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.bucketConfig(watched{b: Versions, name: bucketName("test", Versions)}); !sameBucketConfig(st.Config(), want) {
		t.Errorf("created %+v, want the nodes' %+v", st.Config(), want)
	}
	var streams []string
	for n := range js.StreamNames(ctx).Name() {
		streams = append(streams, n)
	}
	if want := []string{names.KVStream(bucketName("test", Versions))}; !slices.Equal(streams, want) {
		t.Errorf("streams %q, want only %q", streams, want)
	}

	marker := func() time.Duration {
		t.Helper()
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Config().LimitMarkerTTL
	}
	was := marker()
	c.MarkerTTL = was + time.Minute
	if _, err := OpenVersions(ctx, js, c); err != nil {
		t.Fatal(err)
	}
	if got := marker(); got != was {
		t.Fatalf("OpenVersions: marker TTL %v, want %v kept", got, was)
	}
	startKV(t, c)
	if got := marker(); got != was+time.Minute {
		t.Fatalf("a KV's Start: marker TTL %v, want %v", got, was+time.Minute)
	}
	c.ClusterName = "a.b"
	if _, err := OpenVersions(ctx, js, c); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a bad cluster name: %v", err)
	}
}

// TestRepairSkipsReplacedVersion: a versions entry this node wrote, then
// replaced by another writer, is not brought back by a repair after the
// bucket is purged: the other writer's value was the newer.
func TestRepairSkipsReplacedVersion(t *testing.T) {
	k := startKV(t, testConfig(t))
	ctx := ctxT(t)
	if _, err := k.Put(ctx, Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, Versions, "mine", []byte("x")); err != nil {
		t.Fatal(err)
	}
	raw := rawKV(t, k.ClientURL(), Versions)
	if _, err := raw.Put(ctx, "db", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "v2 seen", hasValue(k, Versions, "db", "v2"))
	js := natstest.JetStream(t, k.ClientURL())
	s, err := js.Stream(ctx, "KV_"+bucketName("test", Versions))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the own entry back", hasValue(k, Versions, "mine", "x"))
	waitFor(t, 5*time.Second, "the replaced one not", hasNoKey(k, Versions, "db"))
	if _, err := rawGet(raw, "db"); err == nil {
		t.Fatal("the replaced v1 (or v2) was written back")
	}
}

// TestRepairPutSeenEarly: the watcher may deliver a repair's own write of
// a versions entry before Create returns its revision. That write must
// not make the KV forget the entry (it did, and the next loss of the
// bucket was then not repaired: TestRepairBucket failed in CI on it);
// a write by someone else after the repair's still does.
func TestRepairPutSeenEarly(t *testing.T) {
	// Not started: no heartbeat repairs, no watcher delivers; the test
	// plays both, in the order that went wrong.
	k := newKV(t, testConfig(t))
	for _, tc := range []struct {
		name   string
		seen   uint64 // the revision the watcher delivers while the repair writes
		rev    uint64 // the repair's own revision
		forget bool
	}{
		{"own write seen first", 9, 9, false},
		{"another write after ours", 10, 9, true},
		{"nothing seen", 0, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k.puts.note("db", []byte("v1"), 5)
			p, _, _ := k.puts.get("db")
			if !k.puts.start("db", p) {
				t.Fatal("the repair did not start")
			}
			if tc.seen != 0 {
				k.puts.saw("db", tc.seen)
			}
			k.puts.end("db", p, tc.rev, nil)
			_, gotRev, kept := k.puts.get("db")
			switch {
			case tc.forget && kept:
				t.Fatalf("kept the entry (rev %d) after another writer's revision %d", gotRev, tc.seen)
			case !tc.forget && !kept:
				t.Fatal("forgot the entry the repair wrote again")
			case !tc.forget && gotRev != tc.rev:
				t.Fatalf("entry at revision %d, want the repair's %d", gotRev, tc.rev)
			}
		})
	}
	// Outside a repair, a write that is not the KV's own still forgets it.
	k.puts.note("db", []byte("v1"), 5)
	k.puts.saw("db", 6)
	_, _, kept := k.puts.get("db")
	if kept {
		t.Fatal("kept an entry another writer replaced")
	}
}
