package edge_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
)

// TestGzip: a value of at least GzipMinBytes goes gzip-compressed to a
// client that accepts it, with its own ETag and Vary: Accept-Encoding;
// the same value goes as it is to clients that do not (q=0 included) and
// to peers; HEAD gets GET's headers; a small value is never compressed.
func TestGzip(t *testing.T) {
	big := strings.Repeat(`{"name":"Alice Liddell","born":1852,"places":["Oxford","Wonderland"]},`, 100)
	b := newFake()
	b.dbs["j"] = fakeDB{result: node.Result{Version: "v1", ContentType: "application/json"},
		values: map[string]string{"big": big, "small": `{"a":1}`}}
	ts := startServer(t, b, func(c *edge.Config) { c.GzipMinBytes = 1024 })

	plain := ts.do(t, "GET", "/j/big", "Accept-Encoding", "identity")
	if plain.body != big || plain.header.Get("Content-Encoding") != "" || plain.header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("identity: %d bytes, encoding %q, vary %q", len(plain.body), plain.header.Get("Content-Encoding"), plain.header.Get("Vary"))
	}
	gz := ts.do(t, "GET", "/j/big", "Accept-Encoding", "br;q=1.0, gzip;q=0.8")
	if gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip: encoding %q, vary %q", gz.header.Get("Content-Encoding"), gz.header.Get("Vary"))
	}
	if gz.length != int64(len(gz.body)) || len(gz.body)*5 > len(big) {
		t.Errorf("gzip: Content-Length %d, %d bytes for %d: want at least 5x smaller", gz.length, len(gz.body), len(big))
	}
	zr, err := gzip.NewReader(bytes.NewReader([]byte(gz.body)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || string(got) != big {
		t.Fatalf("gunzip: %d bytes, %v", len(got), err)
	}
	etag, gzETag := plain.header.Get("ETag"), gz.header.Get("ETag")
	if gzETag != strings.TrimSuffix(etag, `"`)+`-gz"` {
		t.Errorf("ETags %s and %s: want the gzip one to be the value's with -gz", etag, gzETag)
	}
	if r := ts.do(t, "GET", "/j/big", "Accept-Encoding", "gzip", "If-None-Match", gzETag); r.status != 304 {
		t.Errorf("If-None-Match of the gzip ETag: %d, want 304", r.status)
	}
	if r := ts.do(t, "GET", "/j/big", "Accept-Encoding", "identity", "If-None-Match", gzETag); r.status != 200 {
		t.Errorf("If-None-Match of the gzip ETag, identity asked: %d, want 200", r.status)
	}
	for name, hdr := range map[string][]string{
		"q=0":  {"Accept-Encoding", "gzip;q=0"},
		"peer": {"Accept-Encoding", "gzip"},
	} {
		path := "/j/big"
		if name == "peer" {
			path += "?proxy=v1"
		}
		if r := ts.do(t, "GET", path, hdr...); r.header.Get("Content-Encoding") != "" || r.body != big {
			t.Errorf("%s: encoding %q, %d bytes", name, r.header.Get("Content-Encoding"), len(r.body))
		}
	}
	if r := ts.do(t, "HEAD", "/j/big", "Accept-Encoding", "gzip"); r.header.Get("Content-Encoding") != "gzip" || r.length != gz.length || r.header.Get("ETag") != gzETag {
		t.Errorf("HEAD: encoding %q, length %d, ETag %s; want GET's", r.header.Get("Content-Encoding"), r.length, r.header.Get("ETag"))
	}
	if r := ts.do(t, "GET", "/j/small", "Accept-Encoding", "gzip"); r.header.Get("Content-Encoding") != "" || r.header.Get("Vary") != "" {
		t.Errorf("small value: encoding %q, vary %q", r.header.Get("Content-Encoding"), r.header.Get("Vary"))
	}
}
