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
