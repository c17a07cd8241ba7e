package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/spangledb/spangle/blocks/seqfile"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/source"
	"github.com/spangledb/spangle/node/source/s3"
)

const (
	testTimeout = 30 * time.Second
	bucket      = "data"
)

// fakeS3 is a real S3-protocol server (gofakes3, in memory) on loopback,
// behind a handler that counts requests and can inject failures.
type fakeS3 struct {
	backend *s3mem.Backend
	srv     *httptest.Server
	addr    string

	lists      atomic.Int64 // ListObjectsV2 requests
	stripRange atomic.Bool  // drop Range headers (a server without ranges)
	deny       atomic.Value // string: key prefix answered 403 AccessDenied
	unavail    atomic.Bool  // answer every request 503
	cutAfter   atomic.Int64 // > 0: the next whole-object GET breaks after this many body bytes

	mu     sync.Mutex // guards ranges, auth
	ranges []string   // Range headers of GETs
	auth   []string   // Authorization headers
}

// startS3 starts a server holding an empty bucket "data".
func startS3(t testing.TB) *fakeS3 {
	t.Helper()
	f := &fakeS3{backend: s3mem.New()}
	f.deny.Store("")
	if err := f.backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.handler())
	f.addr = f.srv.Listener.Addr().String()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeS3) handler() http.Handler {
	s3 := gofakes3.New(f.backend, gofakes3.WithoutVersioning()).Server()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
			f.ranges = append(f.ranges, r.Header.Get("Range"))
		}
		f.mu.Unlock()
		if r.URL.Query().Get("list-type") == "2" {
			f.lists.Add(1)
		}
		if f.unavail.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if d := f.deny.Load().(string); d != "" && strings.HasPrefix(r.URL.Path, "/"+bucket+"/"+d) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
			return
		}
		if f.stripRange.Load() {
			r.Header.Del("Range")
		}
		if r.Method == http.MethodGet && r.Header.Get("Range") == "" && r.URL.Query().Get("list-type") == "" &&
			!strings.Contains(r.URL.Path, "/_") { // a data file, not _BASE or _DIGEST
			if n := f.cutAfter.Swap(0); n > 0 {
				w = &cutWriter{ResponseWriter: w, left: n}
			}
		}
		s3.ServeHTTP(w, r)
	})
}

// cutWriter breaks the connection once left body bytes are written.
type cutWriter struct {
	http.ResponseWriter
	left int64
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if int64(len(p)) >= w.left {
		w.ResponseWriter.Write(p[:w.left])
		w.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the client sees the body end early
	}
	w.left -= int64(len(p))
	return w.ResponseWriter.Write(p)
}

// stop closes the server: the address refuses connections.
func (f *fakeS3) stop() { f.srv.Close() }

// restart serves the same backend again on the same address.
func (f *fakeS3) restart(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	deadline := time.Now().Add(testTimeout)
	for ln, err = net.Listen("tcp", f.addr); err != nil; ln, err = net.Listen("tcp", f.addr) {
		if time.Now().After(deadline) {
			t.Fatalf("listen again on %s: %v", f.addr, err)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	f.srv = httptest.NewUnstartedServer(f.handler())
	f.srv.Listener.Close()
	f.srv.Listener = ln
	f.srv.Start()
	t.Cleanup(f.srv.Close)
}

func (f *fakeS3) put(t testing.TB, key string, body []byte) {
	t.Helper()
	// Straight into the backend (much faster than a PUT per object), with
	// the metadata gofakes3's PUT handler would store.
	meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	if _, err := f.backend.PutObject(bucket, key, meta, bytes.NewReader(body), int64(len(body)), nil); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeS3) rangeHeaders() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ranges)
}

func (f *fakeS3) authHeaders() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.auth)
}

// testConfig is a Config for the fake server: static keys, path style,
// no retries inside minio-go, small list pages.
func (f *fakeS3) testConfig() s3.Config {
	c := s3.DefaultConfig()
	c.Endpoint = f.srv.URL
	c.Region = "us-east-1"
	c.AccessKeyID, c.SecretAccessKey = "test-key", "test-secret"
	c.PathStyle = true
	c.Attempts = 1
	c.ListPageSize = 100
	c.ListTimeout, c.IdleTimeout = testTimeout, testTimeout
	return c
}

