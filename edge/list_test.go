package edge_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/listwire"
	"github.com/spangledb/spangle/node/nodetest"
)

var _ edge.ListBackend = (*node.Node)(nil)

// listKeysRecords are keys an HTTP listing must carry intact: '/', '%',
// NUL, '"', '<', bytes that are not UTF-8, keys that prefix others.
func listKeysRecords(version string, n int) []nodetest.Record {
	var recs []nodetest.Record
	for i := range n {
		k := fmt.Appendf(nil, "u/%02d/i%%%d", i%20, i)
		switch i % 5 {
		case 1:
			k = append(k, 0, '"', '<')
		case 2:
			k = append([]byte{0xff, byte(i)}, k...) // not UTF-8
		case 3:
			k = fmt.Appendf(nil, "u/%02d", i%20) // a prefix of others, once
			if i >= 20 {
				k = fmt.Appendf(nil, "t%d", i)
			}
		}
		recs = append(recs, nodetest.Record{Key: k, Value: fmt.Appendf(nil, "%s:%d\n", version, i)})
	}
	return recs
}

type listPage struct {
	Version  string   `json:"version"`
	Encoding string   `json:"encoding"`
	Keys     []string `json:"keys"`
	Values   []string `json:"values"`
	Cursor   string   `json:"cursor"`
}

// decodeItems returns a page's keys or values as bytes, per its encoding.
func (p listPage) decode(t testing.TB, items []string) [][]byte {
	t.Helper()
	out := make([][]byte, len(items))
	for i, s := range items {
		switch p.Encoding {
		case "":
			out[i] = []byte(s)
		case "base64":
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatalf("item %q: %v", s, err)
			}
			out[i] = b
		default:
			t.Fatalf("encoding %q", p.Encoding)
		}
	}
	return out
}

// httpListAll follows a listing's cursors over HTTP and returns its keys
// and values, checking every page's status, version and headers.
func httpListAll(t testing.TB, ts *testServer, db string, q url.Values) (keys, vals []string, version string) {
	t.Helper()
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("a listing without end")
		}
		resp := ts.do(t, "GET", "/"+db+"/?"+q.Encode())
		if resp.status != 200 {
			t.Fatalf("GET /%s/?%s: %d %s", db, q.Encode(), resp.status, resp.body)
		}
		if resp.header.Get("Content-Type") != "application/json" || resp.header.Get("Etag") == "" || resp.header.Get("X-Spangle-Version") == "" {
			t.Fatalf("headers %v", resp.header)
		}
		var p listPage
		if err := json.Unmarshal([]byte(resp.body), &p); err != nil {
			t.Fatalf("page %q: %v", resp.body, err)
		}
		if version == "" {
			version = p.Version
		} else if p.Version != version {
			t.Fatalf("a page of version %s in a listing of %s", p.Version, version)
		}
		for _, k := range p.decode(t, p.Keys) {
			keys = append(keys, string(k))
		}
		for _, v := range p.decode(t, p.Values) {
			vals = append(vals, string(v))
		}
		if p.Cursor == "" {
			return keys, vals, version
		}
		q.Set("cursor", p.Cursor)
	}
}

