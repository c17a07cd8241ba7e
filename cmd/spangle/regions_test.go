package main

import (
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

// regionsVersionBytes sizes the versions TestRegions publishes (random
// values beside the keys it reads). docs/REGIONS.md's figures come from a run
// with -args -regions.version-bytes=33554432.
var regionsVersionBytes = flag.Int("regions.version-bytes", 1<<20, "bytes of random values in each version TestRegions publishes")

// hubProc is the hub: a nats-server process with JetStream in domain
// "hub", a leafnode listener that advertises no other URL (so that a leaf
// reaches it only through its relay) and a monitoring port for /leafz.
type hubProc struct {
	*natsProc
	leafAddr, monitor string
}

// startHub starts the hub. Leafnode compression is off, so that /leafz
// counts the bytes of the data itself.
func startHub(t *testing.T, bin string) *hubProc {
	t.Helper()
	dir := t.TempDir()
	port, leaf, mon := natstest.FreePort(t), natstest.FreePort(t), natstest.FreePort(t)
	conf := fmt.Sprintf(`server_name: hub
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream { domain: hub, store_dir: %q }
leafnodes { listen: "127.0.0.1:%d", no_advertise: true, compression: off }
`, port, mon, filepath.Join(dir, "store"), leaf)
	h := &hubProc{
		natsProc: &natsProc{name: "hub", url: fmt.Sprintf("nats://127.0.0.1:%d", port),
			storeDir: filepath.Join(dir, "store"), logPath: filepath.Join(dir, "nats.log")},
		leafAddr: fmt.Sprintf("127.0.0.1:%d", leaf),
		monitor:  fmt.Sprintf("http://127.0.0.1:%d", mon),
	}
	h.args = []string{"-c", writeFile(t, dir, "hub.conf", conf)}
	h.start(t, bin)
	h.cleanup(t)
	return h
}

// startRegionServer starts a region's own nats-server (deployment (b)):
// JetStream domain name, a leafnode of the hub at leafURL with the deny
// lists spangle's embedded server uses (region.Deny).
func startRegionServer(t *testing.T, bin, name, leafURL string) *natsProc {
	t.Helper()
	dir := t.TempDir()
	port := natstest.FreePort(t)
	conf := fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:%d"
jetstream { domain: %s, store_dir: %q }
leafnodes {
  remotes: [ { url: %q, deny_imports: ["spangle.>", "$KV.>"], deny_exports: ["spangle.>", "$KV.>"] } ]
}
`, name, port, name, filepath.Join(dir, "store"), leafURL)
	p := &natsProc{name: name, url: fmt.Sprintf("nats://127.0.0.1:%d", port),
		storeDir: filepath.Join(dir, "store"), logPath: filepath.Join(dir, "nats.log")}
	p.args = []string{"-c", writeFile(t, dir, name+".conf", conf)}
	p.start(t, bin)
	p.cleanup(t)
	return p
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitMirror waits as waitFor does, for what depends on a region's
// mirror of the hub filling, up to natstest.MirrorWait (nats-server
// retries a mirror's failed consumer request after 10 s, then 20 s).
func waitMirror(t *testing.T, what string, cond func() error) {
	t.Helper()
	nodetest.WaitFor(t, natstest.MirrorWait, what, cond)
}

// startRegionNode starts "spangle serve" in a region with the given
// configuration file body, reading nats-object://<bucket>.
func startRegionNode(t *testing.T, bin string, id int, bucket, config string) *clusterProc {
	t.Helper()
	dir := t.TempDir()
	p := &clusterProc{id: id, bin: bin, cfgPath: writeFile(t, dir, "spangle.toml", config)}
	p.logOnFailure(t)
	p.args = []string{"serve", "--config", p.cfgPath, "--source", "nats-object://" + bucket,
		"--data-dir", filepath.Join(dir, "data"), "--bind", "127.0.0.1:0", "--log-format", "json"}
	p.start(t)
	return p
}

// leafBytes returns the bytes the hub sent to each leafnode connection
// (by the leaf's server name) since that connection began.
func leafBytes(monitor string) (map[string]int64, error) {
	resp, err := http.Get(monitor + "/leafz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var lz struct {
		Leafs []struct {
			Name     string `json:"name"`
			OutBytes int64  `json:"out_bytes"`
		} `json:"leafs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&lz); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range lz.Leafs {
		out[l.Name] += l.OutBytes
	}
	return out, nil
}

