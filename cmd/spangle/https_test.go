package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestClusterHTTPS runs three "spangle serve" processes with [http]
// tls_cert, tls_key, tls_peer_ca and tls_client_ca (mutual TLS) and the
// peer token: every key is readable from every node over HTTPS and
// HTTP/2, the keys a node does not hold proxied to its peers over HTTPS
// (with the node's certificate as client certificate), a client's batch
// included; a client
// without a certificate, or speaking plain HTTP, is refused.
func TestClusterHTTPS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	const keys, files = 60, 6
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", files, keys)
	bin := buildBinary(t)

	ca := nodetest.NewCA(t)
	dir := t.TempDir()
	cert, key := ca.Issue(t, 2, time.Now().Add(time.Hour))
	files3 := map[string][]byte{"cert.pem": cert, "key.pem": key, "ca.pem": ca.PEM}
	for name, b := range files3 {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The lines after [sharding]'s end the table and open [http].
	sharding := fmt.Sprintf("peer_token = \"s3cret\"\nproxy_conns_per_peer = 1\n[http]\ntls_cert = %q\ntls_key = %q\ntls_peer_ca = %q\ntls_client_ca = %q\n",
		filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.pem"))
	natsPort := natstest.FreePort(t)
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		n := startClusterProc(t, bin, root, id, natsPort, 2*time.Second, 30*time.Second, sharding)
		n.base = strings.Replace(n.base, "http://", "https://", 1)
		nodes = append(nodes, n)
	}
	clientCert, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{clientCert}},
		ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: testTimeout}

	// Nodes 2 and 3 first: node 1's proxy has cached nothing yet when
	// it answers the batch below.
	waitFor(t, "every key of v1 readable from nodes 2 and 3 over HTTPS", func() error {
		_, err := allKeys(client, nodes[1:], keys, "v1")
		return err
	})
	// A batch of every key from node 1: those it does not hold are asked
	// of its peers, over HTTPS.
	var batch [][]byte
	for k := range keys {
		batch = append(batch, fmt.Appendf(nil, "key-%d", k))
	}
	waitFor(t, "a batch of every key from node 1", func() error {
		resp, err := client.Post(nodes[0].base+"/d/_batch", "application/octet-stream",
			bytes.NewReader(batchwire.AppendRequest(nil, batch)))
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("batch: %d %v %.100q", resp.StatusCode, err, body)
		}
		r, err := batchwire.DecodeReply(body, keys)
		if err != nil {
			return err
		}
		for k, it := range r.Items {
			if it.Status != batchwire.Found || string(it.Value) != fmt.Sprintf("v1:%d", k) {
				return fmt.Errorf("batch item %d: %v %q", k, it.Status, it.Value)
			}
		}
		return nil
	})
	var proxied int
	waitFor(t, "every key of v1 readable from every node over HTTPS", func() (err error) {
		proxied, err = allKeys(client, nodes, keys, "v1")
		return err
	})
	if proxied == 0 {
		t.Fatalf("no answer of %d was proxied: every node holds every partition", 3*keys)
	}
	resp, err := client.Get(nodes[0].base + "/d/key-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("a client offering h2 got %s", resp.Proto)
	}

	// Concurrent readers of node 1: its proxied lookups queue per peer.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 8 {
		wg.Go(func() {
			for k := r; k < keys; k += 8 {
				if _, _, _, err := clusterGet(client, nodes[0].base, k); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	metrics := getBody(t, client, nodes[0].base+"/metrics")
	if ok := metricValue(metrics, `spangle_proxy_attempts_total{outcome="ok"}`); ok == 0 {
		t.Errorf("node 1 counts no successful attempt to a peer:\n%s", grepLines(metrics, "spangle_proxy_"))
	}
	t.Logf("node 1's requests to peers by keys carried:\n%s", grepLines(metrics, "spangle_proxy_request_keys"))

	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}, Timeout: 10 * time.Second}
	if resp, err := anonymous.Get(nodes[0].base + "/d/key-1"); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %d", resp.StatusCode)
	}
	plain := strings.Replace(nodes[0].base, "https://", "http://", 1)
	if resp, err := http.Get(plain + "/d/key-1"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP to an HTTPS node answered 200")
		}
	}
}

// getBody returns url's body, failing the test on an error or a status
// other than 200.
func getBody(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// metricValue returns the value of the exposition line starting with
// series, 0 if absent.
func metricValue(exposition, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(exposition)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// grepLines returns the lines of s starting with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.HasPrefix(l, prefix) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}
