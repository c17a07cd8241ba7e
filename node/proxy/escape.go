package proxy

import "net/url"

const upperHex = "0123456789ABCDEF"

// requestTarget is the path and query of a proxied lookup:
// /<db>/<key> and proxy=<version>[&raw=1], db and key escaped by
// appendEscaped. The two share one allocation.
func requestTarget(req Request) (path, query string) {
	b := make([]byte, 0, 2+3*(len(req.DB)+len(req.Key))+len("?proxy=&raw=1")+len(req.Version))
	b = append(b, '/')
	b = appendEscaped(b, req.DB)
	b = append(b, '/')
	b = appendEscaped(b, req.Key)
	return splitTarget(appendQuery(b, req))
}

// batchTarget is the path and query of a batch of lookups like req:
// /<db>/_batch and proxy=<version>[&raw=1] (edge/BATCH.md).
func batchTarget(req *Request) (path, query string) {
	b := make([]byte, 0, 1+3*len(req.DB)+len("/_batch?proxy=&raw=1")+len(req.Version))
	b = append(b, '/')
	b = appendEscaped(b, req.DB)
	b = append(b, "/_batch"...)
	return splitTarget(appendQuery(b, *req))
}

// appendQuery appends ?proxy=<version>[&raw=1].
func appendQuery(b []byte, req Request) []byte {
	b = append(b, "?proxy="...)
	b = append(b, url.QueryEscape(req.Version)...)
	if req.Raw {
		b = append(b, "&raw=1"...)
	}
	return b
}

// splitTarget splits "<path>?<query>" (the path has no '?': it is
// escaped) into its two parts, substrings of one copy of target.
func splitTarget(target []byte) (path, query string) {
	s := string(target)
	for i := 0; i < len(s); i++ {
		if s[i] == '?' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// appendEscaped appends s percent-encoded for a path segment: every byte
// but the letters, digits, '-', '_' and '~' becomes %XX. Escaping '/'
// and '.' too leaves no segment an intermediary could clean away ("..",
// "//"), and any byte string — '/', '%', '?', '#', spaces, NUL, invalid
// UTF-8 — decodes back to itself in the peer's URL.Path.
func appendEscaped[T ~string | ~[]byte](b []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '~' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return b
}