// writePaddedVersion writes version v of db d in three files: keys
// records key-<i> → <v>:<i> (readAll's) and pad bytes of random values
// under pad-<j> keys, so that a version's size, not the protocol's
// overhead, dominates the bytes sent for it.
func writePaddedVersion(t *testing.T, root, v string, keys, pad int) {
	t.Helper()
	recs := nodetest.Numbered(v, keys)
	for j := 0; pad > 0; j++ {
		val := make([]byte, min(pad, 16<<10))
		rand.Read(val)
		recs = append(recs, nodetest.Record{Key: fmt.Appendf(nil, "pad-%d", j), Value: val})
		pad -= len(val)
	}
	nodetest.WriteVersion(t, root, "d", v, 3, recs)
}

// dirBytes sums the sizes of the files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// regionBNode is the configuration of node id of region rb, deployment
// (b): the region's own NATS server at url, sharding with replication 1.
func regionBNode(id int, url string) string {
	return fmt.Sprintf(`require_success_file = true
shard_id = "%d"
[nats]
url = %q
entry_ttl = "2s"
[region]
name = "rb"
hub_check_interval = "1s"
[sharding]
enabled = true
replication = 1
time_to_converge = "1s"
heal_after = "1s"
`, id, url)
}

// proxiedKeys reads key-0 … key-(keys-1) from base, wanting version's
// values, and counts the answers proxied to a peer.
func proxiedKeys(base, version string, keys int) (int, error) {
	n := 0
	for k := range keys {
		val, ver, proxied, err := clusterGet(http.DefaultClient, base, k)
		if err != nil {
			return 0, err
		}
		if want := fmt.Sprintf("%s:%d", version, k); ver != version || val != want {
			return 0, fmt.Errorf("key-%d: %q from version %q, want %q", k, val, ver, want)
		}
		if proxied {
			n++
		}
	}
	return n, nil
}

