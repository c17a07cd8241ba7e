package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestClusterDelta: three nodes (replication 2) serving a directory
// source build v2, a delta over v1 written by spangle delta, each over
// the partitions it holds (no node builds every partition for the others:
// build once is for full versions), check it against its _DIGEST, and
// answer every key of v2 from every node, proxied or not.
func TestClusterDelta(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const keys, files = 60, 6
	root, work := t.TempDir(), t.TempDir()
	recs := nodetest.Numbered("v1", keys)
	nodetest.WriteVersion(t, root, "d", "v1", files, recs)
	bin := buildBinary(t)
	natsPort := natstest.FreePort(t)
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		nodes = append(nodes, startClusterProc(t, bin, root, id, natsPort, 500*time.Millisecond, 10*time.Second, ""))
	}
	client := &http.Client{Timeout: testTimeout}
	get := func(n *clusterProc, key string) (int, string, error) {
		resp, err := client.Get(n.base + "/d/" + key)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	want := map[string]string{}
	for _, r := range recs {
		want[string(r.Key)] = string(r.Value)
	}
	serves := func() error {
		for _, n := range nodes {
			for k, v := range want {
				code, body, err := get(n, k)
				switch {
				case err != nil:
					return err
				case v == "" && code != http.StatusNotFound:
					return fmt.Errorf("node %d: %s: %d, want 404", n.id, k, code)
				case v != "" && (code != 200 || body != v):
					return fmt.Errorf("node %d: %s: %d %q, want %q", n.id, k, code, body, v)
				}
			}
		}
		return nil
	}
	waitFor(t, "v1 from every node", serves)

	recs[3].Value = []byte("v2:3")
	want["key-3"], want["key-4"], want["new"] = "v2:3", "", "v2:new"
	next := append(append([]nodetest.Record{}, recs[:4]...), recs[5:]...)
	next = append(next, nodetest.Record{Key: []byte("new"), Value: []byte("v2:new")})
	nodetest.WriteVersion(t, work, "d", "v2", files, next)
	out := filepath.Join(work, "delta")
	if code, _, stderr := runCLI(t, bin, "delta", filepath.Join(work, "d", "v2"), filepath.Join(root, "d", "v1"), "--base-name", "v1", "--out", out); code != 0 {
		t.Fatalf("delta: exit %d\n%s", code, stderr)
	}
	if err := os.WriteFile(filepath.Join(out, "_SUCCESS"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(out, filepath.Join(root, "d", "v2")); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "v2 from every node", serves)
	deltas := 0.0
	for _, n := range nodes {
		if strings.Count(n.log(), "build once: this node builds every partition") > 1 {
			t.Errorf("node %d built every partition of v2 for the others", n.id)
		}
		// Each node built v2 over its v1, or copied what a peer built
		// (a peer that was faster): checked against _DIGEST either way.
		metrics := getBody(t, client, n.base+"/metrics")
		if ok := metricValue(metrics, `spangle_digest_checks_total{db="d",result="ok"}`); ok < 1 {
			t.Errorf("node %d: no digest checked:\n%s", n.id, grepLines(metrics, "spangle_digest"))
		}
		deltas += metricValue(metrics, `spangle_delta_builds_total{db="d"}`)
	}
	if deltas == 0 {
		t.Error("no node built v2 as a delta")
	}
}
