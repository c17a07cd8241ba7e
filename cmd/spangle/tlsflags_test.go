package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 (its own CA,
// as an operator's openssl req -x509 makes) and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "spangle node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestCLIHTTPS: get, list, status and ready against a node serving HTTPS
// with its own self-signed certificate (issue 38 item 2: get failed on
// "certificate signed by unknown authority", list and status had no
// --insecure): each fails to verify it by default, and works with
// --cacert naming it, with --insecure, and with SSL_CERT_FILE naming it.
func TestCLIHTTPS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	root, dir := t.TempDir(), t.TempDir()
	writeVersion(t, root, "d", "v1", 2, 10)
	cert, key := selfSigned(t, dir)
	config := filepath.Join(dir, "spangle.toml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "source = %q\n[http]\ntls_cert = %q\ntls_key = %q\n", root, cert, key), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	srv := exec.Command(bin, "serve", "--config", config, "--data-dir", filepath.Join(dir, "data"), "--bind", addr, "--nats-listen", "127.0.0.1:0")
	logFile := filepath.Join(dir, "serve.log")
	logs, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	srv.Stderr = logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	url := "https://" + addr
	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &exit):
			return string(out), exit.ExitCode()
		}
		t.Fatalf("spangle %q: %v", args, err)
		return "", 0
	}
	deadline := time.Now().Add(testTimeout)
	for {
		out, code := run(nil, "ready", "--http", url, "--cacert", cert)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			t.Fatalf("not ready over HTTPS: %s\n%s", out, log)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}

	commands := []struct {
		args []string
		want string // in the output when it works
	}{
		{[]string{"get", "--http", url, "d", "key-3"}, "v1:3"},
		{[]string{"list", "--http", url, "d"}, "key-9"},
		{[]string{"status", "--http", url}, "v1"},
		{[]string{"ready", "--http", url}, ""},
	}
	for _, c := range commands {
		name := c.args[0]
		if out, code := run(nil, c.args...); code == 0 || !strings.Contains(out, "certificate signed by unknown authority") {
			t.Errorf("%s without --cacert: exit %d, want a refused certificate:\n%s", name, code, out)
		}
		for _, v := range []struct {
			how  string
			env  []string
			args []string
		}{
			{"--cacert", nil, []string{"--cacert", cert}},
			{"--insecure", nil, []string{"--insecure"}},
			{"SSL_CERT_FILE", []string{"SSL_CERT_FILE=" + cert}, nil},
		} {
			args := append(append([]string{name}, v.args...), c.args[1:]...)
			if out, code := run(v.env, args...); code != 0 || !strings.Contains(out, c.want) {
				t.Errorf("%s with %s: exit %d, want 0 and %q:\n%s", name, v.how, code, c.want, out)
			}
		}
		if out, code := run(nil, append([]string{name, "--cacert", cert, "--insecure"}, c.args[1:]...)...); code != 2 || !strings.Contains(out, "--cacert and --insecure are exclusive") {
			t.Errorf("%s with --cacert and --insecure: exit %d, want 2:\n%s", name, code, out)
		}
		if out, code := run(nil, append([]string{name, "--cacert", filepath.Join(dir, "key.pem")}, c.args[1:]...)...); code == 0 || !strings.Contains(out, "no PEM certificate") {
			t.Errorf("%s with --cacert naming a key: exit %d:\n%s", name, code, out)
		}
	}
}
