package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spangledb/spangle/node"
)

// acceptsJSON reports whether any element of r's Accept header(s) is
// application/json with a non-zero q. Unlike sequins, which wanted the whole
// header to equal "application/json", a list such as
// "application/json, */*" counts; "*/*" alone does not (browsers send it).
func acceptsJSON(r *http.Request) bool {
	for _, field := range r.Header["Accept"] {
		for elem := range strings.SplitSeq(field, ",") {
			mediaType, params, _ := strings.Cut(elem, ";")
			if !strings.EqualFold(strings.TrimSpace(mediaType), "application/json") {
				continue
			}
			if qZero(params) {
				continue
			}
			return true
		}
	}
	return false
}

// qZero reports whether media-type parameters params (";"-separated) hold
// a q weight of zero. An unparsable weight counts as 1.
func qZero(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		name, value, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		return err == nil && q <= 0
	}
	return false
}

// serveStatus answers "/" (every db) and, when one is true, "/<db>" and
// "/<db>/": JSON for clients that accept it, the dashboard otherwise.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request, one bool, db string) {
	st := s.backend.Status()
	var v any = st
	if one {
		noteDB(w, db)
		dbs, ok := st.DBs[db]
		if !ok {
			// sequins: 501 for a peer's request (?proxy=...), else 404.
			status := http.StatusNotFound
			if proxyParam(r.URL.RawQuery) != "" {
				status = http.StatusNotImplemented
			}
			writeText(w, r, status, "unknown db\n")
			return
		}
		v = dbs
		st.DBs = map[string]node.DBStatus{db: dbs}
	}
	if acceptsJSON(r) {
		body, err := json.Marshal(v)
		if err != nil {
			s.log.Error("edge: encode status", "err", err)
			writeText(w, r, http.StatusInternalServerError, "internal server error\n")
			return
		}
		writeBody(w, r, http.StatusOK, valJSON, body)
		return
	}
	page := dashboardPage{
		NodeName:    s.nodeName,
		ShardID:     st.ShardID,
		Release:     st.Release,
		DBs:         st.DBs,
		SourceError: st.SourceError,
		Refresh:     dashboardRefresh,
		Now:         time.Now().UTC(),
	}
	if one {
		page.DB = db
	}
	var buf bytes.Buffer
	if err := s.dashboard.Execute(&buf, &page); err != nil {
		s.log.Error("edge: render dashboard", "err", err)
		writeText(w, r, http.StatusInternalServerError, "internal server error\n")
		return
	}
	writeBody(w, r, http.StatusOK, valHTML, buf.Bytes())
}
