package proxy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/proxy"
)

// TestPeersOverHTTPS: a peer serving HTTPS with client certificates
// required and the peer token answers a proxy configured with the
// node's TLS (edge.TLS.PeerConfig: the CA from tls_peer_ca, the node's
// certificate as client certificate), lookups and batches alike; a
// proxy speaking plain HTTP, or TLS without a client certificate, gets
// no answer.
func TestPeersOverHTTPS(t *testing.T) {
	ca := nodetest.NewCA(t)
	dir := t.TempDir()
	c, k := ca.Issue(t, 2, time.Now().Add(time.Hour))
	tc := edge.DefaultTLSConfig()
	tc.CertFile, tc.KeyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	tc.ClientCAFile, tc.PeerCAFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.pem")
	for path, b := range map[string][]byte{tc.CertFile: c, tc.KeyFile: k, tc.ClientCAFile: ca.PEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	b := &mapBackend{version: "v1", data: map[string]string{"a": "A", "b": "B", "c": "C"}}
	cfg := edge.DefaultConfig()
	cfg.Backend, cfg.Batch, cfg.PeerToken, cfg.TLS = b, b, "s3cret", tl.ServerConfig()
	srv, err := edge.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	peer := l.Addr().String()

	noClientCert := &tls.Config{RootCAs: ca.Pool}
	for _, tt := range []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{{"peer TLS", tl.PeerConfig(), true}, {"plain HTTP", nil, false}, {"no client certificate", noClientCert, false}} {
		t.Run(tt.name, func(t *testing.T) {
			pc := proxy.DefaultConfig()
			pc.PeerToken, pc.TLS = "s3cret", tt.tls
			pc.MaxConnsPerPeer = 1 // lookups queue and travel in batches
			pc.Timeout, pc.StageTimeout = 5*time.Second, 5*time.Second
			p, err := proxy.New(pc)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			var wg sync.WaitGroup
			for _, k := range []string{"a", "b", "c", "a", "b", "c"} { // concurrent: some travel in one batch
				wg.Go(func() {
					res, err := p.Get(context.Background(), proxy.Request{DB: "db", Version: "v1", Key: []byte(k), Peers: []string{peer}, Raw: true})
					switch {
					case tt.ok && (err != nil || res.Status != 200 || string(res.Body) != b.data[k]):
						t.Errorf("%s: %+v %v", k, res, err)
					case !tt.ok && !errors.Is(err, proxy.ErrNoReplica):
						t.Errorf("%s: %+v %v; want ErrNoReplica", k, res, err)
					}
				})
			}
			wg.Wait()
		})
	}
	t.Logf("largest batch the peer answered: %d keys", b.maxBatch())
}
