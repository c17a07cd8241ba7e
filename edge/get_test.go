package edge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
)

func TestGetKeys(t *testing.T) {
	long := strings.Repeat("k", 1024)
	tests := []struct {
		name    string
		rawPath string
		db, key string
	}{
		{"plain", "/baby-names/1881", "baby-names", "1881"},
		{"slash in key", "/baby-names/1881/boy", "baby-names", "1881/boy"},
		{"escaped slash", "/baby-names/1881%2Fboy", "baby-names", "1881/boy"},
		{"leading slash in key", "/baby-names//x", "baby-names", "/x"},
		{"trailing slash in key", "/baby-names/x/", "baby-names", "x/"},
		{"dot segments kept", "/baby-names/a/../b", "baby-names", "a/../b"},
		{"space", "/baby-names/new%20york", "baby-names", "new york"},
		{"newline", "/baby-names/a%0Ab", "baby-names", "a\nb"},
		{"binary", "/baby-names/%00%FF%2A", "baby-names", "\x00\xff*"},
		{"percent", "/baby-names/100%25", "baby-names", "100%"},
		{"question mark", "/baby-names/why%3F?raw=0", "baby-names", "why?"},
		{"utf-8", "/baby-names/%C3%A9t%C3%A9", "baby-names", "été"},
		{"1 KiB key", "/baby-names/" + long, "baby-names", long},
		{"db named healthcheck", "/healthcheck/x", "healthcheck", "x"},
		{"db named healthz", "/healthz/x", "healthz", "x"},
	}
	b := newFake()
	b.dbs["healthcheck"] = fakeDB{result: node.Result{Version: "1"}}
	b.dbs["healthz"] = fakeDB{result: node.Result{Version: "1"}}
	ts := startServer(t, b)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.do(t, "GET", tt.rawPath)
			if resp.status != http.StatusOK {
				t.Fatalf("status %d, want 200", resp.status)
			}
			call := b.lastCall(t)
			if call.db != tt.db || call.key != tt.key {
				t.Errorf("backend got db %q key %q, want %q %q", call.db, call.key, tt.db, tt.key)
			}
			if want := "value of " + tt.key; resp.body != want {
				t.Errorf("body %q, want %q", resp.body, want)
			}
		})
	}
}

var etagRE = regexp.MustCompile(`^"[0-9a-f]{16}"$`)

func TestGetHeaders(t *testing.T) {
	tests := []struct {
		name        string
		sequins     bool
		path        string
		want        map[string]string // "" means absent
		wantVersion string
	}{
		{
			name: "default content type",
			path: "/baby-names/1881",
			want: map[string]string{
				"X-Spangle-Version":      "1",
				"Content-Type":           "application/octet-stream",
				"X-Content-Type-Options": "nosniff",
				"Last-Modified":          "Sun, 01 Mar 2026 12:30:00 GMT",
				"Content-Length":         "13",
				"Cache-Control":          "",
				"X-Sequins-Version":      "",
				"X-Spangle-Proxied-To":   "",
			},
		},
		{
			name: "configured content type and cache control",
			path: "/names/alice",
			want: map[string]string{
				"X-Spangle-Version": "v2",
				"Content-Type":      "text/plain; charset=utf-8",
				"Cache-Control":     "max-age=60",
				"Content-Length":    "13",
			},
		},
		{
			name:    "sequins headers",
			sequins: true,
			path:    "/names/alice",
			want: map[string]string{
				"X-Spangle-Version": "v2",
				"X-Sequins-Version": "v2",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, newFake(), func(c *edge.Config) { c.SequinsHeaders = tt.sequins })
			for _, method := range []string{"GET", "HEAD"} {
				resp := ts.do(t, method, tt.path)
				if resp.status != http.StatusOK {
					t.Fatalf("%s: status %d", method, resp.status)
				}
				for name, want := range tt.want {
					if got := resp.header.Get(name); got != want {
						t.Errorf("%s: %s = %q, want %q", method, name, got, want)
					}
				}
				if etag := resp.header.Get("ETag"); !etagRE.MatchString(etag) {
					t.Errorf("%s: ETag %q is not a quoted 16-digit hex tag", method, etag)
				}
				if resp.length != 13 {
					t.Errorf("%s: Content-Length %d, want 13", method, resp.length)
				}
				wantBody := "value of 1881"
				if tt.path == "/names/alice" {
					wantBody = "Alice Liddell"
				}
				if method == "HEAD" {
					wantBody = ""
				}
				if resp.body != wantBody {
					t.Errorf("%s: body %q, want %q", method, resp.body, wantBody)
				}
			}
		})
	}
}

