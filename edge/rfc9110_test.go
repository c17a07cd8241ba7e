package edge_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
)

// listFake is a fakeBackend that also lists: every db's page is the
// same keys, a JSON body of some 5 KB that gzip shrinks well.
type listFake struct{ *fakeBackend }

func (l listFake) List(_ context.Context, db string, _ node.ListOptions) (node.ListPage, error) {
	if _, ok := l.dbs[db]; !ok {
		return node.ListPage{}, node.ErrUnknownDB
	}
	page := node.ListPage{Version: "v1", Modified: testModified, CacheControl: "max-age=60"}
	for i := range 200 {
		page.Keys = append(page.Keys, fmt.Appendf(nil, "key-%04d", i))
	}
	return page, nil
}

// rfcPaths are a value of 5000 bytes that gzip makes 41 (sent
// compressed), a small one (never compressed), and listing pages.
var rfcPaths = []string{"/j/big", "/j/small", "/j/?prefix=key", "/j?limit=3"}

// rfcBackend serves db "j": rfcPaths' values, and listings.
func rfcBackend() listFake {
	b := newFake()
	b.dbs["j"] = fakeDB{result: node.Result{Version: "v1", Modified: testModified, ContentType: "application/json",
		CacheControl: "max-age=60"},
		values: map[string]string{"big": strings.Repeat("a", 5000), "small": `{"a":1}`}}
	return listFake{b}
}

// overProtocols runs f against b served over HTTP/1.1 (plain) and over
// HTTP/2 (TLS, by ALPN), each a server of its own with opts.
func overProtocols(t *testing.T, b edge.Backend, f func(t *testing.T, ts *testServer), opts ...func(*edge.Config)) {
	t.Run("HTTP/1.1", func(t *testing.T) { f(t, startServer(t, b, opts...)) })
	t.Run("HTTP/2", func(t *testing.T) {
		ca := nodetest.NewCA(t)
		tc := tlsFiles(t, ca, t.TempDir(), 2)
		tc.Logger = nodetest.Logger()
		tl, err := edge.NewTLS(tc)
		if err != nil {
			t.Fatal(err)
		}
		ts := startServer(t, b, append(opts, func(c *edge.Config) { c.TLS = tl.ServerConfig() })...)
		ts.url, ts.client = "https://"+ts.addr, h2Client(ca, true)
		t.Cleanup(ts.client.CloseIdleConnections)
		resp, err := ts.client.Get(ts.url + "/livez")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("spoke %s, want HTTP/2", resp.Proto)
		}
		f(t, ts)
	})
}

// TestHeadSendsGetHeaders: HEAD answers with the headers GET does,
// gzip's Content-Length, ETag and Content-Encoding included, for values
// and listing pages. Before, a HEAD that accepted gzip got the identity
// length and ETag (5000 and "…" where GET sent 41 and "…-gz").
func TestHeadSendsGetHeaders(t *testing.T) {
	overProtocols(t, rfcBackend(), func(t *testing.T, ts *testServer) {
		for _, path := range rfcPaths {
			for _, ae := range []string{"gzip", "identity"} {
				t.Run(path+" "+ae, func(t *testing.T) {
					get := ts.do(t, "GET", path, "Accept-Encoding", ae)
					head := ts.do(t, "HEAD", path, "Accept-Encoding", ae)
					if get.status != 200 || head.status != 200 || head.body != "" {
						t.Fatalf("GET %d, HEAD %d %q", get.status, head.status, head.body)
					}
					if get.length != int64(len(get.body)) || head.length != get.length {
						t.Errorf("Content-Length: HEAD %d, GET %d (body %d)", head.length, get.length, len(get.body))
					}
					for _, name := range []string{"ETag", "Content-Encoding", "Vary", "Content-Type",
						"Last-Modified", "Cache-Control", "X-Spangle-Version"} {
						if h, g := head.header.Values(name), get.header.Values(name); strings.Join(h, "\n") != strings.Join(g, "\n") {
							t.Errorf("%s: HEAD %q, GET %q", name, h, g)
						}
					}
					if path == "/j/big" && ae == "gzip" && (get.header.Get("Content-Encoding") != "gzip" || get.length >= 5000) {
						t.Errorf("GET %s did not send gzip: %q, %d bytes", path, get.header.Get("Content-Encoding"), get.length)
					}
				})
			}
		}
	}, func(c *edge.Config) { c.GzipMinBytes = 1024 })
}

