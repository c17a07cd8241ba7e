package proxy

import (
	"crypto/tls"
	"net/http"
)

// PeerTransport returns a Transport to peers like the one New makes:
// HTTPS with the configuration conf returns at each dial when conf is
// set (see Config.TLS), and the scheme to use. Peer copies of partition
// files (node/cluster) use it.
func PeerTransport(conf func() *tls.Config) (t *http.Transport, scheme string) {
	t, scheme = newTransport(), "http"
	if conf != nil {
		t.DialTLSContext, scheme = dialTLS(conf), "https"
	}
	return t, scheme
}