// TestHTTPList: complete HTTP listings, at several page sizes, prefixes
// and ranges, equal the sorted source keys, whatever bytes the keys hold;
// /<db>/ without listing parameters is still the db's status.
func TestHTTPList(t *testing.T) {
	root := t.TempDir()
	recs := listKeysRecords("1", 300)
	nodetest.WriteVersion(t, root, "d", "1", 4, recs)
	n := startNode(t, root)
	ts := startServer(t, n, func(c *edge.Config) { c.MaxListKeys = 50 })
	want := map[string]string{}
	var all []string
	for _, r := range recs {
		want[string(r.Key)] = string(r.Value)
		all = append(all, string(r.Key))
	}
	sort.Strings(all)
	all = slices.Compact(all)
	for _, tc := range []struct{ prefix, start, end string }{
		{}, {prefix: "u/07"}, {prefix: "u/07/"}, {prefix: "\xff"}, {prefix: "none"},
		{start: "u/03", end: "u/05"}, {prefix: "u/", start: "u/10/i%", end: "u/15"}, {start: "z", end: "a"},
	} {
		var exp []string
		for _, k := range all {
			if strings.HasPrefix(k, tc.prefix) && k >= tc.start && (tc.end == "" || k < tc.end) {
				exp = append(exp, k)
			}
		}
		for _, limit := range []string{"", "1", "7", "50"} {
			q := url.Values{}
			if tc.prefix != "" {
				q.Set("prefix", tc.prefix)
			}
			if tc.start != "" {
				q.Set("start", tc.start)
			}
			if tc.end != "" {
				q.Set("end", tc.end)
			}
			if limit != "" {
				q.Set("limit", limit)
			}
			if limit == "7" {
				q.Set("values", "1")
			}
			if len(q) == 0 {
				q.Set("values", "0") // a listing of everything needs one parameter
			}
			keys, vals, version := httpListAll(t, ts, "d", q)
			if version != "1" || !slices.Equal(keys, exp) {
				t.Fatalf("%+v limit %q: version %s, %d keys, want %d\n got %q\nwant %q", tc, limit, version, len(keys), len(exp), keys[:min(5, len(keys))], exp[:min(5, len(exp))])
			}
			for i, v := range vals {
				if v != want[keys[i]] {
					t.Fatalf("value of %q = %q, want %q", keys[i], v, want[keys[i]])
				}
			}
		}
	}
	// A page of text keys is plain JSON strings; NUL and quotes escaped.
	resp := ts.do(t, "GET", "/d/?prefix=u/01/&limit=3")
	if !strings.Contains(resp.body, `"keys":["u/01/i%1\u0000\"\u003c"`) || strings.Contains(resp.body, "encoding") {
		t.Errorf("a text page: %s", resp.body)
	}
	if resp := ts.do(t, "GET", "/d/", "Accept", "application/json"); resp.status != 200 || !strings.Contains(resp.body, `"versions"`) {
		t.Errorf("/d/ without parameters: %d %.80s, want the status", resp.status, resp.body)
	}
}

// TestHTTPListHostile: hostile parameters are 4xx with a reason, never a
// page or a 500.
func TestHTTPListHostile(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "1", 2, listKeysRecords("1", 40))
	nodetest.WriteVersion(t, root, "e", "1", 2, listKeysRecords("1", 40))
	ts := startServer(t, startNode(t, root))
	other := ts.do(t, "GET", "/e/?limit=2")
	var p listPage
	if err := json.Unmarshal([]byte(other.body), &p); err != nil || p.Cursor == "" {
		t.Fatalf("a page of e: %s, %v", other.body, err)
	}
	long := url.QueryEscape(strings.Repeat("k", node.MaxListKeyLen+1))
	for _, tc := range []struct {
		query  string
		status int
		reason string
	}{
		{"limit=1000000000", 400, "limit"},
		{"limit=-1", 400, "limit"},
		{"limit=0", 400, "limit"},
		{"limit=ten", 400, "limit \"ten\" is not a number"},
		{"limit=0x10", 400, "not a number"},
		{"values=maybe", 400, "values"},
		{"prefix=" + long, 400, "longer than"},
		{"start=" + long, 400, "longer than"},
		{"end=" + long, 400, "longer than"},
		{"cursor=" + p.Cursor, 400, "cursor lists db"},
		{"cursor=garbage", 400, "bad cursor"},
		{"cursor=" + strings.Repeat("A", 50000), 400, "bad cursor"},
		{"prefix=a&prefix=b", 400, "2 times"},
		{"prefix=a&color=red", 400, "unknown query parameter"},
		{"prefx=19", 400, "unknown query parameter \"prefx\""}, // not the status page
		{"color=red&proxy=1", 400, "unknown query parameter"},
		{"=x", 400, "unknown query parameter"},
		{"prefix=a&parts=1", 400, "peers"},
		{"prefix=a&proxy=1&parts=x", 400, "partition"},
		{"prefix=a;b", 400, "bad query"},
	} {
		resp := ts.do(t, "GET", "/d/?"+tc.query)
		if resp.status != tc.status || !strings.Contains(resp.body, tc.reason) || resp.header.Get("Cache-Control") != "no-store" {
			t.Errorf("?%.60s: %d %q (Cache-Control %q), want %d with %q", tc.query, resp.status, resp.body, resp.header.Get("Cache-Control"), tc.status, tc.reason)
		}
	}
	for _, path := range []string{"/d/", "/d/?", "/d/?&", "/d?"} { // still the status page
		if resp := ts.do(t, "GET", path); resp.status != 200 || !strings.Contains(resp.body, "<html") {
			t.Errorf("%s: %d %.80q, want the status page", path, resp.status, resp.body)
		}
	}
	if resp := ts.do(t, "GET", "/nope/?prefix=a"); resp.status != 404 {
		t.Errorf("a listing of an unknown db: %d", resp.status)
	}
}

