package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// httpsName is the scenario of spangle over HTTPS against the baseline
// over HTTPS.
const httpsName = "https"

// benchClient is the harness's HTTP client: it trusts any certificate
// (the servers under test use the one writeBenchCert makes).
func benchClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // our own loopback servers
	}}
}

// writeBenchCert writes a self-signed ECDSA P-256 certificate for
// 127.0.0.1, valid a day, and its key into dir, and returns their paths.
func writeBenchCert(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "spangle-bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "bench-cert.pem"), filepath.Join(dir, "bench-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// runHTTPS starts spangle on the dataset (s2-blocks, the default layout)
// with [http] tls_cert and tls_key, and the baseline over HTTPS with the
// same certificate, and loads both alike, each spangle load paired with a
// load of that baseline: uniform keys, then (with --zipf) Zipf keys. wrk
// speaks HTTP/1.1 over TLS; keep-alive connections make the handshakes a
// negligible share.
func runHTTPS(ctx context.Context, b *bench) (res scenarioResult, err error) {
	res.Name = httpsName
	certFile, keyFile, err := writeBenchCert(b.cfg.Work)
	if err != nil {
		return res, err
	}
	base, err := startBaseline(ctx, b, "baseline-tls", "--tls-cert", certFile, "--tls-key", keyFile)
	if err != nil {
		return res, fmt.Errorf("baseline-tls: %w", err)
	}
	defer func() {
		if serr := base.c.stop(); serr != nil {
			res.Problems = append(res.Problems, serr.Error())
		}
	}()
	conf := fmt.Sprintf("[storage]\ncompression = \"s2-blocks\"\n%s[http]\ntls_cert = %q\ntls_key = %q\n", b.hotCacheLine(), certFile, keyFile)
	srv, err := b.startServer("spangle-https", b.cfg.Spangle, "spangle.toml", conf, b.serveArgs)
	if err != nil {
		return res, err
	}
	defer srv.stop(&res)
	url := "https://" + srv.addr
	if _, err := waitServing(ctx, srv.c, url, b.cfg.Gen, b.cfg.BuildTimeout); err != nil {
		return res, err
	}
	if err := b.loadWith(ctx, &res, url+"/", srv.c, loadSpec{base: base, script: b.script, warmup: b.checkScript}); err != nil {
		return res, err
	}
	if b.cfg.Zipf {
		spec := loadSpec{base: base, script: b.zipfScript, warmup: b.zipfScript, name: httpsName + " zipf"}
		if err := b.loadWith(ctx, &res, url+"/", srv.c, spec); err != nil {
			return res, err
		}
	}
	if b.h2load == "" {
		res.Notes = append(res.Notes, "no HTTP/2 rows: h2load not found (Debian package nghttp2-client; `make deps-bench` installs it)")
	} else {
		res.Notes = append(res.Notes, "the https h2 rows are h2load's: HTTP/2 by ALPN, one connection carrying the row's connections as concurrent streams, keys uniform (a list of its own for each load)")
		if err := b.loadWith(ctx, &res, url+"/", srv.c, loadSpec{base: base, name: httpsName + " h2", h2: true}); err != nil {
			return res, err
		}
	}
	b.servingRSS(srv.c.pid(), "", &res)
	return res, nil
}
