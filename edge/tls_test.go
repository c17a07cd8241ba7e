package edge_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node/nodetest"
)

// writeFile writes b at path, replacing it atomically (a rename), as
// certificate renewal tools do.
func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// tlsFiles writes a certificate of ca with serial into dir and returns a
// TLSConfig naming the files.
func tlsFiles(t testing.TB, ca *nodetest.CA, dir string, serial int64) edge.TLSConfig {
	t.Helper()
	c, k := ca.Issue(t, serial, time.Now().Add(time.Hour))
	cfg := edge.DefaultTLSConfig()
	cfg.CertFile, cfg.KeyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, cfg.CertFile, c)
	writeFile(t, cfg.KeyFile, k)
	return cfg
}

// startTLSServer serves b over HTTPS with tc on loopback and returns its
// address and the TLS, stopped at cleanup.
func startTLSServer(t *testing.T, b edge.Backend, tc edge.TLSConfig) (*testServer, *edge.TLS) {
	t.Helper()
	reg := prometheus.NewRegistry()
	tc.Registerer = reg
	tc.Logger = nodetest.Logger()
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	tl.Start()
	t.Cleanup(tl.Stop)
	ts := startServer(t, b, func(c *edge.Config) {
		c.TLS = tl.ServerConfig()
		c.Registerer = reg
	})
	ts.url = "https://" + ts.addr
	ts.registry = reg
	return ts, tl
}

// h2Client is an HTTP/2-capable client trusting ca (ALPN offers h2).
func h2Client(ca *nodetest.CA, h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// servedSerial dials addr and returns the serial of the certificate it
// presents.
func servedSerial(t testing.TB, ca *nodetest.CA, addr string) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestHTTPSAndHTTP2(t *testing.T) {
	ca := nodetest.NewCA(t)
	ts, _ := startTLSServer(t, newFake(), tlsFiles(t, ca, t.TempDir(), 2))
	for _, tt := range []struct {
		name  string
		h2    bool
		major int
		alpn  string
	}{{"HTTP/2 by ALPN", true, 2, "h2"}, {"HTTP/1.1", false, 1, "http/1.1"}} {
		t.Run(tt.name, func(t *testing.T) {
			c := h2Client(ca, tt.h2)
			defer c.CloseIdleConnections()
			resp, err := c.Get(ts.url + "/baby-names/1881")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "value of 1881" {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			if resp.ProtoMajor != tt.major || resp.TLS == nil || resp.TLS.NegotiatedProtocol != tt.alpn {
				t.Errorf("proto %s, ALPN %q; want HTTP/%d and %q", resp.Proto, resp.TLS.NegotiatedProtocol, tt.major, tt.alpn)
			}
			if resp.TLS.Version < tls.VersionTLS12 {
				t.Errorf("TLS version %x", resp.TLS.Version)
			}
		})
	}
	t.Run("TLS 1.1 refused", func(t *testing.T) {
		c, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: ca.Pool, MaxVersion: tls.VersionTLS11})
		if err == nil {
			c.Close()
			t.Fatal("a TLS 1.1 handshake succeeded")
		}
	})
}

