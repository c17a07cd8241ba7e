package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestPublishDelta publishes v1 in full with its digest, then v2 and v3
// with --base: each upload carries only the records added, changed and
// deleted, and the node, whose source is the bucket, serves each version
// built over the one before, its digest checked. A base missing from the
// bucket is refused.
func TestPublishDelta(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	s := startServe(t, bin, true, "--source", "nats-object://spangle-data")
	src := t.TempDir()
	const keys = 2000
	set := map[int]string{}
	for i := range keys {
		set[i] = fmt.Sprintf("v1:%d", i)
	}
	write := func(version string) string {
		var recs []nodetest.Record
		for i := range keys + 100 {
			if v, ok := set[i]; ok {
				recs = append(recs, nodetest.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte(v)})
			}
		}
		nodetest.WriteVersion(t, src, "d", version, 4, recs)
		return filepath.Join(src, "d", version)
	}
	publish := func(version string, args ...string) (int, string) {
		t.Helper()
		args = append([]string{"publish", write(version), "--to", "nats-object://spangle-data",
			"--db", "d", "--version", version, "--nats", s.nats}, args...)
		code, _, stderr := runCLI(t, bin, args...)
		return code, stderr
	}
	get := func(key string) (int, string) {
		resp, err := http.Get(s.http + "/d/" + key)
		if err != nil {
			return 0, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	waitValue := func(key, want string) {
		t.Helper()
		waitFor(t, "GET /d/"+key+" = "+want, func() error {
			if code, body := get(key); code != 200 || body != want {
				return fmt.Errorf("%d %q", code, body)
			}
			return nil
		})
	}

	// v1 and v2 keep their index in a cache, where v2 finds its base
	// (and reads its dataset once, without building it); v3 builds its
	// base, v2, from the bucket (v1, then the delta).
	cache := t.TempDir()
	if code, out := publish("v1", "--digest", "--cache", cache); code != 0 {
		t.Fatalf("publish v1: %d\n%s", code, out)
	}
	waitValue("key-7", "v1:7")

	set[7], set[2000] = "v2:7", "v2:new"
	delete(set, 8)
	code, out := publish("v2", "--base", "v1", "--cache", cache)
	if code != 0 || !strings.Contains(out, "base d/v1 read from the cache") {
		t.Fatalf("publish v2: %d\n%s", code, out)
	}
	m := regexp.MustCompile(`delta of d/v2 over v1: 2 records added or changed, 1 deleted: (\d+) bytes, against (\d+) bytes full`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("publish v2 says:\n%s", out)
	}
	delta, _ := strconv.Atoi(m[1])
	full, _ := strconv.Atoi(m[2])
	if delta*10 > full {
		t.Errorf("delta of %d bytes against %d full", delta, full)
	}
	if !strings.Contains(out, "published d/v2") || !strings.Contains(out, "publishing d/v2: 4 files") { // part-00000, _BASE, _DELETES, _DIGEST
		t.Errorf("publish v2 says:\n%s", out)
	}
	if !strings.Contains(out, "(its index: the dataset read once, not built)") {
		t.Errorf("publish v2 built its dataset:\n%s", out)
	}
	if vs, _ := os.ReadDir(filepath.Join(cache, "dbs", "d")); len(vs) != 0 {
		t.Errorf("the cache holds built versions %v, want none (the index alone)", vs)
	}
	if b, err := os.ReadFile(deltaIndexPath(cache, "d")); err != nil || !bytes.Contains(b, []byte(`"version":"v2"`)) {
		t.Errorf("the cache's index of d: %.100q (%v), want v2's", b, err)
	}
	waitValue("key-2000", "v2:new")
	waitValue("key-7", "v2:7")
	waitValue("key-9", "v1:9")
	if code, _ := get("key-8"); code != 404 {
		t.Errorf("deleted key-8: %d", code)
	}

	// v3 over v2, itself a delta: the publisher builds v2 from the
	// bucket's chain.
	set[9] = "v3:9"
	if code, out := publish("v3", "--base", "v2"); code != 0 || !strings.Contains(out, "1 records added or changed, 0 deleted") {
		t.Fatalf("publish v3: %d\n%s", code, out)
	}
	waitValue("key-9", "v3:9")
	waitValue("key-2000", "v2:new")

	if code, out := publish("v4", "--base", "v0"); code == 0 || !strings.Contains(out, "base v0 refused") {
		t.Errorf("a missing base: exit %d\n%s", code, out)
	}
	// v1 is the base of v2: deleting it would leave a hole in the chain.
	if code, _, stderr := runCLI(t, bin, "publish", "--delete", "--to", "nats-object://spangle-data", "--nats", s.nats, "d", "v1"); code == 0 ||
		!strings.Contains(stderr, "d/v1 is the base of v2") {
		t.Errorf("delete a base: exit %d: %s", code, stderr)
	}
	metrics := getBody(t, http.DefaultClient, s.http+"/metrics")
	if ok := metricValue(metrics, `spangle_digest_checks_total{db="d",result="ok"}`); ok != 3 {
		t.Errorf("digest checks ok: %v, want 3\n%s", ok, grepLines(metrics, "spangle_digest"))
	}
	s.stop(t)
}

// TestDigestCommand writes a directory's _DIGEST with spangle digest.
func TestDigestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	src := t.TempDir()
	writeVersion(t, src, "d", "v1", 3, 500)
	dir := filepath.Join(src, "d", "v1")
	code, stdout, stderr := runCLI(t, bin, "digest", dir, "--partitioner", "murmur3")
	if code != 0 || !strings.Contains(stdout, "3 partitions, ms2:500:") {
		t.Fatalf("digest: exit %d\n%s%s", code, stdout, stderr)
	}
	f, err := os.Open(filepath.Join(dir, blocks.DigestFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vd, err := blocks.ReadVersionDigest(f)
	if err != nil || vd.Partitioner != "murmur3" || vd.NumPartitions != 3 {
		t.Fatalf("%+v, %v", vd, err)
	}
}

// TestDeltaCommand: a batch job keeping its last output writes the delta
// between it and the new one with spangle delta into a directory
// source; the node builds it over the version it serves.
func TestDeltaCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	root, work := t.TempDir(), t.TempDir()
	recs := nodetest.Numbered("v1", 300)
	nodetest.WriteVersion(t, root, "d", "v1", 3, recs)
	s := startServe(t, bin, false, "--source", root)
	get := func(key string) (int, string) {
		resp, err := http.Get(s.http + "/d/" + key)
		if err != nil {
			return 0, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	waitFor(t, "v1", func() error {
		if code, body := get("key-5"); code != 200 || body != "v1:5" {
			return fmt.Errorf("%d %q", code, body)
		}
		return nil
	})
	recs[5].Value = []byte("v2:5")
	recs = append(recs[:9], recs[10:]...) // key-9 deleted
	nodetest.WriteVersion(t, work, "d", "v2", 3, recs)
	out := filepath.Join(work, "delta")
	code, _, stderr := runCLI(t, bin, "delta", filepath.Join(work, "d", "v2"), filepath.Join(root, "d", "v1"), "--base-name", "v1", "--out", out)
	if code != 0 || !strings.Contains(stderr, "1 records added or changed, 1 deleted") {
		t.Fatalf("delta: exit %d\n%s", code, stderr)
	}
	if err := os.Rename(out, filepath.Join(root, "d", "v2")); err != nil { // complete at once
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v2", func() error {
		if code, body := get("key-5"); code != 200 || body != "v2:5" {
			return fmt.Errorf("%d %q", code, body)
		}
		return nil
	})
	if code, _ := get("key-9"); code != 404 {
		t.Errorf("deleted key-9: %d", code)
	}
	if code, body := get("key-6"); code != 200 || body != "v1:6" {
		t.Errorf("key-6: %d %q", code, body)
	}
	s.stop(t)
}
