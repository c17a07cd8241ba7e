package proxy

import (
	"bytes"
	"net/url"
	"testing"
)

// FuzzRequestTarget: every key, db and version survive the peer's
// parsing (net/http parses the request target with url.ParseRequestURI):
// URL.Path is "/<db>/<key>" and the query carries the version.
func FuzzRequestTarget(f *testing.F) {
	for _, k := range []string{"k", "1881/boy", "%2F", "?#", " \x00\xff", "..", "é", ""} {
		f.Add("db", "v1", []byte(k), false)
	}
	f.Add("d/b", "a+b&c=d", []byte("x"), true)
	f.Fuzz(func(t *testing.T, db, version string, key []byte, raw bool) {
		path, query := requestTarget(Request{DB: db, Version: version, Key: key, Raw: raw})
		target := path + "?" + query
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatalf("ParseRequestURI(%q): %v", target, err)
		}
		if want := "/" + db + "/" + string(key); u.Path != want {
			t.Fatalf("Path = %q, want %q", u.Path, want)
		}
		q := u.Query()
		if q.Get("proxy") != version || (q.Get("raw") == "1") != raw {
			t.Fatalf("query %q: proxy %q raw %q", u.RawQuery, q.Get("proxy"), q.Get("raw"))
		}
		if bytes.ContainsAny([]byte(u.EscapedPath()), "/.") && bytes.Count([]byte(u.EscapedPath()), []byte("/")) != 2 {
			t.Fatalf("escaped path %q has extra segments", u.EscapedPath())
		}
	})
}
