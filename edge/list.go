package edge

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spangledb/spangle/internal/errtext"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/listwire"
)

// ListBackend is what key listings need from a node beside Backend. A
// Backend that does not implement it answers listings with 501.
// Implementations must be safe for concurrent use.
type ListBackend interface {
	// List returns a page of db's keys (node.Node.List). The caller owns
	// opts' slices; the page is the caller's.
	List(ctx context.Context, db string, opts node.ListOptions) (node.ListPage, error)
}

// Query parameters of a listing, GET /<db>/?…: a client's, and those a
// peer's request adds (with proxy=<version>).
var listParams = map[string]bool{
	"prefix": true, "start": true, "end": true, "limit": true, "cursor": true, "values": true,
	"proxy": true, "parts": true, "bytes": true,
}

// isListing reports whether a request for the db path (/<db>/ or
// /<db>) is a listing rather than the db's status: a query naming any
// parameter but proxy (a peer's status request has that one alone). An
// unknown one, a misspelt prefix= say, is thus a listing that
// parseListQuery refuses (400), never the status page. /<db> with them
// lists as /<db>/ does.
func isListing(rawQuery string) bool {
	for q := rawQuery; q != ""; {
		var part string
		part, q, _ = strings.Cut(q, "&")
		if part == "" {
			continue
		}
		name, _, _ := strings.Cut(part, "=")
		if u, err := url.QueryUnescape(name); err == nil {
			name = u
		}
		if name != "proxy" {
			return true
		}
	}
	return false
}

// listRequest is a parsed listing request.
type listRequest struct {
	opts  node.ListOptions
	proxy string // a peer's: the version, the reply in listwire
}

// parseListQuery parses a listing's query: each parameter at most once,
// none unknown, the limit in [1, maxKeys] (absent: maxKeys), values 1 or
// true (0 or false: none). maxBytes bounds the page's bytes (a peer may
// ask for less). Errors are the 400's message.
func parseListQuery(rawQuery string, maxKeys, maxBytes int) (listRequest, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return listRequest{}, fmt.Errorf("bad query: %v", err)
	}
	for name, vs := range q {
		if !listParams[name] {
			return listRequest{}, fmt.Errorf("unknown query parameter %q: listings take prefix, start, end, limit, cursor and values", name)
		}
		if len(vs) > 1 {
			return listRequest{}, fmt.Errorf("query parameter %q given %d times", name, len(vs))
		}
	}
	var lr listRequest
	o := &lr.opts
	if v, ok := q["prefix"]; ok {
		o.Prefix = []byte(v[0])
	}
	if v, ok := q["start"]; ok {
		o.Start = []byte(v[0])
	}
	if v, ok := q["end"]; ok {
		o.End = []byte(v[0])
	}
	o.Cursor = q.Get("cursor")
	o.Limit = maxKeys
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return listRequest{}, fmt.Errorf("limit %.40q is not a number", v)
		case n < 1 || n > maxKeys:
			return listRequest{}, fmt.Errorf("limit %.40q out of [1, %d] (max_list_keys)", v, maxKeys)
		}
		o.Limit = n
	}
	switch v := q.Get("values"); v {
	case "", "0", "false":
	case "1", "true":
		o.Values = true
	default:
		return listRequest{}, fmt.Errorf("values %.40q: want 1 or 0", v)
	}
	o.MaxBytes = maxBytes
	lr.proxy = q.Get("proxy")
	if lr.proxy == "" {
		if q.Has("parts") || q.Has("bytes") {
			return listRequest{}, fmt.Errorf("parts and bytes are for peers' requests (proxy=)")
		}
		return lr, nil
	}
	o.Version, o.Raw = lr.proxy, true
	if v := q.Get("bytes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return listRequest{}, fmt.Errorf("bytes %.40q is not positive", v)
		}
		o.MaxBytes = min(n, maxBytes)
	}
	if v := q.Get("parts"); v != "" {
		fields := strings.Split(v, ",")
		if len(fields) > maxListParts {
			return listRequest{}, fmt.Errorf("%d partitions, over %d", len(fields), maxListParts)
		}
		o.Partitions = make([]int, len(fields))
		for i, f := range fields {
			p, err := strconv.Atoi(f)
			if err != nil || p < 0 {
				return listRequest{}, fmt.Errorf("partition %.40q", f)
			}
			o.Partitions[i] = p
		}
	}
	return lr, nil
}

