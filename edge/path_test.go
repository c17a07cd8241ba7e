package edge

import (
	"bufio"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		path    string
		rt      route
		db, key string
	}{
		{"", routeBad, "", ""},
		{"x", routeBad, "", ""},
		{"*", routeBad, "", ""},
		{"/", routeStatus, "", ""},
		{"//", routeBad, "", ""},
		{"//x", routeBad, "", ""},
		{"/db", routeDBStatus, "db", ""},
		{"/db/", routeDBStatus, "db", ""},
		{"/db/k", routeKey, "db", "k"},
		{"/db/k/", routeKey, "db", "k/"},
		{"/db//", routeKey, "db", "/"},
		{"/db/a/b/c", routeKey, "db", "a/b/c"},
		{"/healthz", routeHealthz, "", ""},
		{"/livez", routeLivez, "", ""},
		{"/readyz", routeReadyz, "", ""},
		{"/metrics", routeMetrics, "", ""},
		{"/healthz/", routeDBStatus, "healthz", ""},
		{"/metrics/k", routeKey, "metrics", "k"},
		{"/healthcheck", routeDBStatus, "healthcheck", ""},
		{"/HEALTHZ", routeDBStatus, "HEALTHZ", ""},
	}
	for _, tt := range tests {
		rt, db, key := parsePath(tt.path)
		if rt != tt.rt || db != tt.db || key != tt.key {
			t.Errorf("parsePath(%q) = %v %q %q, want %v %q %q", tt.path, rt, db, key, tt.rt, tt.db, tt.key)
		}
	}
}

// FuzzParsePath checks that routing never panics, that a key route splits
// its path exactly, and that any db and key survive the trip through an
// escaped request line and net/http's request parser.
func FuzzParsePath(f *testing.F) {
	for _, seed := range [][2]string{
		{"baby-names", "1881"}, {"baby-names", "1881/boy"}, {"db", "/"}, {"db", "a//b/"},
		{"db", "new york"}, {"db", "a\nb"}, {"db", "\x00\xff"}, {"db", "%2F"}, {"db", "why?x=1#f"},
		{"healthz", "x"}, {"", "x"}, {"a/b", "c"}, {"db", strings.Repeat("k", 1024)},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, db, key string) {
		for _, p := range []string{db, "/" + db, "/" + db + "/" + key} {
			rt, d, k := parsePath(p)
			switch rt {
			case routeKey:
				if d == "" || k == "" || strings.Contains(d, "/") || "/"+d+"/"+k != p {
					t.Fatalf("parsePath(%q) = key %q %q", p, d, k)
				}
			case routeDBStatus:
				if d == "" || strings.Contains(d, "/") || (p != "/"+d && p != "/"+d+"/") {
					t.Fatalf("parsePath(%q) = db status %q", p, d)
				}
			}
		}
		if db == "" || strings.Contains(db, "/") || key == "" {
			return
		}
		line := "GET /" + url.PathEscape(db) + "/" + url.PathEscape(key) + "?proxy=1 HTTP/1.1\r\nHost: x\r\n\r\n"
		req, err := readRequest(line)
		if err != nil {
			t.Fatalf("escaped request %q does not parse: %v", line, err)
		}
		rt, d, k := parsePath(req.URL.Path)
		if rt != routeKey || d != db || k != key {
			t.Fatalf("round trip of %q %q: %v %q %q", db, key, rt, d, k)
		}
	})
}

func readRequest(s string) (*http.Request, error) {
	return http.ReadRequest(bufio.NewReader(strings.NewReader(s)))
}

func TestProxyParam(t *testing.T) {
	tests := []struct{ query, want string }{
		{"", ""},
		{"proxy=1", "1"},
		{"proxy=", ""},
		{"proxy", ""},
		{"a=b&proxy=v%2D2&proxy=x", "v-2"},
		{"proxy=a+b", "a b"},
		{"%70roxy=p", "p"},
		{"proxy=%zz&proxy=ok", "ok"},
		{"proxy=a;b&proxy=c", "c"},
		{"proxyx=1", ""},
	}
	for _, tt := range tests {
		if got := proxyParam(tt.query); got != tt.want {
			t.Errorf("proxyParam(%q) = %q, want %q", tt.query, got, tt.want)
		}
	}
}

// FuzzProxyParam checks proxyParam against url.ParseQuery.
func FuzzProxyParam(f *testing.F) {
	for _, seed := range []string{"", "proxy=1", "a=1&proxy=%41", "proxy=%zz&proxy=b", "%70roxy=+", "proxy;x=1", "&&proxy"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, q string) {
		values, _ := url.ParseQuery(q)
		if got, want := proxyParam(q), values.Get("proxy"); got != want {
			t.Fatalf("proxyParam(%q) = %q, url.ParseQuery says %q", q, got, want)
		}
	})
}

func TestRawParam(t *testing.T) {
	for q, want := range map[string]bool{
		"":                  false,
		"raw=1":             true,
		"raw=true":          true,
		"raw=0":             false,
		"x=1&raw=1":         true,
		"r%61w=1":           true,
		"raw":               false,
		"proxy=v1&raw=true": true,
	} {
		if got := rawParam(q); got != want {
			t.Errorf("rawParam(%q) = %v, want %v", q, got, want)
		}
	}
}

func TestCanonicalPath(t *testing.T) {
	for raw, want := range map[string]string{
		"/d/key-1":      "/d/key-1",
		"/d/%6Bey%2D1":  "/d/key-1",
		"/d/%6bey%2d1":  "/d/key-1",
		"/d/a%3ab":      "/d/a%3Ab",
		"/d/a%3Ab":      "/d/a%3Ab",
		"/d/..%2Fa%2F.": "/d/..%2Fa%2F.",
		"/d/%2E%2E%2Fa": "/d/%2E%2E%2Fa",
		"/d/100%":       "/d/100%",
		"/d/%zz%4":      "/d/%zz%4",
		"/d/%7E%5F%30%": "/d/~_0%",
		"/%64/x":        "/d/x",
	} {
		if got := canonicalPath(raw); got != want {
			t.Errorf("canonicalPath(%q) = %q, want %q", raw, got, want)
		}
	}
}
