package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/proxy"
)

// startTLSEdge serves b over HTTPS on loopback with the edge.TLS of tc,
// the peer token "s3cret" required, and returns the peer's address.
func startTLSEdge(t *testing.T, b *mapBackend, tc edge.TLSConfig) string {
	t.Helper()
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
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
	return l.Addr().String()
}

// writePEM writes the PEM blocks bs to dir/name and returns its path.
func writePEM(t *testing.T, dir, name string, bs ...[]byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path+".tmp", bytes.Join(bs, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPeersOverHTTPS: a peer serving HTTPS with client certificates
// required and the peer token answers a proxy configured with the
// node's TLS (edge.TLS.PeerConfig: the CA from tls_peer_ca, the node's
// certificate as client certificate), lookups and batches alike (the
// lookups queued behind a held one travel in one batch request); a
// proxy speaking plain HTTP, or TLS without a client certificate, gets
// no answer.
func TestPeersOverHTTPS(t *testing.T) {
	ca := nodetest.NewCA(t)
	dir := t.TempDir()
	c, k := ca.Issue(t, 2, time.Now().Add(time.Hour))
	tc := edge.DefaultTLSConfig()
	tc.CertFile, tc.KeyFile = writePEM(t, dir, "cert.pem", c), writePEM(t, dir, "key.pem", k)
	tc.ClientCAFile = writePEM(t, dir, "ca.pem", ca.PEM)
	tc.PeerCAFile = tc.ClientCAFile
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	b := &mapBackend{version: "v1", data: map[string]string{"hold": "H", "a": "A", "b": "B", "c": "C"},
		gate: func(key string) {
			if key == "hold" {
				<-release
			}
		}}
	peer := startTLSEdge(t, b, tc)

	noClientCert := &tls.Config{RootCAs: ca.Pool}
	for _, tt := range []struct {
		name string
		tls  func() *tls.Config
		ok   bool
	}{
		{"peer TLS", tl.PeerConfig, true},
		{"plain HTTP", nil, false},
		{"no client certificate", func() *tls.Config { return noClientCert }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var launched atomic.Int32
			pc := proxy.DefaultConfig()
			pc.PeerToken, pc.TLS = "s3cret", tt.tls
			pc.MaxConnsPerPeer = 1 // lookups queue and travel in batches
			pc.Timeout, pc.StageTimeout = 30*time.Second, 30*time.Second
			pc.OnAttempt = func(string) { launched.Add(1) }
			p, err := proxy.New(pc)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			get := func(k string) error {
				res, err := p.Get(context.Background(), proxy.Request{DB: "db", Version: "v1", Key: []byte(k), Peers: []string{peer}, Raw: true})
				switch {
				case tt.ok && (err != nil || res.Status != 200 || string(res.Body) != b.data[k]):
					return fmt.Errorf("%s: %+v %v", k, res, err)
				case !tt.ok && !errors.Is(err, proxy.ErrNoReplica):
					return fmt.Errorf("%s: %+v %v; want ErrNoReplica", k, res, err)
				}
				return nil
			}
			if !tt.ok {
				for _, k := range []string{"a", "b"} {
					if err := get(k); err != nil {
						t.Error(err)
					}
				}
				return
			}
			// "hold" takes the one connection and waits at the peer; the
			// others queue behind it, then go in one batch.
			held := make(chan error, 1)
			go func() { held <- get("hold") }()
			waitLaunched(t, &launched, 1)
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			for _, k := range []string{"a", "b", "c"} {
				wg.Go(func() { errs <- get(k) })
			}
			waitLaunched(t, &launched, 4)
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if err := <-held; err != nil {
				t.Error(err)
			}
			if m := b.maxBatch(); m < 2 {
				t.Errorf("largest batch the peer answered over HTTPS: %d keys, want several", m)
			}
		})
	}
}

// waitLaunched waits until n attempts were launched.
func waitLaunched(t *testing.T, launched *atomic.Int32, n int32) {
	t.Helper()
	nodetest.WaitFor(t, 30*time.Second, fmt.Sprintf("%d attempts", n), nodetest.True(func() bool { return launched.Load() >= n }))
}

// TestPeerCAReload: a proxy whose TLS is edge.TLS.PeerConfig trusts a
// peer's new CA once tls_peer_ca is rewritten and reloaded, without a
// new proxy or Transport; a reload of a file holding no certificate is
// refused, naming the key, and the CAs loaded before stay trusted.
func TestPeerCAReload(t *testing.T) {
	nodeCA, peerCA := nodetest.NewCA(t), nodetest.NewCA(t)
	peerDir, nodeDir := t.TempDir(), t.TempDir()
	pc, pk := peerCA.Issue(t, 2, time.Now().Add(time.Hour))
	ptc := edge.DefaultTLSConfig()
	ptc.CertFile, ptc.KeyFile = writePEM(t, peerDir, "cert.pem", pc), writePEM(t, peerDir, "key.pem", pk)
	b := &mapBackend{version: "v1", data: map[string]string{"a": "A"}}
	peer := startTLSEdge(t, b, ptc)

	nc, nk := nodeCA.Issue(t, 3, time.Now().Add(time.Hour))
	tc := edge.DefaultTLSConfig()
	tc.CertFile, tc.KeyFile = writePEM(t, nodeDir, "cert.pem", nc), writePEM(t, nodeDir, "key.pem", nk)
	tc.PeerCAFile = writePEM(t, nodeDir, "peer-ca.pem", nodeCA.PEM) // not the peer's CA
	tc.Logger = nodetest.Logger()
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	newProxy := func() *proxy.Proxy {
		cfg := proxy.DefaultConfig()
		cfg.PeerToken, cfg.TLS = "s3cret", tl.PeerConfig
		cfg.Timeout, cfg.StageTimeout = 30*time.Second, 30*time.Second
		p, err := proxy.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
		return p
	}
	get := func(p *proxy.Proxy) (proxy.Response, error) {
		return p.Get(context.Background(), proxy.Request{DB: "db", Version: "v1", Key: []byte("a"), Peers: []string{peer}, Raw: true})
	}
	p := newProxy()
	if res, err := get(p); !errors.Is(err, proxy.ErrNoReplica) {
		t.Fatalf("a peer of an untrusted CA answered: %+v %v", res, err)
	}
	writePEM(t, nodeDir, "peer-ca.pem", nodeCA.PEM, peerCA.PEM)
	if err := tl.Reload(); err != nil {
		t.Fatal(err)
	}
	if res, err := get(p); err != nil || res.Status != 200 || string(res.Body) != "A" {
		t.Fatalf("after the peer CA's reload: %+v %v", res, err)
	}
	writePEM(t, nodeDir, "peer-ca.pem", []byte("not a certificate\n"))
	if err := tl.Reload(); err == nil || !strings.Contains(err.Error(), "http.tls_peer_ca") {
		t.Fatalf("reload of a bad peer CA file: %v; want an error naming http.tls_peer_ca", err)
	}
	// A new proxy dials a new connection: the CAs kept verify it.
	if res, err := get(newProxy()); err != nil || res.Status != 200 {
		t.Fatalf("after a refused reload: %+v %v", res, err)
	}
}