// maxListParts bounds the partitions a peer's listing names (node/advert
// bounds a version's partitions alike).
const maxListParts = 65536

// serveList answers GET or HEAD /<db>/?prefix=…: a page of keys as JSON
// (listing.go's format), or, for a peer (proxy=<version>), as listwire.
func (s *Server) serveList(w http.ResponseWriter, r *http.Request, db string) {
	start := time.Now()
	s.metrics.inflight.Inc()
	defer s.metrics.inflight.Dec()
	noteDB(w, db)
	be := s.list
	if be == nil {
		s.listDone(http.StatusNotImplemented, 0)
		writeText(w, r, http.StatusNotImplemented, "key listings are not supported here\n")
		return
	}
	lr, err := parseListQuery(r.URL.RawQuery, s.maxListKeys, s.maxReplyBytes)
	if err != nil {
		s.listDone(http.StatusBadRequest, 0)
		writeText(w, r, http.StatusBadRequest, err.Error()+"\n")
		return
	}
	if lr.proxy != "" && !s.peerAllowed(w, r) {
		s.listDone(http.StatusForbidden, 0)
		return
	}
	page, err := be.List(r.Context(), db, lr.opts)
	if err != nil {
		row := lookupWireCode(r, err)
		status := row.status
		if lr.proxy != "" {
			status = row.peer
		}
		s.listDone(status, 0)
		msg := row.message(err)
		if errors.Is(err, node.ErrProxyTimeout) || errors.Is(err, node.ErrNoReplica) {
			msg = errtext.Strip(err.Error()) + "\n" // names the partitions missing: never a short page
		}
		if msg != "" {
			writeText(w, r, status, msg)
		} else {
			w.Header()[hdrContentLength] = valZero
			w.WriteHeader(status)
		}
		if !row.quiet {
			s.log.LogAttrs(r.Context(), row.level, "edge: listing failed",
				slog.String("db", db), slog.Int("status", status), slog.String("proxy", lr.proxy),
				slog.Duration("elapsed", time.Since(start)), slog.Any("err", err))
		}
		return
	}
	noteAnswer(w, db, page.Version, "", len(page.Keys))
	h := w.Header()
	dh := s.metrics.known(db)
	h[hdrVersion] = []string{page.Version}
	if s.sequinsHeaders {
		h[hdrSequinsVersion] = h[hdrVersion]
	}
	h[hdrDB] = dh.dbVal
	if lr.proxy != "" {
		body := listwire.AppendReply(make([]byte, 0, listwire.ReplySize(peerReply(page, lr.opts.Values))), peerReply(page, lr.opts.Values))
		s.listDone(http.StatusOK, len(page.Keys))
		writeBody(w, r, http.StatusOK, valListwire, body)
		return
	}
	body := appendListJSON(make([]byte, 0, 64+listJSONSize(page)), page, lr.opts.Values)
	// A page is cacheable as a value is: its keys change only with the
	// version, and a cursor pins the version.
	if s.cacheTags {
		h[hdrSurrogateKey] = []string{db + " " + db + "@" + page.Version}
		h[hdrCacheTag] = []string{db + "," + db + "@" + page.Version}
	}
	if page.CacheControl != "" {
		h[hdrCacheControl] = []string{page.CacheControl}
	} else {
		delete(h, hdrCacheControl)
	}
	var modified []string
	if !page.Modified.IsZero() {
		modified = []string{page.Modified.UTC().Format(http.TimeFormat)}
	}
	etag := node.AppendETag(nil, body)
	gz := s.wantsGzip(w, r, len(body))
	if gz {
		etag = gzipETag(etag)
	}
	h[hdrETag] = []string{string(etag)}
	if modified != nil {
		h[hdrLastModified] = modified
	}
	if status := precondition(reqFields(r.Header), etag, page.Modified); status != 0 {
		s.listDone(status, 0)
		if status == http.StatusPreconditionFailed {
			h[hdrCacheControl] = valNoStore
			h[hdrContentLength] = valZero
		}
		w.WriteHeader(status)
		return
	}
	s.listDone(http.StatusOK, len(page.Keys))
	if gz {
		g := gzipBytes(body)
		defer releaseGzip(g)
		h[hdrContentEncoding] = valGzip
		writeBody(w, r, http.StatusOK, valJSON, g.buf.Bytes())
		return
	}
	writeBody(w, r, http.StatusOK, valJSON, body)
}

