package spangle_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/node/nodetest"
)

// writeCert writes a certificate of ca with serial and its key into dir.
func writeCert(t *testing.T, ca *nodetest.CA, dir string, serial int64) (certFile, keyFile string) {
	t.Helper()
	c, k := ca.Issue(t, serial, time.Now().Add(time.Hour))
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, b := range map[string][]byte{certFile: c, keyFile: k} {
		if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// TestRunHTTPS starts a node with [http] tls_cert and tls_key: lookups and
// the dashboard over HTTPS and HTTP/2, the debug listener over HTTPS, and
// a renewed certificate served after Refresh (SIGHUP's path).
func TestRunHTTPS(t *testing.T) {
	ca := nodetest.NewCA(t)
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 2, nodetest.Numbered("v1", 50))
	certDir := t.TempDir()
	cfg := spangle.DefaultConfig()
	cfg.TLS.CertFile, cfg.TLS.KeyFile = writeCert(t, ca, certDir, 10)
	cfg.TLS.ReloadCheck = time.Hour // only Refresh reloads here
	cfg.Node.Source = root
	cfg.Node.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Bind = "127.0.0.1:0"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DebugBind = l.Addr().String()
	l.Close()
	cfg.NATS.EmbeddedListen = "127.0.0.1:-1"
	cfg.Logger = nodetest.Logger()
	s, err := spangle.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(url string) (*http.Response, string, error) {
		resp, err := client.Get(url)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, string(body), err
	}
	base := "https://" + s.Addr().String()
	nodetest.WaitFor(t, 30*time.Second, "key-7 served over HTTPS", func() error {
		resp, body, err := get(base + "/d/key-7")
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || body != "v1:7" {
			return errors.New(resp.Status + " " + body)
		}
		if resp.ProtoMajor != 2 {
			return fmt.Errorf("%s, want HTTP/2", resp.Proto)
		}
		return nil
	})
	if resp, body, err := get(base + "/"); err != nil || resp.StatusCode != 200 || !strings.Contains(body, "<html") {
		t.Errorf("dashboard over HTTPS: %v %v", err, resp)
	}
	if resp, _, err := get("https://" + cfg.DebugBind + "/admin/pins"); err != nil || resp.StatusCode != 200 {
		t.Errorf("debug listener over HTTPS: %v %v", err, resp)
	}

	writeCert(t, ca, certDir, 11)
	s.Refresh()
	c, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{RootCAs: ca.Pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got != 11 {
		t.Errorf("after Refresh, serial %d served, want 11", got)
	}
}

// TestStartTLSErrors: a missing or mismatched key file stops the start
// with an error naming the key, in the one list of start-up problems:
// with the HTTP port taken too, the error names both.
func TestStartTLSErrors(t *testing.T) {
	ca := nodetest.NewCA(t)
	certFile, _ := writeCert(t, ca, t.TempDir(), 10)
	_, otherKey := writeCert(t, ca, t.TempDir(), 11)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tt := range []struct {
		name, key, bind string
		want            []string
	}{
		{"missing key", filepath.Join(t.TempDir(), "nope.pem"), "127.0.0.1:0", []string{"http.tls_key"}},
		{"mismatched key", otherKey, "127.0.0.1:0", []string{"does not match"}},
		{"no key", "", "127.0.0.1:0", []string{"http.tls_key is empty"}},
		{"missing key and port taken", filepath.Join(t.TempDir(), "nope.pem"), taken.Addr().String(),
			[]string{"http.tls_key", "bind (--bind) \"" + taken.Addr().String() + "\""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := spangle.DefaultConfig()
			cfg.TLS.CertFile, cfg.TLS.KeyFile = certFile, tt.key
			cfg.Node.Source, cfg.Node.DataDir = t.TempDir(), t.TempDir()
			cfg.Bind = tt.bind
			cfg.NATS.EmbeddedListen = "127.0.0.1:-1"
			s, err := spangle.Start(cfg)
			if err == nil {
				s.Shutdown(context.Background())
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