func TestTLSStartErrors(t *testing.T) {
	ca := nodetest.NewCA(t)
	dir := t.TempDir()
	good := tlsFiles(t, ca, dir, 2)
	_, otherKey := ca.Issue(t, 3, time.Now().Add(time.Hour))
	expired, expiredKey := ca.Issue(t, 4, time.Now().Add(-time.Minute))
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, b)
		return p
	}
	for _, tt := range []struct {
		name      string
		cert, key string
		clientCA  string
		peerCA    string
		want      []string // in the error
	}{
		{name: "missing cert", cert: filepath.Join(dir, "nope.pem"), key: good.KeyFile, want: []string{"http.tls_cert", "no such file"}},
		{name: "missing key", cert: good.CertFile, key: filepath.Join(dir, "nope.pem"), want: []string{"http.tls_key", "no such file"}},
		{name: "unreadable cert", cert: dir, key: good.KeyFile, want: []string{"http.tls_cert", "is a directory"}},
		{name: "not PEM", cert: file("junk.pem", []byte("junk")), key: good.KeyFile, want: []string{"http.tls_cert", "http.tls_key"}},
		{name: "mismatched key", cert: good.CertFile, key: file("other-key.pem", otherKey), want: []string{"http.tls_cert", "http.tls_key", "does not match"}},
		{name: "expired", cert: file("expired.pem", expired), key: file("expired-key.pem", expiredKey), want: []string{"http.tls_cert", "not now"}},
		{name: "client CA missing", cert: good.CertFile, key: good.KeyFile, clientCA: filepath.Join(dir, "nope.pem"), want: []string{"http.tls_client_ca"}},
		{name: "client CA not PEM", cert: good.CertFile, key: good.KeyFile, clientCA: file("junk-ca.PEM", []byte("junk")), want: []string{"http.tls_client_ca", "no PEM"}},
		{name: "peer CA missing", cert: good.CertFile, key: good.KeyFile, peerCA: filepath.Join(dir, "nope.pem"), want: []string{"http.tls_peer_ca"}},
		{name: "every file at once", cert: good.CertFile, key: filepath.Join(dir, "nope.pem"), clientCA: file("junk-ca2.PEM", []byte("junk")),
			peerCA: filepath.Join(dir, "nope.pem"), want: []string{"http.tls_key", "http.tls_client_ca", "http.tls_peer_ca"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := edge.DefaultTLSConfig()
			cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile, cfg.PeerCAFile = tt.cert, tt.key, tt.clientCA, tt.peerCA
			_, err := edge.NewTLS(cfg)
			if err == nil {
				t.Fatal("NewTLS succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestTLSRenewalUnderLoad renews the certificate several times (the
// files replaced, found by the periodic check, and once by Reload, as
// on SIGHUP) while HTTP/2 and HTTP/1.1 clients keep asking: no request
// may fail, connections opened before a renewal keep working, new
// handshakes get the new certificate. A bad renewal in the middle is
// refused, counted, and leaves the previous certificate serving.
func TestTLSRenewalUnderLoad(t *testing.T) {
	ca := nodetest.NewCA(t)
	dir := t.TempDir()
	tc := tlsFiles(t, ca, dir, 100)
	tc.ReloadCheck = 10 * time.Millisecond
	ts, tl := startTLSServer(t, newFake(), tc)

	var stop atomic.Bool
	var requests, failures atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		c := h2Client(ca, i%2 == 0)
		wg.Go(func() {
			defer c.CloseIdleConnections()
			for !stop.Load() {
				resp, err := c.Get(fmt.Sprintf("%s/baby-names/k%d", ts.url, i))
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					if failures.Add(1) == 1 {
						errs <- err
					}
					continue
				}
				requests.Add(1)
			}
		})
	}
	waitRequests := func(n int64) {
		t.Helper()
		want := requests.Load() + n
		checkFor(t, 30*time.Second, "requests", func() bool { return requests.Load() >= want })
	}
	ok := func() float64 { return nodetest.Metric(t, ts.registry, "spangle_tls_reloads_total", "result", "ok") }
	failed := func() float64 {
		return nodetest.Metric(t, ts.registry, "spangle_tls_reloads_total", "result", "failed")
	}
	waitRequests(50)
	for serial := int64(101); serial <= 105; serial++ {
		c, k := ca.Issue(t, serial, time.Now().Add(time.Hour))
		// The key first: a check between the two renames sees the old
		// certificate with the new key, refuses it and keeps serving.
		writeFile(t, tc.KeyFile, k)
		writeFile(t, tc.CertFile, c)
		if serial == 105 {
			if err := tl.Reload(); err != nil { // SIGHUP's path
				t.Fatal(err)
			}
		}
		checkFor(t, 30*time.Second, fmt.Sprintf("serial %d served", serial), func() bool {
			return servedSerial(t, ca, ts.addr) == serial
		})
		waitRequests(50)
		if serial == 102 {
			// A bad renewal: a certificate that expired.
			before := failed()
			bad, badKey := ca.Issue(t, 999, time.Now().Add(-time.Minute))
			writeFile(t, tc.KeyFile, badKey)
			writeFile(t, tc.CertFile, bad)
			checkFor(t, 30*time.Second, "the bad certificate refused", func() bool { return failed() > before })
			if err := tl.Reload(); err == nil || !strings.Contains(err.Error(), "not now") {
				t.Errorf("Reload of an expired certificate: %v", err)
			}
			if got := servedSerial(t, ca, ts.addr); got != serial {
				t.Errorf("after a bad renewal, serial %d served, want %d (the previous)", got, serial)
			}
			waitRequests(50)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("first failed request: %v", err)
	}
	if n := failures.Load(); n > 0 {
		t.Errorf("%d of %d requests failed during renewals", n, n+requests.Load())
	}
	if ok() < 5 {
		t.Errorf("%v successful reloads, want at least 5", ok())
	}
	if got := nodetest.Metric(t, ts.registry, "spangle_tls_cert_not_after_seconds"); got != float64(tl.Certificate().Leaf.NotAfter.Unix()) {
		t.Errorf("not_after gauge %v", got)
	}
	t.Logf("%d requests, %v reloads ok, %v refused", requests.Load(), ok(), failed())
}

func TestTLSClientCertificates(t *testing.T) {
	ca := nodetest.NewCA(t)
	dir := t.TempDir()
	tc := tlsFiles(t, ca, dir, 2)
	tc.ClientCAFile = filepath.Join(dir, "ca.PEM")
	writeFile(t, tc.ClientCAFile, ca.PEM)
	ts, tl := startTLSServer(t, newFake(), tc)

	anonymous := h2Client(ca, true)
	defer anonymous.CloseIdleConnections()
	if resp, err := anonymous.Get(ts.url + "/baby-names/1881"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %d", resp.StatusCode)
	}
	// A peer presents the node's own certificate (PeerConfig).
	pc := tl.PeerConfig()
	pc.RootCAs = ca.Pool
	peer := &http.Client{Transport: &http.Transport{TLSClientConfig: pc}, Timeout: 10 * time.Second}
	defer peer.CloseIdleConnections()
	resp, err := peer.Get(ts.url + "/baby-names/1881")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// TestTLSClientCAReload: the client CAs follow tls_client_ca's changes
// (found by the periodic check) without a restart: a client whose
// certificate comes from a CA added to the file is accepted from then
// on. A file that holds no certificate is refused (Reload names the
// key; the failure is counted) and the CAs loaded before stay.
func TestTLSClientCAReload(t *testing.T) {
	ca, newCA := nodetest.NewCA(t), nodetest.NewCA(t)
	dir := t.TempDir()
	tc := tlsFiles(t, ca, dir, 2)
	tc.ClientCAFile = filepath.Join(dir, "client-ca.pem")
	tc.ReloadCheck = 10 * time.Millisecond
	writeFile(t, tc.ClientCAFile, ca.PEM)
	ts, tl := startTLSServer(t, newFake(), tc)

	c, k := newCA.Issue(t, 7, time.Now().Add(time.Hour))
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	// get asks with a new connection, presenting newCA's certificate.
	get := func() error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{cert}}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(ts.url + "/baby-names/1881")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	if err := get(); err == nil {
		t.Fatal("a client certificate of a CA not in tls_client_ca was accepted")
	}
	ok := func() float64 { return nodetest.Metric(t, ts.registry, "spangle_tls_reloads_total", "result", "ok") }
	failed := func() float64 {
		return nodetest.Metric(t, ts.registry, "spangle_tls_reloads_total", "result", "failed")
	}
	writeFile(t, tc.ClientCAFile, append(append([]byte(nil), ca.PEM...), newCA.PEM...))
	checkFor(t, 30*time.Second, "the new client CA trusted", func() bool { return get() == nil })
	if ok() < 1 {
		t.Errorf("%v successful reloads, want 1", ok())
	}
	before := failed()
	writeFile(t, tc.ClientCAFile, []byte("not a certificate\n"))
	checkFor(t, 30*time.Second, "the bad client CA file refused", func() bool { return failed() > before })
	if err := tl.Reload(); err == nil || !strings.Contains(err.Error(), "http.tls_client_ca") {
		t.Errorf("Reload of a bad client CA file: %v; want an error naming http.tls_client_ca", err)
	}
	if err := get(); err != nil {
		t.Errorf("after a refused client CA file, the CAs loaded before: %v", err)
	}
}

// TestTLSConfigValidate: each missing piece is named, and a config with
// neither file does not claim that one of them is set.
func TestTLSConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*edge.TLSConfig)
		want string // "" for valid
	}{
		{"both files", func(c *edge.TLSConfig) {}, ""},
		{"neither file", func(c *edge.TLSConfig) { c.CertFile, c.KeyFile = "", "" }, "http.tls_cert and http.tls_key are empty"},
		{"no cert", func(c *edge.TLSConfig) { c.CertFile = "" }, "http.tls_cert is empty (tls_key is set)"},
		{"no key", func(c *edge.TLSConfig) { c.KeyFile = "" }, "http.tls_key is empty (tls_cert is set)"},
		{"no reload check", func(c *edge.TLSConfig) { c.ReloadCheck = 0 }, "ReloadCheck"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := edge.DefaultTLSConfig()
			c.CertFile, c.KeyFile = "cert.pem", "key.pem"
			tc.set(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
