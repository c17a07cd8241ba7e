package s3_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/source/s3"
)

// waitFor polls cond until it holds or testTimeout passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, testTimeout, what, nodetest.True(cond))
}

// startNode runs a node on src, refreshing every 20 ms, with
// require_success_file.
func startNode(t testing.TB, src *s3.Source, reg prometheus.Registerer) *node.Node {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.Source = src.String()
	cfg.OpenedSource = src
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RefreshPeriod = 20 * time.Millisecond
	cfg.RequireSuccessFile = true
	cfg.DownloadBackoff = 10 * time.Millisecond
	cfg.Registerer = reg
	cfg.Logger = nodetest.Logger()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	return n
}

// get returns the value of key and the version that answered, or the
// error; a missing key is errMissing.
func get(n *node.Node, db, key string) (value, version string, err error) {
	r, err := n.Get(context.Background(), db, []byte(key), node.GetOptions{})
	if err != nil {
		return "", "", err
	}
	if !r.Found {
		return "", r.Version, errMissing
	}
	return string(r.Value), r.Version, nil
}

var errMissing = errors.New("key not found")

// waitServing waits until db answers key-<i> with "<data>:<i>" from version.
func waitServing(t testing.TB, n *node.Node, db, version, data string, keys int) {
	t.Helper()
	waitFor(t, db+" serving "+version, func() bool {
		_, v, _ := get(n, db, "key-0")
		return v == version
	})
	for i := range keys {
		val, v, err := get(n, db, fmt.Sprintf("key-%d", i))
		if want := fmt.Sprintf("%s:%d", data, i); err != nil || val != want || v != version {
			t.Fatalf("%s key-%d = %q from %q, %v; want %q from %s", db, i, val, v, err, want, version)
		}
	}
}

// versionState returns the node's state and error for a version.
func versionState(n *node.Node, db, version string) (state, errMsg string) {
	vs, ok := n.Status().DBs[db].Versions[version]
	if !ok {
		return "", ""
	}
	nv := vs.Nodes[n.Name()]
	return nv.State, nv.Error
}

// TestNode runs a node on the S3 source: discovery, _SUCCESS gating, a
// version appearing while it runs, bad names ignored, _SYMLINK versions
// (good and broken).
func TestNode(t *testing.T) {
	f := startS3(t)
	const p, keys = "spangle/", 50
	f.putVersion(t, p, "users", "v1", 3, keys)
	f.putVersion(t, p, "items", "v1", 2, keys)
	f.putData(t, p, "items", "v2", 2, keys) // no _SUCCESS yet
	f.putVersion(t, p, "bad.db", "v1", 1, keys)
	f.putVersion(t, p, "users", "bad.version", 1, keys)
	n := startNode(t, f.source(t, p), nil)

	waitServing(t, n, "users", "v1", "v1", keys)
	waitServing(t, n, "items", "v1", "v1", keys)
	if _, ok := n.Status().DBs["bad.db"]; ok {
		t.Fatal("a db with a bad name is served")
	}
	if _, v, err := get(n, "users", "nope"); err != errMissing || v != "v1" {
		t.Fatalf("a missing key: version %q, %v", v, err)
	}

	// items/v2 completes; users gets a new version while the node runs.
	f.put(t, p+"items/v2/_SUCCESS", nil)
	waitServing(t, n, "items", "v2", "v2", keys)
	f.putVersion(t, p, "users", "v2", 4, keys)
	waitServing(t, n, "users", "v2", "v2", keys)

	// A symlink to v1 makes the node fetch v1's data again as v3.
	f.put(t, p+"users/v3/_SYMLINK", []byte("v1\n"))
	waitServing(t, n, "users", "v3", "v1", keys)

	// A broken symlink fails that version only: v3 keeps serving, with the
	// reason in the status.
	f.put(t, p+"users/v4/_SYMLINK", []byte("v9")) // missing target: not complete, not listed
	f.put(t, p+"users/v5/_SYMLINK", []byte("v3")) // a chain
	waitFor(t, "users/v5 failed", func() bool {
		st, _ := versionState(n, "users", "v5")
		return st == node.StateError
	})
	if _, msg := versionState(n, "users", "v5"); !strings.Contains(msg, "_SYMLINK") || !strings.Contains(msg, "chains are not followed") {
		t.Fatalf("users/v5 error %q does not say why", msg)
	}
	if st, _ := versionState(n, "users", "v4"); st != "" {
		t.Fatalf("users/v4 (symlink to a missing version) is %s, want not listed", st)
	}
	waitServing(t, n, "users", "v3", "v1", keys)
	waitServing(t, n, "items", "v2", "v2", keys)
}

