package main

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/spangledb/spangle/node/nodetest"
)

// TestRegionDeltas: a region's node, reading the hub's Object Store
// through its mirror, builds versions published as deltas, and only the
// deltas cross to the region: v2, a delta over v1 changing a few keys,
// costs the link a small part of v1's bytes. Cut off from the hub
// through v3 and v4 (each a delta over the one before), the region
// catches up through the chain once its link is back, again with only
// the deltas crossing, each version checked against its _DIGEST.
func TestRegionDeltas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	const keys, bucket = 40, "deltadata"
	bin, natsBin := buildBinary(t), buildNATSServer(t)
	hub := startHub(t, natsBin)
	relay := startRelay(t, hub.leafAddr)
	src := t.TempDir()

	// The datasets: key-i and 1 MiB of random values that no version
	// changes.
	vals := map[string]string{}
	for i := range keys {
		vals[fmt.Sprint("key-", i)] = fmt.Sprintf("v1:%d", i)
	}
	var pad []nodetest.Record
	for j := range 64 {
		v := make([]byte, 16<<10)
		rand.Read(v)
		pad = append(pad, nodetest.Record{Key: fmt.Appendf(nil, "pad-%d", j), Value: v})
	}
	write := func(version string) {
		recs := append([]nodetest.Record(nil), pad...)
		for i := range keys {
			if v, ok := vals[fmt.Sprint("key-", i)]; ok {
				recs = append(recs, nodetest.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte(v)})
			}
		}
		nodetest.WriteVersion(t, src, "d", version, 3, recs)
	}
	publish := func(version string, extra ...string) {
		t.Helper()
		write(version)
		if err := publisher(t, bin, src, "nats-object://"+bucket, hub.url, extra...)(version); err != nil {
			t.Fatal(err)
		}
	}
	a := startRegionNode(t, bin, 1, bucket, fmt.Sprintf(`require_success_file = true
[nats]
listen = "127.0.0.1:0"
server_name = "ra"
[region]
name = "ra"
hub = "nats-leaf://%s"
hub_check_interval = "1s"
`, relay.addr()))
	serves := func(want map[string]string) func() error {
		return func() error {
			for k, v := range want {
				resp, err := http.Get(a.base + "/d/" + k)
				if err != nil {
					return err
				}
				body := make([]byte, 64)
				n, _ := resp.Body.Read(body)
				resp.Body.Close()
				switch {
				case v == "" && resp.StatusCode != http.StatusNotFound:
					return fmt.Errorf("%s: %d, want 404", k, resp.StatusCode)
				case v != "" && (resp.StatusCode != 200 || string(body[:n]) != v):
					return fmt.Errorf("%s: %d %q, want %q", k, resp.StatusCode, body[:n], v)
				}
			}
			return nil
		}
	}

	publish("v1")
	waitMirror(t, "ra serves v1", serves(map[string]string{"key-0": "v1:0", "key-1": "v1:1"}))
	full := dirBytes(t, filepath.Join(src, "d", "v1"))

	before, err := leafBytes(hub.monitor)
	if err != nil {
		t.Fatal(err)
	}
	vals["key-0"] = "v2:0"
	delete(vals, "key-1")
	publish("v2", "--base", "v1")
	waitMirror(t, "ra serves v2", serves(map[string]string{"key-0": "v2:0", "key-1": "", "key-2": "v1:2"}))
	after, err := leafBytes(hub.monitor)
	if err != nil {
		t.Fatal(err)
	}
	sent := after["ra"] - before["ra"]
	t.Logf("v2, a delta over v1 (%d bytes): the hub sent region ra %d bytes (%.3fx)", full, sent, float64(sent)/float64(full))
	if float64(sent) > 0.1*float64(full) {
		t.Errorf("%d bytes sent to the region for a delta over a version of %d bytes: over 0.1x", sent, full)
	}

	relay.setCut(true) // closes the leaf connection: leafz counts the next one's bytes afresh
	vals["key-2"] = "v3:2"
	publish("v3", "--base", "v2")
	vals["key-3"] = "v4:3"
	publish("v4", "--base", "v3")
	if err := serves(map[string]string{"key-0": "v2:0"})(); err != nil {
		t.Fatalf("ra cut off: %v", err)
	}
	relay.setCut(false)
	waitMirror(t, "ra serves v4 once restored", serves(map[string]string{
		"key-0": "v2:0", "key-1": "", "key-2": "v3:2", "key-3": "v4:3", "key-4": "v1:4"}))
	after, err = leafBytes(hub.monitor)
	if err != nil {
		t.Fatal(err)
	}
	sent = after["ra"]
	t.Logf("v3 and v4, deltas caught up after the cut: the hub sent region ra %d bytes (%.3fx v1)", sent, float64(sent)/float64(full))
	if float64(sent) > 0.1*float64(full) {
		t.Errorf("%d bytes sent to the region to catch up through two deltas, over 0.1x v1's %d", sent, full)
	}
	// Each delta of the chain was checked against its _DIGEST (v1,
	// published without --digest, has none), v3 whether it went active
	// or was built as v4's base; none failed.
	metrics := getBody(t, http.DefaultClient, a.base+"/metrics")
	if ok, bad := metricValue(metrics, `spangle_digest_checks_total{db="d",result="ok"}`),
		metricValue(metrics, `spangle_digest_checks_total{db="d",result="mismatch"}`); ok < 3 || bad != 0 {
		t.Errorf("the region's digest checks: %v ok, %v mismatches; want v2 to v4 ok\n%s", ok, bad, grepLines(metrics, "spangle_digest"))
	}
	if got := metricValue(metrics, `spangle_delta_builds_total{db="d"}`); got < 3 {
		t.Errorf("the region built %v deltas, want v2, v3 and v4", got)
	}
}