// TestHTTPListCache: a page carries the db's Cache-Control, the version's
// Last-Modified and an ETag, answers 304 to it, and a cursor of a version
// gone is 410 (a node alone removes it at the switch), never a page of
// the new version.
func TestHTTPListCache(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "1", 2, nodetest.Numbered("1", 30))
	n := startNode(t, root)
	ts := startServer(t, n)
	resp := ts.do(t, "GET", "/d/?limit=10")
	if resp.status != 200 || resp.header.Get("Cache-Control") != "public, max-age=60" || resp.header.Get("Last-Modified") == "" {
		t.Fatalf("first page: %d %v", resp.status, resp.header)
	}
	if again := ts.do(t, "GET", "/d/?limit=10", "If-None-Match", resp.header.Get("Etag")); again.status != 304 {
		t.Errorf("If-None-Match of the page's ETag: %d", again.status)
	}
	var p listPage
	if err := json.Unmarshal([]byte(resp.body), &p); err != nil || p.Cursor == "" {
		t.Fatal(resp.body, err)
	}
	nodetest.WriteVersion(t, root, "d", "2", 2, nodetest.Numbered("2", 30))
	n.Refresh()
	checkFor(t, 20*time.Second, "version 2 alone", func() bool {
		vs := n.Status().DBs["d"].Versions
		_, old := vs["1"]
		return len(vs) == 1 && !old
	})
	if gone := ts.do(t, "GET", "/d/?limit=10&cursor="+p.Cursor); gone.status != http.StatusGone || !strings.Contains(gone.body, "gone") {
		t.Errorf("a cursor of version 1 after the switch: %d %q, want 410", gone.status, gone.body)
	}
	keys, _, version := httpListAll(t, ts, "d", url.Values{"limit": {"7"}})
	if version != "2" || len(keys) != 30 {
		t.Errorf("a new listing: version %s, %d keys", version, len(keys))
	}
	if !bytes.Contains([]byte(ts.do(t, "GET", "/metrics").body), []byte(`spangle_http_list_requests_total{code="410"} 1`)) {
		t.Error("the 410 is not counted")
	}
}

// startNode starts a real node on root and waits for its first listing.
func startNode(t *testing.T, root string) *node.Node {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.Source, cfg.DataDir = root, t.TempDir()
	cfg.RequireSuccessFile = true
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	return n
}

func jsonPage(body string, p *listPage) error { return json.Unmarshal([]byte(body), p) }

// TestHTTPListPeer: a peer's page (proxy=) needs the peer token when one
// is set, and comes in listwire with the partitions asked for only.
func TestHTTPListPeer(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "1", 4, listKeysRecords("1", 100))
	ts := startServer(t, startNode(t, root), func(c *edge.Config) { c.PeerToken = "secret" })
	if resp := ts.do(t, "GET", "/d/?proxy=1&parts=0&limit=10"); resp.status != http.StatusForbidden {
		t.Errorf("a peer's page without the token: %d", resp.status)
	}
	resp := ts.do(t, "GET", "/d/?proxy=1&parts=0,2&limit=1000", "X-Spangle-Peer-Token", "secret")
	if resp.status != 200 || resp.header.Get("Content-Type") != listwire.ContentType {
		t.Fatalf("a peer's page: %d %v %q", resp.status, resp.header, resp.body)
	}
	page, err := listwire.DecodeReply([]byte(resp.body), 1000)
	if err != nil || page.Version != "1" || page.More || len(page.Keys) == 0 || len(page.Keys) >= 100 {
		t.Fatalf("a peer's page of 2 partitions of 4: %d keys, more %v, %v", len(page.Keys), page.More, err)
	}
	if resp := ts.do(t, "GET", "/d/?proxy=2&parts=0&limit=10", "X-Spangle-Peer-Token", "secret"); resp.status != http.StatusNotImplemented {
		t.Errorf("a peer's page of a version not held: %d", resp.status)
	}
}
