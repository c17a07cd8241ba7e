package edge

import (
	"encoding/json"
	"net/http"

	"github.com/spangledb/spangle/node"
)

// serveHealthz answers /healthz as sequins did: a JSON object
// {"<db>": {"<version>": <this node's NodeVersionStatus>}} holding every db
// and, under it, the versions this node has an entry for; 200 when any of
// those is ACTIVE or BUILDING, else (no dbs included) 404.
func (s *Server) serveHealthz(w http.ResponseWriter, r *http.Request) {
	st := s.backend.Status()
	health := make(map[string]map[string]node.NodeVersionStatus, len(st.DBs))
	healthy := false
	for db, dbs := range st.DBs {
		versions := make(map[string]node.NodeVersionStatus, len(dbs.Versions))
		for v, vs := range dbs.Versions {
			nvs, ok := vs.Nodes[s.nodeName]
			if !ok {
				continue
			}
			versions[v] = nvs
			if nvs.State == node.StateActive || nvs.State == node.StateBuilding {
				healthy = true
			}
		}
		health[db] = versions
	}
	body, err := json.Marshal(health)
	if err != nil {
		s.log.Error("edge: encode health", "err", err)
		writeText(w, r, http.StatusInternalServerError, "internal server error\n")
		return
	}
	status := http.StatusNotFound
	if healthy {
		status = http.StatusOK
	}
	writeBody(w, r, status, valJSON, body)
}

// serveReadyz answers /readyz: 200 "ok" when Backend.Ready, else 503 "not
// ready", with the reasons the configuration can give: the node cannot
// watch the cluster's buckets (Config.WatchError), its source cannot be
// listed (Config.SourceError).
func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	if s.backend.Ready() {
		writeText(w, r, http.StatusOK, "ok\n")
		return
	}
	text := "not ready"
	if msg := call(s.watchError); msg != "" {
		text += ": watch: " + msg
	}
	if msg := call(s.sourceError); msg != "" {
		text += ": source: " + msg
	}
	writeText(w, r, http.StatusServiceUnavailable, text+"\n")
}

// call returns f's answer, or "" without f.
func call(f func() string) string {
	if f == nil {
		return ""
	}
	return f()
}