func TestETagFollowsValue(t *testing.T) {
	b := newFake()
	b.dbs["db"] = fakeDB{result: node.Result{Version: "1"}, values: map[string]string{"a": "same", "b": "same", "c": "other"}}
	ts := startServer(t, b)
	a, bb, c := ts.do(t, "GET", "/db/a"), ts.do(t, "GET", "/db/b"), ts.do(t, "GET", "/db/c")
	if a.header.Get("ETag") != bb.header.Get("ETag") {
		t.Errorf("equal values, different ETags %q %q", a.header.Get("ETag"), bb.header.Get("ETag"))
	}
	if a.header.Get("ETag") == c.header.Get("ETag") {
		t.Errorf("different values, same ETag %q", a.header.Get("ETag"))
	}
	if got := a.header.Get("Last-Modified"); got != "" {
		t.Errorf("Last-Modified %q for a zero Modified time, want none", got)
	}
}

func TestLookupErrors(t *testing.T) {
	tests := []struct {
		name        string
		err         error  // returned by the backend for db "x"
		query       string // appended to the path
		status      int
		wantVersion bool
		wantBody    string
	}{
		{name: "key missing", status: 404, wantVersion: true},
		{name: "unknown db", err: node.ErrUnknownDB, status: 404, wantBody: "unknown db: this node serves no db of that name\n"}, // issue 29: it was empty
		{name: "no version", err: node.ErrNoVersion, status: 404, wantBody: "the db has no version yet\n"},
		{name: "peer: unknown db", err: node.ErrUnknownDB, query: "?proxy=7", status: 501, wantBody: "unknown db: this node serves no db of that name\n"},
		{name: "peer: no version", err: node.ErrNoVersion, query: "?proxy=7", status: 501, wantBody: "the db has no version yet\n"},
		{name: "peer: unknown version", err: node.ErrUnknownVersion, query: "?proxy=7", status: 501, wantBody: "unknown version: this node does not hold the version named\n"}, // issue 29: it was empty
		{name: "peer: partition not held", err: node.ErrPartitionNotHeld, query: "?proxy=7", status: 500,
			wantBody: "partition not held here\n"},
		{name: "no replica", err: node.ErrNoReplica, status: 502, wantBody: "no replica answered\n"},
		{name: "proxy timeout", err: node.ErrProxyTimeout, status: 504, wantBody: "proxy timeout\n"},
		{name: "wrapped no replica", err: fmt.Errorf("node: get x: %w", node.ErrNoReplica), status: 502,
			wantBody: "no replica answered\n"},
		{name: "wrapped unknown db", err: fmt.Errorf("node: %w", node.ErrUnknownDB), status: 404, wantBody: "unknown db: this node serves no db of that name\n"},
		{name: "other error", err: errors.New("disk on fire"), status: 500, wantBody: "internal server error\n"},
		{name: "canceled, client still there", err: context.Canceled, status: 500, wantBody: "internal server error\n"},
		{name: "empty proxy is no proxy", err: node.ErrUnknownDB, query: "?proxy=", status: 404, wantBody: "unknown db: this node serves no db of that name\n"},
		{name: "other params refused", err: node.ErrUnknownDB, query: "?raw=1&foo=bar&x", status: 400,
			wantBody: "unknown query parameter \"foo\": lookups take proxy and raw only\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFake()
			b.dbs["x"] = fakeDB{result: node.Result{Version: "3"}, values: map[string]string{}, err: tt.err}
			ts := startServer(t, b, func(c *edge.Config) { c.SequinsHeaders = true })
			for _, method := range []string{"GET", "HEAD"} {
				resp := ts.do(t, method, "/x/some/key"+tt.query)
				if resp.status != tt.status {
					t.Errorf("%s: status %d, want %d", method, resp.status, tt.status)
				}
				v, sv := resp.header.Get("X-Spangle-Version"), resp.header.Get("X-Sequins-Version")
				if tt.wantVersion && (v != "3" || sv != "3") {
					t.Errorf("%s: version headers %q %q, want 3", method, v, sv)
				}
				if !tt.wantVersion && (v != "" || sv != "") {
					t.Errorf("%s: version headers %q %q, want none", method, v, sv)
				}
				want := tt.wantBody
				if method == "HEAD" {
					want = ""
				}
				if resp.body != want {
					t.Errorf("%s: body %q, want %q", method, resp.body, want)
				}
				if resp.header.Get("ETag") != "" {
					t.Errorf("%s: ETag on a %d", method, resp.status)
				}
			}
		})
	}
}

