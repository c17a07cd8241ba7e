package edge

import (
	"net/http"
	"net/url"
	"strings"
)

// route is what a request path asks for.
type route uint8

const (
	routeBad      route = iota // not a path we serve: 400
	routeStatus                // "/": every db's status
	routeDBStatus              // "/<db>" or "/<db>/": one db's status
	routeKey                   // "/<db>/<key>": a lookup
	routeHealthz               // "/healthz"
	routeLivez                 // "/livez"
	routeReadyz                // "/readyz"
	routeMetrics               // "/metrics"
)

// parsePath routes path, a percent-decoded request path (http.Request's
// URL.Path), by hand: no cleaning, no ServeMux. The db is the text between
// the leading "/" and the next "/"; the key is everything after that "/"
// and may itself contain "/". Only the exact paths "/healthz", "/livez",
// "/readyz" and "/metrics" are reserved; "/healthz/" is the status of a db
// named healthz. The returned strings share path's memory.
func parsePath(path string) (rt route, db, key string) {
	if len(path) == 0 || path[0] != '/' {
		return routeBad, "", ""
	}
	rest := path[1:]
	if rest == "" {
		return routeStatus, "", ""
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		switch rest {
		case "healthz":
			return routeHealthz, "", ""
		case "livez":
			return routeLivez, "", ""
		case "readyz":
			return routeReadyz, "", ""
		case "metrics":
			return routeMetrics, "", ""
		}
		return routeDBStatus, rest, ""
	}
	db, key = rest[:i], rest[i+1:]
	switch {
	case db == "":
		return routeBad, "", ""
	case key == "":
		return routeDBStatus, db, ""
	}
	return routeKey, db, key
}

// proxyParam returns the value of the first "proxy" parameter in rawQuery
// (a URL's RawQuery), unescaped, without building a url.Values map. It
// agrees with url.ParseQuery(rawQuery).Get("proxy") where that parses: a
// parameter that does not unescape, or holds a ";", is skipped.
func proxyParam(rawQuery string) string { return queryParam(rawQuery, "proxy") }

// rawParam reports whether the query asks for the value as stored
// ("raw=1" or "raw=true"), skipping the db's decoder.
func rawParam(rawQuery string) bool {
	v := queryParam(rawQuery, "raw")
	return v == "1" || v == "true"
}

// queryParam returns the first value of the query parameter name, as
// url.ParseQuery would decode it, without building a map.
func queryParam(rawQuery, param string) string {
	for q := rawQuery; q != ""; {
		var part string
		part, q, _ = strings.Cut(q, "&")
		if strings.IndexByte(part, ';') >= 0 {
			continue // url.ParseQuery rejects these too
		}
		name, value, _ := strings.Cut(part, "=")
		if name != param {
			if !strings.ContainsAny(name, "%+") {
				continue
			}
			if u, err := url.QueryUnescape(name); err != nil || u != param {
				continue
			}
		}
		if !strings.ContainsAny(value, "%+") {
			return value
		}
		if u, err := url.QueryUnescape(value); err == nil {
			return u
		}
	}
	return ""
}

// unknownParam returns the first query parameter of rawQuery that a lookup
// does not take (only proxy and raw): each other spelling of a URL would
// be one more entry in the caches in front, and a query string a way to
// bypass them.
func unknownParam(rawQuery string) (string, bool) {
	for q := rawQuery; q != ""; {
		var part string
		part, q, _ = strings.Cut(q, "&")
		name, _, _ := strings.Cut(part, "=")
		if strings.ContainsAny(name, "%+") {
			if u, err := url.QueryUnescape(name); err == nil {
				name = u
			}
		}
		if name != "proxy" && name != "raw" {
			return name, true
		}
	}
	return "", false
}

// redirectCanonical answers 301 to the canonical spelling of r's path when
// r spells it otherwise ("%75" for "u", "%3A" for ":"), and reports
// whether it did: a key has one URL, so caches keep one copy. The
// canonical spelling escapes what Go's url package escapes in a path and
// nothing else. Called only when r.URL.RawPath is set, which net/http
// does exactly for paths not spelt that way.
func redirectCanonical(w http.ResponseWriter, r *http.Request) bool {
	canon := (&url.URL{Path: r.URL.Path}).EscapedPath()
	if canon == r.URL.RawPath {
		return false
	}
	if r.URL.RawQuery != "" {
		canon += "?" + r.URL.RawQuery
	}
	w.Header()[hdrCacheControl] = []string{"public, max-age=86400"}
	http.Redirect(w, r, canon, http.StatusMovedPermanently)
	return true
}