// TestRegions runs one hub and two regions as real processes, each
// region's leafnode link through a relay the test cuts:
//
//   - region ra, deployment (a): one "spangle serve" whose embedded NATS
//     server is the region's (domain ra) and a leafnode of the hub;
//   - region rb, deployment (b): its own nats-server (domain rb), a leaf
//     of the hub, and two nodes with replication 1, so that lookups are
//     proxied inside the region.
//
// Versions are published at the hub only.
//
//  1. v1, published before the regions start, is served by every node;
//  2. v2: every node serves it; the hub sent each region at most 1.2x
//     the version's bytes (one copy per region, not per node);
//  3. ra cut off: v3 reaches rb only; ra serves v2, every key, also
//     after its node restarts while cut off (and says the hub does not
//     answer); restored, ra serves v3 without a restart;
//  4. the link of ra flaps: ra serves on and builds nothing;
//  5. rb cut off and one of its nodes killed: the other heals inside the
//     region and serves every key itself;
//  6. spangle rollback --region rb at the hub: rb goes back, ra does not;
//     spangle status --regions, naming no region, finds both (their
//     nodes announce them at the hub); a pin for all at the hub does not
//     move rb off its region pin;
//  7. region rb stopped whole: nothing changes in ra, and the hub's
//     status shows rb gone.
func TestRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	const keys, bucket = 40, "regdata"
	bin, natsBin := buildBinary(t), buildNATSServer(t)
	hub := startHub(t, natsBin)
	relayA, relayB := startRelay(t, hub.leafAddr), startRelay(t, hub.leafAddr)
	rbServer := startRegionServer(t, natsBin, "rb", "nats-leaf://"+relayB.addr())
	src := t.TempDir()
	for _, v := range []string{"v1", "v2", "v3"} {
		writePaddedVersion(t, src, v, keys, *regionsVersionBytes)
	}
	publish := publisher(t, bin, src, "nats-object://"+bucket, hub.url)

	// 1. v1 everywhere.
	waitFor(t, "publish v1 at the hub", func() error { return publish("v1") })
	a := startRegionNode(t, bin, 1, bucket, fmt.Sprintf(`require_success_file = true
[nats]
listen = "127.0.0.1:0"
server_name = "ra"
[region]
name = "ra"
hub = "nats-leaf://%s"
hub_check_interval = "1s"
`, relayA.addr()))
	b1 := startRegionNode(t, bin, 1, bucket, regionBNode(1, rbServer.url))
	b2 := startRegionNode(t, bin, 2, bucket, regionBNode(2, rbServer.url))
	all := []*clusterProc{a, b1, b2}
	regionOf := map[*clusterProc]string{a: "ra", b1: "rb", b2: "rb"}
	for _, n := range all {
		waitMirror(t, regionOf[n]+" serves v1", func() error { return readAll(n.base, "v1", keys) })
	}
	for _, n := range []*clusterProc{b1, b2} {
		if p, err := proxiedKeys(n.base, "v1", keys); err != nil || p == 0 || p == keys {
			t.Errorf("rb node %d: %d of %d keys proxied (%v): want some, inside the region", n.id, p, keys, err)
		}
	}

	// 2. v2: bytes per region, publish → serving.
	before, err := leafBytes(hub.monitor)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := publish("v2"); err != nil {
		t.Fatal(err)
	}
	published := time.Now()
	servingAfter := map[string]time.Duration{}
	for _, n := range all {
		waitMirror(t, regionOf[n]+" serves v2", func() error { return readAll(n.base, "v2", keys) })
		servingAfter[regionOf[n]] = time.Since(published)
	}
	after, err := leafBytes(hub.monitor)
	if err != nil {
		t.Fatal(err)
	}
	size := dirBytes(t, filepath.Join(src, "d", "v2"))
	for _, r := range []string{"ra", "rb"} {
		sent := after[r] - before[r]
		t.Logf("v2 (%d bytes, published in %v): region %s serves it %v later; the hub sent it %d bytes (%.3fx)",
			size, published.Sub(start).Round(time.Millisecond), r, servingAfter[r].Round(time.Millisecond), sent, float64(sent)/float64(size))
		if float64(sent) > 1.2*float64(size) {
			t.Errorf("%d bytes sent to region %s for a version of %d bytes: over 1.2x", sent, r, size)
		}
	}

	// 3. ra cut off.
	relayA.setCut(true)
	if err := publish("v3"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*clusterProc{b1, b2} {
		waitMirror(t, "rb serves v3", func() error { return readAll(n.base, "v3", keys) })
	}
	if err := readAll(a.base, "v2", keys); err != nil {
		t.Fatalf("ra cut off: %v", err)
	}
	a.kill(t)
	a.start(t)
	if err := readAll(a.base, "v2", keys); err != nil {
		t.Fatalf("ra restarted while cut off: %v", err)
	}
	waitFor(t, "ra to say the hub does not answer", func() error {
		if !strings.Contains(a.log(), "the leafnode link to the hub") {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
	relayA.setCut(false)
	restored := time.Now()
	waitMirror(t, "ra serves v3 once restored", func() error { return readAll(a.base, "v3", keys) })
	t.Logf("ra serves v3 %v after its link is back", time.Since(restored).Round(time.Millisecond))

	// 4. Flapping: serving goes on, nothing is built again.
	builds := strings.Count(a.log(), `"msg":"building version"`)
	for range 3 {
		relayA.setCut(true)
		if err := readAll(a.base, "v3", keys); err != nil {
			t.Fatalf("ra, link down: %v", err)
		}
		relayA.setCut(false)
		waitFor(t, "ra's leafnode back", func() error {
			lb, err := leafBytes(hub.monitor)
			if err != nil {
				return err
			}
			if _, ok := lb["ra"]; !ok {
				return fmt.Errorf("no leafnode ra at the hub")
			}
			return nil
		})
		if err := readAll(a.base, "v3", keys); err != nil {
			t.Fatalf("ra, link back: %v", err)
		}
	}
	if n := strings.Count(a.log(), `"msg":"building version"`); n != builds {
		t.Errorf("ra built %d versions while its link flapped", n-builds)
	}

	// 5. rb cut off, and one of its nodes killed: the other heals inside
	// the region (it loads the lost partitions from the region's mirror)
	// and serves every key; the link back, the node restarted.
	relayB.setCut(true)
	b2.kill(t)
	// (Until it has healed, answers of the dead node may still come from
	// the proxy's hot cache; healed, the node answers every key itself.)
	waitMirror(t, "rb1 healed while cut off", func() error {
		p, err := proxiedKeys(b1.base, "v3", keys)
		if err == nil && p > 0 {
			err = fmt.Errorf("%d keys proxied", p)
		}
		return err
	})
	relayB.setCut(false)
	b2.start(t)
	waitMirror(t, "rb2 back", func() error { return readAll(b2.base, "v3", keys) })

	// 6. A region-targeted rollback at the hub: rb goes back to v2, ra
	// stays at v3; the hub's status shows both.
	code, rolled, stderr := runCLI(t, bin, "rollback", "--region", "rb", "--nats", hub.url, "d", "v2")
	if code != 0 {
		t.Fatalf("rollback --region rb: exit %d: %s", code, stderr)
	}
	for _, n := range []*clusterProc{b1, b2} {
		waitMirror(t, "rb back at v2", func() error { return readAll(n.base, "v2", keys) })
	}
	if err := readAll(a.base, "v3", keys); err != nil {
		t.Fatalf("ra after rb's rollback: %v", err)
	}
	waitFor(t, "status --regions", func() error {
		st, err := regionsStatusJSON(t, bin, hub.url)
		if err != nil {
			return err
		}
		ra, rb := st["ra"], st["rb"]
		switch {
		case !ra.Connected || !ra.Reachable || len(ra.Nodes) != 1 || fmt.Sprint(ra.Active["d"]) != "[v3]":
			return fmt.Errorf("ra: %+v", ra)
		case !rb.Connected || !rb.Reachable || len(rb.Nodes) != 2 || fmt.Sprint(rb.Active["d"]) != "[v2]" || rb.Pins["d"].Version != "v2":
			return fmt.Errorf("rb: %+v", rb)
		}
		return nil
	})

	// A pin for all, at the hub: the command returns at once (the hub has
	// no nodes to wait for); rb keeps its region pin, which wins.
	code, stdout, stderr := runCLI(t, bin, "activate", "--nats", hub.url, "--timeout", "5s", "d", "v3")
	if code != 0 || !strings.Contains(stdout, "a hub of regions") {
		t.Fatalf("activate at the hub: exit %d: %s%s", code, stdout, stderr)
	}
	for _, n := range []*clusterProc{b1, b2} {
		if err := readAll(n.base, "v2", keys); err != nil {
			t.Fatalf("rb under its region pin and a pin for all: %v", err)
		}
	}

	// 7. Region rb stopped whole: ra serves on; the hub's status says rb
	// is gone (its region pin names it).
	b1.kill(t)
	b2.kill(t)
	rbServer.stop(t)
	if err := readAll(a.base, "v3", keys); err != nil {
		t.Fatalf("ra, rb stopped: %v", err)
	}
	waitFor(t, "status --regions without rb", func() error {
		st, err := regionsStatusJSON(t, bin, hub.url)
		if err != nil {
			return err
		}
		if ra, rb := st["ra"], st["rb"]; !ra.Connected || rb.Connected || rb.Reachable {
			return fmt.Errorf("ra %+v, rb %+v", ra, rb)
		}
		return nil
	})
	if err := readAll(a.base, "v3", keys); err != nil {
		t.Fatalf("ra, rb stopped: %v", err)
	}

	// 8. The hint the regional rollback printed works when pasted: it
	// names the hub (issue 33 item 3: it dropped --nats and --cluster,
	// and unpinned nothing); a region never pinned has nothing to unpin.
	hint := regexp.MustCompile("`(spangle activate [^`]*)`").FindStringSubmatch(rolled)
	if hint == nil || !strings.Contains(hint[1], "--nats "+hub.url) || !strings.Contains(hint[1], "--region rb") {
		t.Fatalf("rollback --region rb: no hint naming the hub and the region:\n%s", rolled)
	}
	if out, err := exec.Command("sh", "-c", strings.Replace(hint[1], "spangle", bin, 1)).CombinedOutput(); err != nil || !strings.Contains(string(out), "unpinned in region rb") {
		t.Fatalf("the hint %q: %v\n%s", hint[1], err, out)
	}
	for _, region := range []string{"rb", "nowhere"} {
		if code, stdout, stderr := runCLI(t, bin, "activate", "--latest", "--region", region, "--nats", hub.url, "d"); code != 1 || !strings.Contains(stderr, "nothing to unpin") {
			t.Errorf("activate --latest --region %s once unpinned: exit %d, %s%s", region, code, stdout, stderr)
		}
	}
}

// regionStatusJSON is a region in the JSON of spangle status --regions.
type regionStatusJSON struct {
	Connected, Reachable bool
	Nodes                []struct{ ID string }
	Active               map[string][]string
	Pins                 map[string]struct{ Version string }
}

// regionsStatusJSON runs spangle status --regions --json at the hub,
// naming no region: it lists those announced and those pinned.
func regionsStatusJSON(t *testing.T, bin, hub string) (map[string]regionStatusJSON, error) {
	code, stdout, stderr := runCLI(t, bin, "status", "--regions", "--json", "--timeout", "3s", "--nats", hub)
	if code != 0 {
		return nil, fmt.Errorf("status --regions: exit %d: %s", code, stderr)
	}
	var rs []struct {
		Region string
		regionStatusJSON
	}
	if err := json.Unmarshal([]byte(stdout), &rs); err != nil {
		return nil, fmt.Errorf("status --regions: %v: %s", err, stdout)
	}
	out := map[string]regionStatusJSON{}
	for _, r := range rs {
		out[r.Region] = r.regionStatusJSON
	}
	return out, nil
}