func TestProxyVersion(t *testing.T) {
	tests := []struct {
		query, version string
	}{
		{"", ""},
		{"?proxy=20260301", "20260301"},
		{"?raw=1&proxy=v%2D2&proxy=ignored", "v-2"},
		{"?proxy=status/", "status/"},
		{"?proxy=a+b", "a b"},
		{"?%70roxy=p", "p"},
		{"?proxy=%zz&proxy=ok", "ok"},
		{"?proxy", ""},
	}
	b := newFake()
	ts := startServer(t, b)
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			ts.do(t, "GET", "/baby-names/k"+tt.query)
			if got := b.lastCall(t).opts.Version; got != tt.version {
				t.Errorf("GetOptions.Version %q, want %q", got, tt.version)
			}
		})
	}
}

func TestProxiedTo(t *testing.T) {
	tests := []struct {
		sequins bool
		found   bool
	}{{false, true}, {true, true}, {true, false}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("sequins=%v found=%v", tt.sequins, tt.found), func(t *testing.T) {
			b := newFake()
			b.dbs["p"] = fakeDB{result: node.Result{Version: "9", ProxiedTo: "10.0.0.2:9599"}}
			if !tt.found {
				b.dbs["p"] = fakeDB{result: node.Result{Version: "9", ProxiedTo: "10.0.0.2:9599"}, values: map[string]string{}}
			}
			ts := startServer(t, b, func(c *edge.Config) { c.SequinsHeaders = tt.sequins })
			resp := ts.do(t, "GET", "/p/k")
			if got := resp.header.Get("X-Spangle-Proxied-To"); got != "10.0.0.2:9599" {
				t.Errorf("X-Spangle-Proxied-To %q", got)
			}
			want := ""
			if tt.sequins {
				want = "10.0.0.2:9599"
			}
			if got := resp.header.Get("X-Sequins-Proxied-To"); got != want {
				t.Errorf("X-Sequins-Proxied-To %q, want %q", got, want)
			}
		})
	}
}

