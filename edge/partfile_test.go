package edge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
)

var _ edge.PartFiles = (*node.Node)(nil)

// startPartFileNode starts a node holding version 1 of db d (4
// partitions of about 300 KB each) and a server giving its partition
// files to peers with the token "secret"; it returns the server and the
// version's directory.
func startPartFileNode(t *testing.T, opts ...func(*edge.Config)) (*testServer, string) {
	t.Helper()
	recs := make([]nodetest.Record, 20000)
	for i := range recs {
		recs[i] = nodetest.Record{Key: fmt.Appendf(nil, "k%06d", i), Value: fmt.Appendf(nil, "%x", i*7919*7919*7919)}
	}
	n, dir := partFileNode(t, recs)
	ts := startServer(t, n, append([]func(*edge.Config){func(c *edge.Config) {
		c.PeerToken, c.PartFiles = "secret", n
	}}, opts...)...)
	return ts, dir
}

// partFileNode starts a node holding recs as version 1 of db d (4
// partitions), stored uncompressed (files as large as the records: a
// copy lasts); it returns the node and the version's directory.
func partFileNode(t testing.TB, recs []nodetest.Record) (*node.Node, string) {
	t.Helper()
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "1", 4, recs)
	cfg := node.DefaultConfig()
	cfg.Source, cfg.DataDir = root, t.TempDir()
	cfg.RequireSuccessFile = true
	cfg.Compression = "none"
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	return n, filepath.Join(cfg.DataDir, "dbs", "d", "1")
}

// TestPartFile: a peer with the token gets a held partition's file,
// whole or from an offset (Range: a copy resumes), with the manifest's
// checksum, which its bytes match; the manifest; 404 for what is not
// held; 403 without the token.
func TestPartFile(t *testing.T) {
	ts, dir := startPartFileNode(t)
	const tok = "X-Spangle-Peer-Token"
	if resp := ts.do(t, "GET", "/d/?partfile=2&version=1"); resp.status != http.StatusForbidden {
		t.Fatalf("without the token: %d", resp.status)
	}
	resp := ts.do(t, "GET", "/d/?partfile=manifest&version=1", tok, "secret")
	var m blocks.Manifest
	if resp.status != 200 || json.Unmarshal([]byte(resp.body), &m) != nil || len(m.PartitionInfo) != 4 {
		t.Fatalf("manifest: %d %q", resp.status, resp.body)
	}
	want, err := os.ReadFile(filepath.Join(dir, "p-00002.bolt"))
	if err != nil {
		t.Fatal(err)
	}
	resp = ts.do(t, "GET", "/d/?partfile=2&version=1", tok, "secret")
	if resp.status != 200 || resp.body != string(want) {
		t.Fatalf("file: %d, %d bytes, want %d", resp.status, len(resp.body), len(want))
	}
	sum := resp.header.Get("X-Spangle-File-Checksum")
	if sum != m.PartitionInfo[2].FileChecksum {
		t.Fatalf("checksum header %q, manifest %q", sum, m.PartitionInfo[2].FileChecksum)
	}
	fs, err := blocks.NewFileSum(sum)
	if err != nil {
		t.Fatal(err)
	}
	fs.Write([]byte(resp.body))
	if err := fs.Check(); err != nil {
		t.Fatal(err)
	}
	off := len(want) / 3
	resp = ts.do(t, "GET", "/d/?partfile=2&version=1", tok, "secret", "Range", fmt.Sprintf("bytes=%d-", off))
	if resp.status != http.StatusPartialContent || resp.body != string(want[off:]) {
		t.Fatalf("from %d: %d, %d bytes, want %d", off, resp.status, len(resp.body), len(want)-off)
	}
	for _, q := range []string{"partfile=2&version=9", "partfile=7&version=1"} {
		if resp := ts.do(t, "GET", "/d/?"+q, tok, "secret"); resp.status != http.StatusNotFound {
			t.Errorf("%s: %d %q", q, resp.status, resp.body)
		}
	}
	for _, q := range []string{"partfile=x&version=1", "partfile=-1&version=1", "partfile=1"} {
		if resp := ts.do(t, "GET", "/d/?"+q, tok, "secret"); resp.status != http.StatusBadRequest {
			t.Errorf("%s: %d %q", q, resp.status, resp.body)
		}
	}
}

// TestPartFileLimits: with peer_copy_concurrency 1, a second copy while
// one is being sent (at the floor of peer_copy_bandwidth, slower than the
// file) is 503 with Retry-After; once the first is done, it is served.
func TestPartFileLimits(t *testing.T) {
	ts, _ := startPartFileNode(t, func(c *edge.Config) {
		c.PeerCopyConcurrency = 1
		c.PeerCopyBandwidth = 64 << 10
	})
	req, _ := http.NewRequest("GET", ts.url+"/d/?partfile=1&version=1", nil)
	req.Header.Set("X-Spangle-Peer-Token", "secret")
	first, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if first.StatusCode != 200 || first.ContentLength <= 2*64<<10 {
		t.Fatalf("first copy: %d, %d bytes (want more than two seconds' worth)", first.StatusCode, first.ContentLength)
	}
	resp := ts.do(t, "GET", "/d/?partfile=0&version=1", "X-Spangle-Peer-Token", "secret")
	if resp.status != http.StatusServiceUnavailable || resp.header.Get("Retry-After") == "" {
		t.Fatalf("second copy during the first: %d %v", resp.status, resp.header)
	}
	first.Body.Close()
	checkFor(t, 10*time.Second, "the slot freed", func() bool {
		return ts.do(t, "HEAD", "/d/?partfile=0&version=1", "X-Spangle-Peer-Token", "secret").status == 200
	})
}

// TestPartFileRate: peer_copy_bandwidth bounds what a sender sends, its
// burst included: two files at 256 KiB/s take at least their bytes less
// one burst (1/64 s of the bandwidth, at least a 64 KiB chunk) over the
// bandwidth. A burst as large as the bandwidth (a second's worth) would
// send them in half that.
func TestPartFileRate(t *testing.T) {
	const bandwidth = 256 << 10
	ts, _ := startPartFileNode(t, func(c *edge.Config) { c.PeerCopyBandwidth = bandwidth })
	start := time.Now()
	var n int
	for _, p := range []string{"0", "1"} {
		resp := ts.do(t, "GET", "/d/?partfile="+p+"&version=1", "X-Spangle-Peer-Token", "secret")
		if resp.status != http.StatusOK {
			t.Fatalf("partition %s: %d", p, resp.status)
		}
		n += len(resp.body)
	}
	min := time.Duration(float64(n-64<<10) / bandwidth * float64(time.Second))
	if took := time.Since(start); took < min || n < bandwidth {
		t.Fatalf("%d bytes in %v at %d bytes a second: want at least %v (and at least a second's worth of bytes)", n, took, bandwidth, min)
	}
}