// valListwire is a peer's page's Content-Type.
var valListwire = []string{listwire.ContentType}

// peerReply is page as a peer's reply.
func peerReply(page node.ListPage, values bool) listwire.Reply {
	return listwire.Reply{Version: page.Version, ContentType: page.ContentType, Keys: page.Keys,
		Values: page.Values, HasValues: values, More: page.More}
}

// listDone counts a listing that ended with status after listing keys.
func (s *Server) listDone(status, keys int) {
	if c, err := s.metrics.listRequests.GetMetricWithLabelValues(strconv.Itoa(status)); err == nil {
		c.Inc()
	}
	s.metrics.listKeys.Add(float64(keys))
}

// A page in JSON:
//
//	{"version": "<v>", "keys": ["…", …], "values": ["…", …], "cursor": "<c>"}
//
// values only with values=1; cursor only when a page follows. Keys and
// values are JSON strings when every one of the page is valid UTF-8;
// otherwise the page says "encoding": "base64" and every key and value
// of it is standard base64 (RFC 4648, padded). So a client reads either
// without guessing, and a page of text keys stays readable.

// listJSONSize estimates a page's JSON size (exact for plain ASCII keys
// without escapes, a lower bound otherwise).
func listJSONSize(page node.ListPage) int {
	n := 64 + len(page.Version) + len(page.Cursor)
	for _, k := range page.Keys {
		n += len(k) + 3
	}
	for _, v := range page.Values {
		n += len(v) + 3
	}
	return n
}

// appendListJSON appends page's JSON to dst.
func appendListJSON(dst []byte, page node.ListPage, values bool) []byte {
	b64 := false
	for _, k := range page.Keys {
		if !utf8.Valid(k) {
			b64 = true
			break
		}
	}
	if !b64 && values {
		for _, v := range page.Values {
			if !utf8.Valid(v) {
				b64 = true
				break
			}
		}
	}
	dst = append(dst, `{"version":`...)
	dst = appendJSONString(dst, []byte(page.Version))
	if b64 {
		dst = append(dst, `,"encoding":"base64"`...)
	}
	list := func(name string, items [][]byte) {
		dst = append(dst, `,"`...)
		dst = append(dst, name...)
		dst = append(dst, `":[`...)
		for i, it := range items {
			if i > 0 {
				dst = append(dst, ',')
			}
			if b64 {
				dst = append(dst, '"')
				dst = base64.StdEncoding.AppendEncode(dst, it)
				dst = append(dst, '"')
			} else {
				dst = appendJSONString(dst, it)
			}
		}
		dst = append(dst, ']')
	}
	list("keys", page.Keys)
	if values {
		list("values", page.Values)
	}
	if page.Cursor != "" {
		dst = append(dst, `,"cursor":`...)
		dst = appendJSONString(dst, []byte(page.Cursor))
	}
	return append(dst, "}\n"...)
}

// appendJSONString appends s, valid UTF-8, as a JSON string: '"', '\\'
// and control characters escaped, as encoding/json does (and '<', '>',
// '&', U+2028 and U+2029, for pages shown in HTML).
func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
