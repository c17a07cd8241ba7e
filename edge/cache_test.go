package edge_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
)

// TestCacheHeaders checks what the caches in front of two nodes see: the
// default Cache-Control on values and the negative one on 404s, the db
// and version tags, one Last-Modified per version on every node (its
// newest source file's time) with If-Modified-Since answered, no-store
// on status, health and metrics (status varies by Accept), one URL per
// key (other spellings redirect) and no stray query parameters.
func TestCacheHeaders(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	dir := filepath.Join(root, "d", "v1")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	older := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	newest := older.Add(time.Hour)
	for i, f := range files {
		at := older
		if i == 2 {
			at = newest.Add(300 * time.Millisecond) // sub-second parts are dropped
		}
		if err := os.Chtimes(filepath.Join(dir, f.Name()), at, at); err != nil {
			t.Fatal(err)
		}
	}
	nodes := startCluster(t, clusterOpts{roots: []string{root, root}, replication: 1, minReplication: 1,
		http: func(c *edge.Config) { c.CacheTags = true }})
	waitActive(t, nodes, "d", "v1")
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" sees its peer's partitions", func() error { return seesHolders(n, "d", "v1", 2) })
	}

	get := func(url string, hdr ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirects followed
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	want := func(resp *http.Response, status int, headers ...string) {
		t.Helper()
		if resp.StatusCode != status {
			t.Errorf("%s: status %d, want %d", resp.Request.URL, resp.StatusCode, status)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			if got := resp.Header.Get(headers[i]); got != headers[i+1] {
				t.Errorf("%s: %s %q, want %q", resp.Request.URL, headers[i], got, headers[i+1])
			}
		}
	}
	lastModified := newest.Format(http.TimeFormat)
	for _, n := range nodes {
		for k := range 10 { // local and proxied keys
			url := n.HTTPURL + "/d/key-" + string(rune('0'+k))
			want(get(url), 200, "Cache-Control", "public, max-age=60", "X-Spangle-DB", "d",
				"Surrogate-Key", "d d@v1", "Cache-Tag", "d,d@v1", "Last-Modified", lastModified)
			want(get(url, "If-Modified-Since", lastModified), 304, "Last-Modified", lastModified)
			want(get(url, "If-Modified-Since", newest.Add(-time.Second).Format(http.TimeFormat)), 200)
		}
		want(get(n.HTTPURL+"/d/no-such-key"), 404, "Cache-Control", "public, max-age=10", "X-Spangle-DB", "d",
			"Surrogate-Key", "d d@v1", "X-Spangle-Version", "v1")
		for _, path := range []string{"/", "/d/", "/d", "/healthz", "/readyz", "/livez", "/metrics", "/no-such-db/"} {
			want(get(n.HTTPURL+path), get(n.HTTPURL+path).StatusCode, "Cache-Control", "no-store")
		}
		want(get(n.HTTPURL+"/"), 200, "Vary", "Accept")
		want(get(n.HTTPURL+"/d/"), 200, "Vary", "Accept")
		want(get(n.HTTPURL+"/d/key-%31"), 301, "Location", "/d/key-1")
		want(get(n.HTTPURL+"/d/%6Bey-1?raw=1"), 301, "Location", "/d/key-1?raw=1")
		want(get(n.HTTPURL+"/d/key-1?utm_source=x"), 400, "Cache-Control", "no-store")
		want(get(n.HTTPURL+"/d/key%2d1"), 301, "Location", "/d/key-1")
		want(get(n.HTTPURL+"/d/a%3fb"), 301, "Location", "/d/a%3Fb")
		want(get(n.HTTPURL+"/d/a%3Fb"), 404)      // "?" must stay escaped: canonical already
		want(get(n.HTTPURL+"/d/..%2Fkey-1"), 404) // a key's "/" may stay escaped: no redirect, no path step
	}
}
