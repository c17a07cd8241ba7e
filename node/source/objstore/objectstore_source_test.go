package objstore_test

import (
	"context"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/source"
	"github.com/spangledb/spangle/node/source/objstore"
)

// startJS runs an embedded JetStream server for the test.
func startJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	return natstest.JetStream(t, natstest.RunServer(t, nil).ClientURL())
}

// startBucket runs an embedded JetStream server with the object store
// bucket "data".
func startBucket(t *testing.T) (jetstream.JetStream, jetstream.ObjectStore) {
	t.Helper()
	js := startJS(t)
	obs, err := objstore.CreateBucket(ctx(t), js, "data", 1)
	if err != nil {
		t.Fatal(err)
	}
	return js, obs
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, bucket string
		ok         bool
	}{
		{"nats-object://data", "data", true},
		{"nats-object://data/", "data", true},
		{"nats-object://da.ta", "", false},
		{"nats-object://data/x", "", false},
		{"file:///data", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			b, err := objstore.ParseURL(tc.in)
			if (err == nil) != tc.ok || b != tc.bucket {
				t.Fatalf("ParseURL(%q) = %q, %v", tc.in, b, err)
			}
		})
	}
}

func TestSource(t *testing.T) {
	js := startJS(t)
	c := ctx(t)
	src, err := objstore.New("data", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if err != nil {
		t.Fatal(err)
	}
	// A missing bucket lists as empty.
	if dbs, err := src.ListDBs(c); err != nil || len(dbs) != 0 {
		t.Fatalf("ListDBs on a missing bucket = %v, %v", dbs, err)
	}
	obs, err := objstore.CreateBucket(c, js, "data", 1)
	if err != nil {
		t.Fatal(err)
	}
	put := func(name, body string) {
		t.Helper()
		if _, err := obs.PutString(c, name, body); err != nil {
			t.Fatal(err)
		}
	}
	put("db1/v1/part-1", "bb")
	put("db1/v1/part-0", "a")
	put("db1/v1/_SUCCESS", "")
	put("db1/v1/.hidden", "x")
	put("db1/v1/_meta", "x")
	put("db1/v2/part-0", "half") // no _SUCCESS: half-uploaded
	put("db2/v1/part-0", "c")
	put("db2/v1/_SUCCESS", "")
	put("bad.db/v1/part-0", "x")
	put("db1/bad.v/part-0", "x")
	put("db1/v3/sub/part-0", "x") // too deep
	put("toplevel", "x")

	dbs, err := src.ListDBs(c)
	if err != nil || !slices.Equal(dbs, []string{"db1", "db2"}) {
		t.Fatalf("ListDBs = %v, %v", dbs, err)
	}
	vs, err := src.ListVersions(c, "db1", true)
	if err != nil || !slices.Equal(vs, []string{"v1"}) {
		t.Fatalf("ListVersions(require _SUCCESS) = %v, %v", vs, err)
	}
	vs, err = src.ListVersions(c, "db1", false)
	if err != nil || !slices.Equal(vs, []string{"v1", "v2"}) {
		t.Fatalf("ListVersions = %v, %v", vs, err)
	}
	files, err := src.ListFiles(c, "db1", "v1")
	files = withoutModTimes(t, files)
	want := []source.SourceFile{{Name: "part-0", Size: 1}, {Name: "part-1", Size: 2}}
	if err != nil || !slices.Equal(files, want) {
		t.Fatalf("ListFiles = %v, %v; want %v", files, err, want)
	}
	r, err := src.Open(c, "db1", "v1", "part-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(b) != "bb" {
		t.Fatalf("Open read %q, %v", b, err)
	}
	if _, err := src.Open(c, "db1", "v1", "missing"); err == nil {
		t.Fatal("Open of a missing object succeeded")
	}
}

func TestPublish(t *testing.T) {
	js, obs := startBucket(t)
	c := ctx(t)
	dir := t.TempDir()
	for name, body := range map[string]string{"part-0": "zero", "part-1": "one!", "_SUCCESS": "", ".crc": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var progress int
	rep, err := objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{Parallel: 2, Progress: func(objstore.Report) { progress++ }})
	if err != nil {
		t.Fatal(err)
	}
	if want := (objstore.Report{Files: 2, Uploaded: 2, Bytes: 8, BytesUploaded: 8}); rep != want || progress != 2 {
		t.Fatalf("first publish: %+v (progress %d), want %+v", rep, progress, want)
	}
	rep, err = objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{})
	if want := (objstore.Report{Files: 2, Skipped: 2, Bytes: 8}); err != nil || rep != want {
		t.Fatalf("second publish: %+v, %v; want %+v", rep, err, want)
	}
	// A changed file of the same size is uploaded again.
	if err := os.WriteFile(filepath.Join(dir, "part-1"), []byte("ONE!"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{})
	if want := (objstore.Report{Files: 2, Uploaded: 1, Skipped: 1, Bytes: 8, BytesUploaded: 4}); err != nil || rep != want {
		t.Fatalf("third publish: %+v, %v; want %+v", rep, err, want)
	}
	src, _ := objstore.New("data", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if vs, err := src.ListVersions(c, "db", true); err != nil || !slices.Equal(vs, []string{"v1"}) {
		t.Fatalf("ListVersions after publish = %v, %v", vs, err)
	}
	n, err := objstore.DeleteVersion(c, js, obs, "db", "v1")
	if err != nil || n != 3 {
		t.Fatalf("DeleteVersion = %d, %v; want 3", n, err)
	}
	if vs, err := src.ListVersions(c, "db", false); err != nil || len(vs) != 0 {
		t.Fatalf("ListVersions after delete = %v, %v", vs, err)
	}
}

// withoutModTimes checks that every file has a modification time from the
// last hour (the upload's) and clears it, for comparisons.
func withoutModTimes(t *testing.T, files []source.SourceFile) []source.SourceFile {
	t.Helper()
	for i, f := range files {
		if f.ModTime.IsZero() || time.Since(f.ModTime) > time.Hour {
			t.Errorf("%s: ModTime %v, want the upload's", f.Name, f.ModTime)
		}
		files[i].ModTime = time.Time{}
	}
	return files
}

// TestSourceListsOnChange: the source lists the bucket again only when
// its stream changed, and then sees every change: the bucket deleted and
// created again, an object put, one deleted, one's metadata purged.
func TestSourceListsOnChange(t *testing.T) {
	s := natstest.RunServer(t, nil)
	js := natstest.JetStream(t, s.ClientURL())
	c := ctx(t)
	obs, err := objstore.CreateBucket(c, js, "data", 1)
	if err != nil {
		t.Fatal(err)
	}
	src, err := objstore.New("data", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string) {
		t.Helper()
		if _, err := obs.PutString(c, name, "x"); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	if err := src.Register(reg); err != nil {
		t.Fatal(err)
	}
	api := countAPI(t, s.ClientURL())
	var wantListings, wantReused int64
	check := func(what string, listed bool, want ...string) {
		t.Helper()
		if listed {
			wantListings++
			wantReused += int64(len(want)) // ListVersions
		} else {
			wantReused += int64(1 + len(want))
		}
		dbs, err := src.ListDBs(c)
		if err != nil || !slices.Equal(dbs, want) {
			t.Fatalf("%s: ListDBs = %v, %v; want %v", what, dbs, err, want)
		}
		for _, db := range want {
			if vs, err := src.ListVersions(c, db, false); err != nil || !slices.Equal(vs, []string{"v1"}) {
				t.Fatalf("%s: ListVersions(%s) = %v, %v; want [v1]", what, db, vs, err)
			}
		}
		if got, _ := api.counts(t); got != wantListings {
			t.Fatalf("%s: %d listings in all; want %d", what, got, wantListings)
		}
		ml := nodetest.Metric(t, reg, "spangle_objstore_listings_total", "result", "listed")
		mr := nodetest.Metric(t, reg, "spangle_objstore_listings_total", "result", "reused")
		if ml != float64(wantListings) || mr != float64(wantReused) {
			t.Fatalf("%s: spangle_objstore_listings_total listed %v, reused %v; want %d, %d", what, ml, mr, wantListings, wantReused)
		}
	}
	put("db0/v1/part-0")
	check("first listing", true, "db0")
	check("nothing changed", false, "db0")
	// Created again with an object of the same size: its stream has the
	// same counts and sequences (the byte count too, unless the times
	// written in the metadata differ in length), only not the same
	// creation time.
	if err := js.DeleteObjectStore(c, "data"); err != nil {
		t.Fatal(err)
	}
	if obs, err = objstore.CreateBucket(c, js, "data", 1); err != nil {
		t.Fatal(err)
	}
	put("db1/v1/part-0")
	check("bucket created again", true, "db1")
	put("db2/v1/part-0")
	check("object put", true, "db1", "db2")
	if err := obs.Delete(c, "db2/v1/part-0"); err != nil {
		t.Fatal(err)
	}
	check("object deleted", true, "db1")
	put("db3/v1/part-0")
	check("object put", true, "db1", "db3")
	// A purge of one object's metadata moves neither sequence: only the
	// counts say it.
	stream, err := js.Stream(c, "OBJ_data")
	if err != nil {
		t.Fatal(err)
	}
	meta := "$O.data.M." + base64.URLEncoding.EncodeToString([]byte("db1/v1/part-0"))
	if err := stream.Purge(c, jetstream.WithPurgeSubject(meta)); err != nil {
		t.Fatal(err)
	}
	check("metadata purged", true, "db3")
	check("nothing changed", false, "db3")
}