// TestConditionals: If-Match and If-Unmodified-Since are evaluated
// (412), in RFC 9110 §13.2.2's order, If-Match strongly compared, and a
// date field of more than one line is ignored. Before, If-Match and
// If-Unmodified-Since were ignored (200) and two If-Modified-Since lines
// were read as the first.
func TestConditionals(t *testing.T) {
	const (
		epoch = "Thu, 01 Jan 1970 00:00:00 GMT"
		later = "Sun, 01 Mar 2026 13:00:00 GMT" // testModified + 30 min
		exact = "Sun, 01 Mar 2026 12:30:00 GMT" // testModified
	)
	overProtocols(t, rfcBackend(), func(t *testing.T, ts *testServer) {
		for _, path := range rfcPaths {
			for _, ae := range []string{"gzip", "identity"} {
				etag := ts.do(t, "GET", path, "Accept-Encoding", ae).header.Get("ETag")
				other := `"0000000000000000"`
				if ae == "gzip" && path != "/j/small" {
					other = strings.TrimSuffix(etag, `-gz"`) + `"` // the identity tag: another representation
				}
				for _, tt := range []struct {
					name    string
					headers []string
					status  int
				}{
					{"If-Match", []string{"If-Match", etag}, 200},
					{"If-Match other", []string{"If-Match", `"nomatch"`}, 412},
					{"If-Match other representation", []string{"If-Match", other}, 412},
					{"If-Match star", []string{"If-Match", "*"}, 200},
					{"If-Match weak", []string{"If-Match", "W/" + etag}, 412},
					{"If-Match list", []string{"If-Match", `"x", ` + etag}, 200},
					{"If-Match two lines", []string{"If-Match", `"x"`, "If-Match", etag}, 200},
					{"If-Match malformed", []string{"If-Match", "nomatch"}, 412},
					{"If-Unmodified-Since 1970", []string{"If-Unmodified-Since", epoch}, 412},
					{"If-Unmodified-Since later", []string{"If-Unmodified-Since", later}, 200},
					{"If-Unmodified-Since exact", []string{"If-Unmodified-Since", exact}, 200},
					{"If-Unmodified-Since not a date", []string{"If-Unmodified-Since", "yesterday"}, 200},
					{"If-Unmodified-Since two lines", []string{"If-Unmodified-Since", epoch, "If-Unmodified-Since", later}, 200},
					{"If-Match before If-Unmodified-Since", []string{"If-Match", etag, "If-Unmodified-Since", epoch}, 200},
					{"412 before 304", []string{"If-Match", `"nomatch"`, "If-None-Match", etag}, 412},
					{"If-Match then If-None-Match", []string{"If-Match", etag, "If-None-Match", etag}, 304},
					{"If-None-Match weak", []string{"If-None-Match", "W/" + etag}, 304},
					{"If-None-Match before If-Modified-Since", []string{"If-None-Match", `"x"`, "If-Modified-Since", later}, 200},
					{"If-Modified-Since later", []string{"If-Modified-Since", later}, 304},
					{"If-Modified-Since 1970", []string{"If-Modified-Since", epoch}, 200},
					{"If-Modified-Since two lines", []string{"If-Modified-Since", later, "If-Modified-Since", epoch}, 200},
					{"If-Modified-Since a list", []string{"If-Modified-Since", later + ", " + later}, 200},
				} {
					t.Run(path+" "+ae+" "+tt.name, func(t *testing.T) {
						for _, method := range []string{"GET", "HEAD"} {
							resp := ts.do(t, method, path, append([]string{"Accept-Encoding", ae}, tt.headers...)...)
							if resp.status != tt.status {
								t.Fatalf("%s: %d, want %d", method, resp.status, tt.status)
							}
							if resp.status != 200 && resp.body != "" {
								t.Errorf("%s: %d with body %q", method, resp.status, resp.body)
							}
							if got := resp.header.Get("ETag"); got != etag {
								t.Errorf("%s: ETag %q, want %q", method, got, etag)
							}
							if resp.status == 412 && resp.header.Get("Cache-Control") != "no-store" {
								t.Errorf("%s: 412 with Cache-Control %q", method, resp.header.Get("Cache-Control"))
							}
						}
					})
				}
			}
		}
		// A response that would not be 2xx ignores the conditions.
		if r := ts.do(t, "GET", "/names/nobody", "If-Match", `"nomatch"`); r.status != 404 {
			t.Errorf("missing key with If-Match: %d, want 404", r.status)
		}
	}, func(c *edge.Config) { c.GzipMinBytes = 1024 })
}

// TestUnknownMethod: a method the server does not know is 501 (RFC 9110
// §9.1; names are case-sensitive), one it knows but does not allow here
// 405 with Allow. Before, BREW and get were 405.
func TestUnknownMethod(t *testing.T) {
	b := rfcBackend()
	overProtocols(t, b, func(t *testing.T, ts *testServer) {
		for _, path := range []string{"/baby-names/1881", "/", "/healthz", "/j/?prefix=k", "/j/_batch"} {
			for _, method := range []string{"BREW", "get", "Get", "head", "post", "PROPFIND", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"} {
				if method == "POST" && strings.HasSuffix(path, "/_batch") {
					continue // a batch lookup
				}
				t.Run(method+path, func(t *testing.T) {
					resp := ts.do(t, method, path)
					known := method == strings.ToUpper(method) && method != "BREW" && method != "PROPFIND"
					switch {
					case known && resp.status != http.StatusMethodNotAllowed:
						t.Errorf("status %d, want 405", resp.status)
					case known && resp.header.Get("Allow") == "":
						t.Errorf("405 without Allow")
					case !known && resp.status != http.StatusNotImplemented:
						t.Errorf("status %d, want 501", resp.status)
					}
				})
			}
		}
	})
	if n := b.numCalls(); n != 0 {
		t.Errorf("backend called %d times", n)
	}
}
