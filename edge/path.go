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

// redirectCanonicalOn answers 301 to the canonical spelling of the
// request's escaped path, raw, when it is spelt otherwise, and reports whether it did: a key has one URL
// for the characters that never need escaping, so caches keep one copy.
// Canonical means: letters, digits, "-", "_" and "~" as they are, never
// percent-encoded ("%75" for "u"), and percent-encodings in upper case
// ("%3A", not "%3a"). Reserved characters may be sent either way (":" or
// "%3A", "/" or "%2F": a key's "/" must stay escaped where it would make
// a path step, such as "../a"), and "." stays as sent. Called only when
// url.URL's RawPath is set, which net/url does for paths not spelt as it
// would.
func redirectCanonicalOn[K sink](k K, raw string) bool {
	canon := canonicalPath(raw)
	if canon == raw {
		return false
	}
	if q := k.rawQuery(); q != "" {
		canon += "?" + q
	}
	k.set("Location", []string{canon}) // not http.Redirect: it would clean "/../" out of a key
	k.set(hdrCacheControl, []string{"public, max-age=86400"})
	k.set(hdrContentLength, valZero)
	k.writeHeader(http.StatusMovedPermanently)
	return true
}

// canonicalPath rewrites an escaped path: escapes of unreserved
// characters other than "." decoded, hex digits of the others upper-cased.
func canonicalPath(raw string) string {
	var b []byte // nil until the first change
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '%' || i+2 >= len(raw) {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		hi, lo := unhex(raw[i+1]), unhex(raw[i+2])
		if hi < 0 || lo < 0 {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		v := byte(hi<<4 | lo)
		var repl []byte
		switch {
		case 'a' <= v && v <= 'z', 'A' <= v && v <= 'Z', '0' <= v && v <= '9', v == '-', v == '_', v == '~':
			repl = []byte{v}
		default:
			const hexUpper = "0123456789ABCDEF"
			repl = []byte{'%', hexUpper[v>>4], hexUpper[v&15]}
			if string(repl) == raw[i:i+3] {
				repl = nil
			}
		}
		if repl == nil {
			if b != nil {
				b = append(b, raw[i:i+3]...)
			}
			i += 2
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(raw)), raw[:i]...)
		}
		b = append(b, repl...)
		i += 2
	}
	if b == nil {
		return raw
	}
	return string(b)
}

// unhex returns the value of hex digit c, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