func TestIfNoneMatch(t *testing.T) {
	ts := startServer(t, newFake(), func(c *edge.Config) { c.SequinsHeaders = true })
	etag := ts.do(t, "GET", "/names/alice").header.Get("ETag")
	tests := []struct {
		name   string
		inm    []string // If-None-Match field lines
		status int
	}{
		{"none", nil, 200},
		{"exact", []string{etag}, 304},
		{"weak", []string{"W/" + etag}, 304},
		{"star", []string{"*"}, 304},
		{"in list", []string{`"0000000000000000", ` + etag + `, "x"`}, 304},
		{"second field line", []string{`"0000000000000000"`, etag}, 304},
		{"list without spaces", []string{`"a",` + etag}, 304},
		{"other tag", []string{`"0000000000000000"`}, 200},
		{"unquoted", []string{strings.Trim(etag, `"`)}, 200},
		{"malformed then match", []string{`"a" junk ` + etag}, 200},
		{"unterminated", []string{`"` + strings.Trim(etag, `"`)}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, method := range []string{"GET", "HEAD"} {
				var hdrs []string
				for _, v := range tt.inm {
					hdrs = append(hdrs, "If-None-Match", v)
				}
				resp := ts.do(t, method, "/names/alice", hdrs...)
				if resp.status != tt.status {
					t.Fatalf("%s: status %d, want %d", method, resp.status, tt.status)
				}
				if got := resp.header.Get("ETag"); got != etag {
					t.Errorf("%s: ETag %q, want %q", method, got, etag)
				}
				if resp.header.Get("X-Spangle-Version") != "v2" || resp.header.Get("X-Sequins-Version") != "v2" {
					t.Errorf("%s: version headers missing: %v", method, resp.header)
				}
				if resp.header.Get("Cache-Control") != "max-age=60" {
					t.Errorf("%s: Cache-Control %q", method, resp.header.Get("Cache-Control"))
				}
				if tt.status == 304 && resp.body != "" {
					t.Errorf("%s: 304 with body %q", method, resp.body)
				}
			}
		})
	}
}

func TestMethodNotAllowed(t *testing.T) {
	b := newFake()
	ts := startServer(t, b)
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"} {
		for _, path := range []string{"/baby-names/1881", "/", "/healthz", "/metrics", "//x"} {
			t.Run(method+path, func(t *testing.T) {
				resp := ts.do(t, method, path)
				if resp.status != http.StatusMethodNotAllowed {
					t.Errorf("status %d, want 405", resp.status)
				}
				if got := resp.header.Get("Allow"); got != "GET, HEAD" {
					t.Errorf("Allow %q", got)
				}
			})
		}
	}
	if n := b.numCalls(); n != 0 {
		t.Errorf("backend called %d times", n)
	}
}

func TestBadPath(t *testing.T) {
	b := newFake()
	ts := startServer(t, b)
	for _, path := range []string{"//x", "//", "//x/y", "//healthz"} {
		t.Run(path, func(t *testing.T) {
			if resp := ts.do(t, "GET", path); resp.status != http.StatusBadRequest {
				t.Errorf("status %d, want 400", resp.status)
			}
		})
	}
	if n := b.numCalls(); n != 0 {
		t.Errorf("backend called %d times", n)
	}
}

func TestValueSizes(t *testing.T) {
	values := map[string]string{}
	for _, n := range []int{0, 1, 2047, 2048, 2049, 1 << 20} {
		values[strconv.Itoa(n)] = strings.Repeat("x", n)
	}
	b := newFake()
	b.dbs["sizes"] = fakeDB{result: node.Result{Version: "1"}, values: values}
	ts := startServer(t, b)
	for key, value := range values {
		t.Run(key, func(t *testing.T) {
			for _, method := range []string{"GET", "HEAD"} {
				resp := ts.do(t, method, "/sizes/"+key, "Accept-Encoding", "identity") // sizes as stored: no gzip
				if resp.status != 200 {
					t.Fatalf("%s: status %d", method, resp.status)
				}
				if resp.length != int64(len(value)) || resp.header.Get("Content-Length") != key {
					t.Errorf("%s: Content-Length %d %q, want %d", method, resp.length, resp.header.Get("Content-Length"), len(value))
				}
				want := value
				if method == "HEAD" {
					want = ""
				}
				if resp.body != want {
					t.Errorf("%s: body of %d bytes, want %d", method, len(resp.body), len(want))
				}
			}
		})
	}
}
