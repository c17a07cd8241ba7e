package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/kvwatch/region"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/source/objstore"
)

// The source faults of issue 33: a source listing that lacks a served db
// (moved away, an empty mount point, a bucket or a region's mirror
// re-created empty) must never cost a lookup or a key.

// missingFromSource returns the dbs base's status marks missing from the
// source.
func missingFromSource(base string) (map[string]bool, error) {
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		DBs map[string]struct {
			MissingSince string `json:"missing_from_source_since"`
		} `json:"dbs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("status: %d: %w", resp.StatusCode, err)
	}
	out := map[string]bool{}
	for db, ds := range st.DBs {
		if ds.MissingSince != "" {
			out[db] = true
		}
	}
	return out, nil
}

// waitMissing waits until base's status says d is missing from the
// source (want), or listed.
func waitMissing(t *testing.T, base string, want bool) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s: d missing from the source %v", base, want), func() error {
		m, err := missingFromSource(base)
		if err != nil {
			return err
		}
		if m["d"] != want {
			return fmt.Errorf("missing: %v", m)
		}
		return nil
	})
}

// startLookups runs lookups of key-0 … key-(keys-1) of d at each base,
// wanting version's values.
func startLookups(t *testing.T, version string, keys int, bases ...string) *nodetest.Lookups {
	return nodetest.StartLookups(t, len(bases), keys*len(bases), func(i int) error {
		base, k := bases[i%len(bases)], i/len(bases)
		val, ver, _, err := clusterGet(http.DefaultClient, base, k)
		if want := fmt.Sprintf("%s:%d", version, k); err != nil || val != want || ver != version {
			return fmt.Errorf("%s key-%d: %q from %q, %v; want %q", base, k, val, ver, err, want)
		}
		return nil
	})
}

// stopLookups waits for more lookups, stops them and fails the test if
// any failed.
func stopLookups(t *testing.T, l *nodetest.Lookups) {
	t.Helper()
	before := l.Done()
	waitFor(t, "more lookups", func() error {
		if l.Done() < before+50 {
			return fmt.Errorf("%d lookups", l.Done()-before)
		}
		return nil
	})
	if done, failed, first := l.Stop(); failed != 0 {
		t.Fatalf("%d of %d lookups failed; the first: %v", failed, done, first)
	}
	t.Logf("%d lookups, none failed", l.Done())
}

// TestSourceEmptiedProcess plays the report on the binary: a
// served db moved out of the source, then SIGHUP, keeps serving (before:
// "db is gone from the source; removing it", its files deleted, 404s and
// /readyz 200), marked missing in the status and metrics; a restart on
// the data dir with an empty source serves it too (before: everything
// deleted at start); an operator's DELETE /admin/dbs/d removes it.
func TestSourceEmptiedProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const keys = 30
	bin := buildBinary(t)
	root, aside, data := t.TempDir(), t.TempDir(), t.TempDir()
	writeVersion(t, root, "d", "v1", 3, keys)
	debug := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	s := startServe(t, bin, false, "--source", root, "--data-dir", data, "--debug-bind", debug)
	s.logOnFailure(t)
	waitFor(t, "v1 served", func() error { return readAll(s.http, "v1", keys) })
	readers := startLookups(t, "v1", keys, s.http)

	if err := os.Rename(filepath.Join(root, "d"), filepath.Join(aside, "d")); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitMissing(t, s.http, true)
	stopLookups(t, readers)
	if err := readAll(s.http, "v1", keys); err != nil {
		t.Fatal(err)
	}
	metrics := httpBody(t, s.http+"/metrics")
	if !strings.Contains(metrics, `spangle_db_missing_from_source_seconds{db="d"}`) {
		t.Errorf("/metrics has no spangle_db_missing_from_source_seconds{db=\"d\"}")
	}
	if !strings.Contains(s.logs.String(), "db is missing from the source; it keeps serving") {
		t.Errorf("no log line says d is missing")
	}
	s.stop(t)

	// A restart on the data dir with the source still empty.
	s = startServe(t, bin, false, "--source", root, "--data-dir", data, "--debug-bind", debug)
	s.logOnFailure(t)
	if err := readAll(s.http, "v1", keys); err != nil {
		t.Fatalf("restarted on an empty source: %v", err)
	}
	waitMissing(t, s.http, true)

	// The operator removes it.
	req, _ := http.NewRequest("DELETE", "http://"+debug+"/admin/dbs/d", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /admin/dbs/d: %d", resp.StatusCode)
	}
	if resp, err = http.Get(s.http + "/d/key-1"); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("d after its removal: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(data, "dbs", "d")); !os.IsNotExist(err) {
		t.Fatalf("d's data after its removal: %v", err)
	}
	s.stop(t)
}

// httpBody GETs url and returns its body.
func httpBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSourceEmptiedCluster: the source of a two-node cluster (replication
// 2) empties and both nodes list it (SIGHUP): with lookups running at
// both, none fails, no key is lost; the source back, d is listed again.
func TestSourceEmptiedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const keys = 30
	bin := buildBinary(t)
	root, aside := t.TempDir(), t.TempDir()
	writeVersion(t, root, "d", "v1", 4, keys)
	natsPort := natstest.FreePort(t)
	n1 := startClusterProc(t, bin, root, 1, natsPort, testTimeout/4, testTimeout, "")
	n2 := startClusterProc(t, bin, root, 2, natsPort, testTimeout/4, testTimeout, "")
	nodes := []*clusterProc{n1, n2}
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d serves v1", n.id), func() error { return readAll(n.base, "v1", keys) })
	}
	readers := startLookups(t, "v1", keys, n1.base, n2.base)

	if err := os.Rename(filepath.Join(root, "d"), filepath.Join(aside, "d")); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		waitMissing(t, n.base, true)
	}
	stopLookups(t, readers)
	for _, n := range nodes {
		if err := readAll(n.base, "v1", keys); err != nil {
			t.Fatalf("node %d: %v", n.id, err)
		}
	}

	if err := os.Rename(filepath.Join(aside, "d"), filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitMissing(t, n.base, false)
	}
}

// TestObjectSourceEmptiedCluster: the Object Store bucket of a two-node
// cluster is deleted and re-created empty (nats obj add after a loss):
// with lookups running at both nodes, none fails and no key is lost, on
// every node at once; published again, d is listed again at the next
// listing (SIGHUP).
func TestObjectSourceEmptiedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const keys, bucket = 30, "emptied"
	bin := buildBinary(t)
	natsPort := natstest.FreePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	n1 := startClusterProc(t, bin, "nats-object://"+bucket, 1, natsPort, testTimeout/4, testTimeout, "")
	n2 := startClusterProc(t, bin, "nats-object://"+bucket, 2, natsPort, testTimeout/4, testTimeout, "")
	nodes := []*clusterProc{n1, n2}
	src := t.TempDir()
	writeVersion(t, src, "d", "v1", 4, keys)
	publish := publisher(t, bin, src, "nats-object://"+bucket, natsURL)
	waitFor(t, "publish v1", func() error { return publish("v1") })
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d serves v1", n.id), func() error { return readAll(n.base, "v1", keys) })
	}
	lookups := startLookups(t, "v1", keys, n1.base, n2.base)

	js := natstest.JetStream(t, natsURL)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := js.DeleteObjectStore(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.CreateBucket(ctx, js, bucket, 1); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		waitMissing(t, n.base, true)
	}
	stopLookups(t, lookups)
	for _, n := range nodes {
		if err := readAll(n.base, "v1", keys); err != nil {
			t.Fatalf("node %d: %v", n.id, err)
		}
	}

	waitFor(t, "publish v1 again", func() error { return publish("v1") })
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitMissing(t, n.base, false)
		if err := readAll(n.base, "v1", keys); err != nil {
			t.Fatalf("node %d: %v", n.id, err)
		}
	}
}

// TestRegionMirrorEmptied: a region's mirror of the hub's bucket is
// re-created while the region is cut off from the hub, so it lists empty
// until the link is back: the region's node keeps serving every key, with
// lookups running, and lists d again once the mirror has filled.
func TestRegionMirrorEmptied(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	const keys, bucket = 30, "mirrordata"
	bin, natsBin := buildBinary(t), buildNATSServer(t)
	hub := startHub(t, natsBin)
	relay := startRelay(t, hub.leafAddr)
	src := t.TempDir()
	writeVersion(t, src, "d", "v1", 3, keys)
	publish := publisher(t, bin, src, "nats-object://"+bucket, hub.url)
	waitFor(t, "publish v1 at the hub", func() error { return publish("v1") })
	natsPort := natstest.FreePort(t)
	a := startRegionNode(t, bin, 1, bucket, fmt.Sprintf(`require_success_file = true
refresh_period = "1s"
[nats]
listen = "127.0.0.1:%d"
server_name = "ra"
[region]
name = "ra"
hub = "nats-leaf://%s"
hub_check_interval = "1s"
`, natsPort, relay.addr()))
	waitMirror(t, "the region serves v1", func() error { return readAll(a.base, "v1", keys) })
	readers := startLookups(t, "v1", keys, a.base)

	relay.setCut(true)
	js := natstest.JetStream(t, fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	mirror := region.ObjectMirror(bucket, "hub", 1)
	if err := js.DeleteStream(ctx, mirror.Name); err != nil {
		t.Fatal(err)
	}
	if err := region.EnsureObjectMirror(ctx, js, bucket, "hub", 1); err != nil {
		t.Fatal(err)
	}
	waitMissing(t, a.base, true)
	stopLookups(t, readers)
	if err := readAll(a.base, "v1", keys); err != nil {
		t.Fatal(err)
	}

	relay.setCut(false)
	waitMirror(t, "the mirror filled again", func() error {
		m, err := missingFromSource(a.base)
		if err == nil && m["d"] {
			err = fmt.Errorf("d still missing")
		}
		return err
	})
	if err := readAll(a.base, "v1", keys); err != nil {
		t.Fatal(err)
	}
}
