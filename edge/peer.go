package edge

import (
	"crypto/subtle"
	"net/http"
)

// hdrPeerToken is node/proxy.PeerTokenHeader, canonical.
const hdrPeerToken = "X-Spangle-Peer-Token"

// peerToken returns the token Config.PeerToken sets, nil for none.
func peerToken(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// peerAllowed reports whether r, a peer's request (?proxy=), may be
// served: always without a configured token, else only with the token
// (compared in constant time). A refusal is answered 403 here.
func (s *Server) peerAllowed(w http.ResponseWriter, r *http.Request) bool {
	return peerAllowedOn(s, httpSink{w, r})
}

// peerAllowedOn is peerAllowed on either server (sink.go).
func peerAllowedOn[K sink](s *Server, k K) bool {
	if s.peerToken == nil {
		return true
	}
	got := k.fields(hdrPeerToken)
	if len(got) == 1 && subtle.ConstantTimeCompare([]byte(got[0]), s.peerToken) == 1 {
		return true
	}
	s.metrics.peerRefused.Inc()
	writeTextOn(k, http.StatusForbidden, "peer requests (?proxy=) need the cluster's peer token\n")
	return false
}