// TestNodeResume: a download broken mid-file resumes with a Range request
// from where it stopped, and the version builds.
func TestNodeResume(t *testing.T) {
	f := startS3(t)
	const keys = 2000
	f.putVersion(t, "", "db", "v1", 1, keys)
	f.cutAfter.Store(1000)
	n := startNode(t, f.source(t, ""), nil)
	waitServing(t, n, "db", "v1", "v1", keys)
	if f.cutAfter.Load() != 0 {
		t.Fatal("no download was broken")
	}
	hs := f.rangeHeaders()
	if len(hs) != 1 || !strings.HasPrefix(hs[0], "bytes=") || hs[0] == "bytes=0-" {
		t.Fatalf("Range headers %q; want one resuming mid-file", hs)
	}
}

// TestNodeOutage: with the server gone, the node keeps serving what it has
// and counts the failed listings; once a server is back on the same
// address, it picks up the version published meanwhile.
func TestNodeOutage(t *testing.T) {
	f := startS3(t)
	const keys = 20
	f.putVersion(t, "", "db", "v1", 2, keys)
	reg := prometheus.NewRegistry()
	n := startNode(t, f.source(t, ""), reg)
	waitServing(t, n, "db", "v1", "v1", keys)
	if errs := sourceErrors(t, reg); errs != 0 {
		t.Fatalf("%v source errors before the outage", errs)
	}

	f.stop()
	waitFor(t, "failed listings to be counted", func() bool { return sourceErrors(t, reg) >= 3 })
	waitServing(t, n, "db", "v1", "v1", keys)

	f.putVersion(t, "", "db", "v2", 3, keys) // published during the outage
	f.restart(t)
	waitServing(t, n, "db", "v2", "v2", keys)
}

// sourceErrors reads spangle_source_errors_total.
func sourceErrors(t testing.TB, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "spangle_source_errors_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// TestNodeSourceEmptied: a bucket whose objects of one db are deleted,
// then a bucket re-created empty, list fewer dbs, then none: with lookups
// running, the node keeps serving both dbs, marked missing; none fails,
// no key is lost, no file deleted. Before, each db was removed at the
// first listing that lacked it.
func TestNodeSourceEmptied(t *testing.T) {
	f := startS3(t)
	const keys = 30
	f.putVersion(t, "", "a", "v1", 2, keys)
	f.putVersion(t, "", "b", "v1", 3, keys)
	n := startNode(t, f.source(t, ""), nil)
	waitServing(t, n, "a", "v1", "v1", keys)
	waitServing(t, n, "b", "v1", "v1", keys)
	lookups := nodetest.StartLookups(t, 2, 2*keys, func(i int) error {
		db := []string{"a", "b"}[i%2]
		want := fmt.Sprintf("v1:%d", i/2)
		if val, v, err := get(n, db, fmt.Sprintf("key-%d", i/2)); err != nil || val != want || v != "v1" {
			return fmt.Errorf("%s key-%d = %q from %q, %v", db, i/2, val, v, err)
		}
		return nil
	})

	list, err := f.backend.ListBucket(bucket, &gofakes3.Prefix{HasPrefix: true, Prefix: "b/"}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Contents {
		if _, err := f.backend.DeleteObject(bucket, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "b marked missing", func() bool { return n.Status().DBs["b"].MissingSince != nil })
	if err := f.backend.ForceDeleteBucket(bucket); err != nil {
		t.Fatal(err)
	}
	if err := f.backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a marked missing", func() bool { return n.Status().DBs["a"].MissingSince != nil })
	before := lookups.Done()
	waitFor(t, "more lookups", func() bool { return lookups.Done() > before+100 })
	done, failed, first := lookups.Stop()
	if failed != 0 {
		t.Fatalf("%d of %d lookups failed; the first: %v", failed, done, first)
	}
	waitServing(t, n, "a", "v1", "v1", keys)
	waitServing(t, n, "b", "v1", "v1", keys)

	f.putVersion(t, "", "a", "v1", 2, keys)
	waitFor(t, "a listed again", func() bool { return n.Status().DBs["a"].MissingSince == nil })
	if n.Status().DBs["b"].MissingSince == nil {
		t.Fatal("b, still missing, is not marked")
	}
}