func (f *fakeS3) source(t testing.TB, prefix string) *s3.Source {
	t.Helper()
	src, err := s3.New(bucket, prefix, f.testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// seqFile returns a SequenceFile of BytesWritable records.
func seqFile(t testing.TB, records [][2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := seqfile.NewWriter(&buf, seqfile.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if err := w.Append([]byte(r[0]), []byte(r[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// putVersion uploads version of db under prefix as `files` SequenceFiles
// holding key-0..key-(n-1) → "<version>:<i>", then _SUCCESS.
func (f *fakeS3) putVersion(t testing.TB, prefix, db, version string, files, n int) {
	t.Helper()
	f.putData(t, prefix, db, version, files, n)
	f.put(t, prefix+db+"/"+version+"/_SUCCESS", nil)
}

// putData uploads the data files of putVersion, without _SUCCESS.
func (f *fakeS3) putData(t testing.TB, prefix, db, version string, files, n int) {
	t.Helper()
	parts := make([][][2]string, files)
	for i := range n {
		parts[i%files] = append(parts[i%files], [2]string{fmt.Sprintf("key-%d", i), fmt.Sprintf("%s:%d", version, i)})
	}
	for i, recs := range parts {
		f.put(t, fmt.Sprintf("%s%s/%s/part-%05d", prefix, db, version, i), seqFile(t, recs))
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return c
}

func readAll(t testing.TB, rc io.ReadCloser, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, bucket, prefix string
		ok                 bool
	}{
		{"s3://data", "data", "", true},
		{"s3://data/", "data", "", true},
		{"s3://data/some/prefix", "data", "some/prefix/", true},
		{"s3://data/some/prefix/", "data", "some/prefix/", true},
		{"s3://my.bucket-1/x", "my.bucket-1", "x/", true},
		{"s3://da", "", "", false},      // too short for S3
		{"s3://Data/x", "", "", false},  // upper case
		{"s3://data//x", "", "", false}, // empty segment
		{"s3://data/a/../b", "", "", false},
		{"s3://data/x?y=1", "", "", false},
		{"s3:///x", "", "", false},
		{"nats-object://data", "", "", false},
		{"/local/dir", "", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			b, p, err := s3.ParseURL(tc.in)
			if (err == nil) != tc.ok || b != tc.bucket || p != tc.prefix {
				t.Fatalf("ParseURL(%q) = %q, %q, %v", tc.in, b, p, err)
			}
			if err != nil && !errors.Is(err, s3.ErrURL) {
				t.Fatalf("error %v is not ErrURL", err)
			}
		})
	}
	if !s3.IsURL("s3://data") || s3.IsURL("file:///data") {
		t.Fatal("IsURL")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*s3.Config)
		want string // in the error; "" when valid
	}{
		{"defaults", func(*s3.Config) {}, ""},
		// Defaults live in DefaultConfig only: Validate fills nothing in.
		{"zero", func(c *s3.Config) { *c = s3.Config{} }, "Endpoint"},
		{"zero but the endpoint", func(c *s3.Config) { *c = s3.Config{Endpoint: "minio.local:9000"} }, "Attempts"},
		{"no endpoint", func(c *s3.Config) { c.Endpoint = " " }, "Endpoint"},
		{"zero attempts", func(c *s3.Config) { c.Attempts = 0 }, "Attempts"},
		{"zero page size", func(c *s3.Config) { c.ListPageSize = 0 }, "ListPageSize"},
		{"zero list timeout", func(c *s3.Config) { c.ListTimeout = 0 }, "ListTimeout"},
		{"zero idle timeout", func(c *s3.Config) { c.IdleTimeout = 0 }, "IdleTimeout"},
		{"host:port", func(c *s3.Config) { c.Endpoint, c.Insecure = "minio.local:9000", true }, ""},
		{"http URL", func(c *s3.Config) { c.Endpoint = "http://127.0.0.1:9000" }, ""},
		{"https URL", func(c *s3.Config) { c.Endpoint = "https://s3.example.com/" }, ""},
		{"URL with a path", func(c *s3.Config) { c.Endpoint = "http://host/path" }, "s3.endpoint"},
		{"ftp URL", func(c *s3.Config) { c.Endpoint = "ftp://host" }, "s3.endpoint"},
		{"host with a path", func(c *s3.Config) { c.Endpoint = "host/path" }, "s3.endpoint"},
		{"key without secret", func(c *s3.Config) { c.AccessKeyID = "k" }, "s3.access_key_id"},
		{"token without keys", func(c *s3.Config) { c.SessionToken = "t" }, "session token"},
		{"page too large", func(c *s3.Config) { c.ListPageSize = 5000 }, "ListPageSize"},
		{"negative attempts", func(c *s3.Config) { c.Attempts = -1 }, "Attempts"},
		{"negative timeout", func(c *s3.Config) { c.IdleTimeout = -time.Second }, "IdleTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := s3.DefaultConfig()
			tc.mod(&cfg)
			err := cfg.Validate()
			if (err == nil) != (tc.want == "") {
				t.Fatalf("Validate = %v", err)
			}
			if err != nil && (!errors.Is(err, s3.ErrConfig) || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v: want ErrConfig naming %s", err, tc.want)
			}
			if _, nerr := s3.New(bucket, "", cfg); (nerr == nil) != (tc.want == "") {
				t.Fatalf("New = %v", nerr)
			}
		})
	}
}

// TestConfigDocDefaults: every "Default X" in Config's doc comments states
// what DefaultConfig sets.
func TestConfigDocDefaults(t *testing.T) {
	if n := nodetest.CheckDocDefaults(t, []string{"config.go"}, map[string]any{"Config": s3.DefaultConfig()}); n < 8 {
		t.Fatalf("only %d documented defaults checked", n)
	}
}

func TestSource(t *testing.T) {
	f := startS3(t)
	c := ctx(t)
	const p = "root/sub/"
	src := f.source(t, p)
	if got, want := src.String(), "s3://data/root/sub"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	if got, want := src.Path("db1", "v1"), "s3://data/root/sub/db1/v1"; got != want {
		t.Fatalf("Path = %q, want %q", got, want)
	}
	if dbs, err := src.ListDBs(c); err != nil || len(dbs) != 0 {
		t.Fatalf("ListDBs on an empty bucket = %v, %v", dbs, err)
	}
	for key, body := range map[string]string{
		"db1/v1/part-1":     "bb",
		"db1/v1/part-0":     "a",
		"db1/v1/_SUCCESS":   "",
		"db1/v1/.hidden":    "x",
		"db1/v1/_meta":      "x",
		"db1/v1/_logs/x":    "x", // a directory of the version: not data
		"db1/v1/sub/part-9": "x",
		"db1/v1/":           "",     // a "folder" marker object
		"db1/v2/part-0":     "half", // no _SUCCESS: half-uploaded
		"db2/v1/part-0":     "c",
		"db2/v1/_SUCCESS":   "",
		"bad.db/v1/part-0":  "x",
		"db1/bad.v/part-0":  "x",
		"db1/toplevel":      "x", // an object where versions are
		"toplevel":          "x",
	} {
		f.put(t, p+key, []byte(body))
	}
	f.put(t, "db3/v1/part-0", []byte("outside the prefix"))

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
	if vs, err := src.ListVersions(c, "nope", false); err != nil || len(vs) != 0 {
		t.Fatalf("ListVersions of a missing db = %v, %v", vs, err)
	}
	files, err := src.ListFiles(c, "db1", "v1")
	files = withoutModTimes(t, files)
	want := []source.SourceFile{{Name: "part-0", Size: 1}, {Name: "part-1", Size: 2}}
	if err != nil || !slices.Equal(files, want) {
		t.Fatalf("ListFiles = %v, %v; want %v", files, err, want)
	}
	r, err := src.Open(c, "db1", "v1", "part-1")
	if got := readAll(t, r, err); got != "bb" {
		t.Fatalf("Open read %q", got)
	}
	// A version that is not there is an error, not an empty version.
	if files, err := src.ListFiles(c, "db1", "v9"); !errors.Is(err, source.ErrPermanent) || !strings.Contains(err.Error(), "no such version") {
		t.Fatalf("ListFiles of a missing version = %v, %v", files, err)
	}
	// A version holding only _SUCCESS is empty.
	f.put(t, p+"db2/v0/_SUCCESS", nil)
	if files, err := src.ListFiles(c, "db2", "v0"); err != nil || len(files) != 0 {
		t.Fatalf("ListFiles of an empty version = %v, %v", files, err)
	}
	// Once v2 is complete, it is listed.
	f.put(t, p+"db1/v2/_SUCCESS", nil)
	vs, err = src.ListVersions(c, "db1", true)
	if err != nil || !slices.Equal(vs, []string{"v1", "v2"}) {
		t.Fatalf("ListVersions after v2's _SUCCESS = %v, %v", vs, err)
	}

	// The bucket's root as the prefix.
	root := f.source(t, "")
	if root.String() != "s3://data" {
		t.Fatalf("String = %q", root.String())
	}
	if dbs, err := root.ListDBs(c); err != nil || !slices.Equal(dbs, []string{"db3", "root"}) {
		t.Fatalf("ListDBs at the root = %v, %v", dbs, err)
	}
}

func TestOpenAt(t *testing.T) {
	f := startS3(t)
	c := ctx(t)
	src := f.source(t, "")
	body := strings.Repeat("0123456789", 100)
	f.put(t, "db/v/part-0", []byte(body))
	for _, strip := range []bool{false, true} {
		f.stripRange.Store(strip)
		for _, off := range []int64{0, 1, 500, 999, 1000} {
			t.Run(fmt.Sprintf("off=%d/ignored=%v", off, strip), func(t *testing.T) {
				before := len(f.rangeHeaders())
				r, err := src.OpenAt(c, "db", "v", "part-0", off)
				if got := readAll(t, r, err); got != body[off:] {
					t.Fatalf("OpenAt(%d) read %d bytes, want %d", off, len(got), len(body)-int(off))
				}
				hs := f.rangeHeaders()[before:]
				if off > 0 && !slices.Contains(hs, fmt.Sprintf("bytes=%d-", off)) {
					t.Fatalf("OpenAt(%d) sent Range headers %q", off, hs)
				}
				if off == 0 && len(hs) != 0 {
					t.Fatalf("OpenAt(0) sent Range headers %q", hs)
				}
			})
		}
	}
	f.stripRange.Store(false)
	if _, err := src.OpenAt(c, "db", "v", "part-0", 1001); !errors.Is(err, source.ErrPermanent) {
		t.Fatalf("OpenAt past the end = %v, want ErrPermanent", err)
	}
}

func TestPagination(t *testing.T) {
	f := startS3(t)
	c := ctx(t)
	src := f.source(t, "p/") // ListPageSize 100
	const nfiles, nversions = 1050, 250
	for i := range nfiles {
		f.put(t, fmt.Sprintf("p/db/v0000/part-%05d", i), []byte{byte(i)})
	}
	f.put(t, "p/db/v0000/_SUCCESS", nil)
	for i := 1; i < nversions; i++ {
		f.put(t, fmt.Sprintf("p/db/v%04d/_SUCCESS", i), nil)
	}

	before := f.lists.Load()
	files, err := src.ListFiles(c, "db", "v0000")
	if err != nil || len(files) != nfiles {
		t.Fatalf("ListFiles: %d files, %v; want %d", len(files), err, nfiles)
	}
	for i, fl := range files {
		if want := fmt.Sprintf("part-%05d", i); fl.Name != want || fl.Size != 1 {
			t.Fatalf("file %d = %+v, want %s", i, fl, want)
		}
	}
	if n := f.lists.Load() - before; n < nfiles/100 {
		t.Fatalf("ListFiles took %d list requests, want ≥ %d pages", n, nfiles/100)
	}

	before = f.lists.Load()
	vs, err := src.ListVersions(c, "db", false)
	if err != nil || len(vs) != nversions || vs[0] != "v0000" || vs[nversions-1] != fmt.Sprintf("v%04d", nversions-1) {
		t.Fatalf("ListVersions: %d versions, %v", len(vs), err)
	}
	if n := f.lists.Load() - before; n < 3 {
		t.Fatalf("ListVersions took %d list requests, want ≥ 3 pages", n)
	}
	if !slices.IsSorted(vs) || len(slices.Compact(slices.Clone(vs))) != len(vs) {
		t.Fatal("versions not sorted or repeated")
	}
	complete, err := src.ListVersions(c, "db", true)
	if err != nil || !slices.Equal(complete, vs) {
		t.Fatalf("ListVersions(require _SUCCESS): %d versions, %v", len(complete), err)
	}
	// Complete versions are remembered: listing again reads no markers.
	before = f.lists.Load()
	if _, err := src.ListVersions(c, "db", true); err != nil {
		t.Fatal(err)
	}
	if n := f.lists.Load() - before; n > 3 {
		t.Fatalf("second ListVersions took %d list requests, want 3 (the pages)", n)
	}
}

func TestSymlink(t *testing.T) {
	f := startS3(t)
	c := ctx(t)
	src := f.source(t, "")
	f.put(t, "db/v1/part-0", []byte("one"))
	f.put(t, "db/v1/_SUCCESS", nil)
	for v, target := range map[string]string{
		"v2":  " v1\n", // whitespace-trimmed
		"v3":  "v9",    // missing target
		"v4":  "v2",    // a chain
		"v5":  "bad.name",
		"v6":  "v6",
		"v7":  "v8", // target not complete
		"v9x": "",   // empty
	} {
		f.put(t, "db/"+v+"/_SYMLINK", []byte(target))
	}
	f.put(t, "db/v8/part-0", []byte("eight"))

	vs, err := src.ListVersions(c, "db", true)
	if want := []string{"v1", "v2", "v4", "v5", "v6", "v9x"}; err != nil || !slices.Equal(vs, want) {
		t.Fatalf("ListVersions(require _SUCCESS) = %v, %v; want %v", vs, err, want)
	}
	vs, err = src.ListVersions(c, "db", false)
	if want := []string{"v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9x"}; err != nil || !slices.Equal(vs, want) {
		t.Fatalf("ListVersions = %v, %v; want %v", vs, err, want)
	}

	files, err := src.ListFiles(c, "db", "v2")
	files = withoutModTimes(t, files)
	if want := []source.SourceFile{{Name: "part-0", Size: 3}}; err != nil || !slices.Equal(files, want) {
		t.Fatalf("ListFiles(v2) = %v, %v; want %v", files, err, want)
	}
	r, err := src.Open(c, "db", "v2", "part-0")
	if got := readAll(t, r, err); got != "one" {
		t.Fatalf("Open(v2) read %q", got)
	}
	// Open resolves by itself too (a fresh source, no ListFiles first).
	r, err = f.source(t, "").OpenAt(c, "db", "v2", "part-0", 1)
	if got := readAll(t, r, err); got != "ne" {
		t.Fatalf("OpenAt(v2, 1) read %q", got)
	}
	// The target of v7 is there, but not complete: files are served all
	// the same, as without require_success_file.
	if files, err := src.ListFiles(c, "db", "v7"); err != nil || len(files) != 1 {
		t.Fatalf("ListFiles(v7) = %v, %v", files, err)
	}

	// A _SYMLINK that cannot be read: listed, so that its build fails.
	f.put(t, "db/v99/_SYMLINK", []byte("v1"))
	f.deny.Store("db/v99/")
	vs, err = src.ListVersions(c, "db", true)
	if err != nil || !slices.Contains(vs, "v99") {
		t.Fatalf("ListVersions with an unreadable _SYMLINK = %v, %v", vs, err)
	}
	if _, err := src.ListFiles(c, "db", "v99"); !errors.Is(err, source.ErrPermanent) || !strings.Contains(err.Error(), "Access Denied") {
		t.Fatalf("ListFiles(v99) = %v; want access denied", err)
	}
	f.deny.Store("")

	for v, want := range map[string]string{
		"v3":  "its target v9 does not exist",
		"v4":  "its target v2 is a symlink too",
		"v5":  `it names "bad.name", not a valid version name`,
		"v6":  "it names its own version",
		"v9x": "it is empty",
	} {
		t.Run(v, func(t *testing.T) {
			_, err := src.ListFiles(c, "db", v)
			if !errors.Is(err, s3.ErrSymlink) || !errors.Is(err, source.ErrPermanent) || !strings.Contains(err.Error(), want) {
				t.Fatalf("ListFiles(%s) = %v; want ErrSymlink, ErrPermanent, %q", v, err, want)
			}
			if !strings.Contains(err.Error(), "s3://data/db/"+v+"/_SYMLINK") {
				t.Fatalf("error %q does not name the _SYMLINK", err)
			}
			if v == "v3" {
				return // Open finds no object: NoSuchKey, also permanent
			}
			if _, err := f.source(t, "").Open(c, "db", v, "part-0"); !errors.Is(err, s3.ErrSymlink) {
				t.Fatalf("Open(%s) = %v; want ErrSymlink", v, err)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	f := startS3(t)
	c := ctx(t)
	src := f.source(t, "")
	f.put(t, "db/v1/part-0", []byte("x"))
	f.put(t, "secret/v1/part-0", []byte("x"))

	if _, err := src.Open(c, "db", "v1", "missing"); !errors.Is(err, source.ErrPermanent) || !strings.Contains(err.Error(), "s3://data/db/v1/missing") {
		t.Fatalf("Open of a missing key = %v; want ErrPermanent naming it", err)
	}
	f.deny.Store("secret/")
	if _, err := src.Open(c, "secret", "v1", "part-0"); !errors.Is(err, source.ErrPermanent) || !strings.Contains(err.Error(), "Access Denied") {
		t.Fatalf("Open denied = %v; want ErrPermanent", err)
	}
	if _, err := src.ListFiles(c, "secret", "v1"); err != nil {
		t.Fatalf("ListFiles (the bucket listing is allowed) = %v", err)
	}
	f.deny.Store("")

	missing, err := s3.New("no-such-bucket", "", f.testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := missing.ListDBs(c); !errors.Is(err, source.ErrPermanent) {
		t.Fatalf("ListDBs of a missing bucket = %v; want ErrPermanent", err)
	}

	// Server errors and network errors are worth retrying.
	f.unavail.Store(true)
	if _, err := src.Open(c, "db", "v1", "part-0"); err == nil || errors.Is(err, source.ErrPermanent) {
		t.Fatalf("Open on a 503 = %v; want a retryable error", err)
	}
	f.unavail.Store(false)
	f.stop()
	if _, err := src.ListDBs(c); err == nil || errors.Is(err, source.ErrPermanent) {
		t.Fatalf("ListDBs on a closed server = %v; want a retryable error", err)
	}
	if _, err := src.Open(c, "db", "v1", "part-0"); err == nil || errors.Is(err, source.ErrPermanent) {
		t.Fatalf("Open on a closed server = %v; want a retryable error", err)
	}
}

// TestIdleTimeout: a server that stops sending mid-body fails the read
// after IdleTimeout with a retryable error.
func TestIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("list-type") == "2" { // Open looks for a _SYMLINK first: none
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>data</Name><IsTruncated>false</IsTruncated></ListBucketResult>`)
			return
		}
		w.Header().Set("Content-Length", "100")
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("ETag", `"x"`)
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("first bytes"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.Region, cfg.AccessKeyID, cfg.SecretAccessKey = srv.URL, "us-east-1", "k", "s"
	cfg.PathStyle, cfg.Attempts, cfg.IdleTimeout = true, 1, 50*time.Millisecond
	src, err := s3.New(bucket, "", cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.Open(ctx(t), "db", "v1", "part-0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if string(b) != "first bytes" || err == nil || errors.Is(err, source.ErrPermanent) || !strings.Contains(err.Error(), "no data for 50ms") {
		t.Fatalf("read %q, %v; want the first bytes, then a retryable idle error", b, err)
	}
}

// TestCredentials: static keys first, then the environment, then the
// shared credentials file.
func TestCredentials(t *testing.T) {
	f := startS3(t)
	home := t.TempDir()
	credsFile := filepath.Join(home, "credentials")
	if err := os.WriteFile(credsFile, []byte("[default]\naws_access_key_id = FILEDEFAULT\naws_secret_access_key = s\n\n[other]\naws_access_key_id = FILEOTHER\naws_secret_access_key = s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clear := func(t *testing.T) {
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY",
			"AWS_SESSION_TOKEN", "MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "MINIO_ACCESS_KEY", "MINIO_SECRET_KEY", "AWS_PROFILE"} {
			t.Setenv(k, "")
		}
		t.Setenv("HOME", home)
		t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", credsFile)
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		static string
		want   string
	}{
		{"static keys win", map[string]string{"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "s"}, "STATICKEY", "STATICKEY"},
		{"AWS environment", map[string]string{"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "s"}, "", "ENVKEY"},
		{"MinIO environment", map[string]string{"MINIO_ACCESS_KEY": "MINIOKEY", "MINIO_SECRET_KEY": "s"}, "", "MINIOKEY"},
		{"shared file", nil, "", "FILEDEFAULT"},
		{"shared file, AWS_PROFILE", map[string]string{"AWS_PROFILE": "other"}, "", "FILEOTHER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg := f.testConfig()
			cfg.AccessKeyID, cfg.SecretAccessKey = tc.static, ""
			if tc.static != "" {
				cfg.SecretAccessKey = "s"
			}
			src, err := s3.New(bucket, "", cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := len(f.authHeaders())
			if _, err := src.ListDBs(ctx(t)); err != nil {
				t.Fatal(err)
			}
			hs := f.authHeaders()[before:]
			if len(hs) == 0 || !strings.Contains(hs[len(hs)-1], "Credential="+tc.want+"/") {
				t.Fatalf("Authorization headers %q; want signed with %s", hs, tc.want)
			}
		})
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
