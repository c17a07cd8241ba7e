package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node"
)

// chromium returns the path of a headless-capable Chromium, or skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium: apt-get install chromium (make test-browser installs it)")
	return ""
}

// headless runs Chromium headless on url with extra flags (--dump-dom,
// --screenshot=FILE) and returns its stdout.
func headless(t *testing.T, browser, url string, flags ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	args := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--hide-scrollbars", "--window-size=1400,1100", "--user-data-dir=" + t.TempDir()}, flags...)
	cmd := exec.CommandContext(ctx, browser, append(args, url)...)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", browser, strings.Join(flags, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// TestDashboardBrowser renders the dashboard of a three-node cluster in a
// real headless Chromium while a version builds (its reads throttled by
// max_download_bandwidth), beside an active version and a db whose only
// version is corrupt: the page shows every node, both dbs, the ACTIVE,
// BUILDING and ERROR states, the build's progress bar and the error. It
// takes a screenshot; SPANGLE_UPDATE_SCREENSHOT=1 writes it to
// docs/dashboard.png. Build once is off: every node builds its own
// partitions, so node 1's page shows its own build and its own failure
// (with build once one node builds v2 and another may wait for the
// corrupt version's builder, and no page need show both).
func TestDashboardBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries and a browser")
	}
	browser := chromium(t)
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 6, 60)
	bad := filepath.Join(root, "broken", "v1")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"part-00000": "not a SequenceFile", "_SUCCESS": ""} {
		if err := os.WriteFile(filepath.Join(bad, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := buildBinary(t)
	natsPort := natstest.FreePort(t)
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		nats := fmt.Sprintf("listen = \"127.0.0.1:%d\"", natsPort)
		if id > 1 {
			nats = fmt.Sprintf("url = \"nats://127.0.0.1:%d\"", natsPort)
		}
		dir := t.TempDir()
		p := &clusterProc{id: id, bin: bin, cfgPath: filepath.Join(dir, "spangle.toml")}
		p.logOnFailure(t)
		config := fmt.Sprintf(`require_success_file = true
shard_id = "%d"
max_download_bandwidth = "384KiB"
[nats]
%s
cluster_name = "dash"
[sharding]
enabled = true
replication = 2
time_to_converge = "1s"
[cluster]
build_once = false
`, id, nats)
		if err := os.WriteFile(p.cfgPath, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		p.args = []string{"serve", "--config", p.cfgPath, "--source", root,
			"--data-dir", filepath.Join(dir, "data"), "--bind", "127.0.0.1:0", "--log-format", "json"}
		p.start(t)
		nodes = append(nodes, p)
	}
	client := &http.Client{Timeout: testTimeout}
	status := func(n *clusterProc) (node.Status, error) {
		var st node.Status
		req, _ := http.NewRequest("GET", n.base+"/", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return st, err
		}
		defer resp.Body.Close()
		return st, json.NewDecoder(resp.Body).Decode(&st)
	}
	waitFor(t, "v1 of d readable from every node", func() error {
		_, err := allKeys(client, nodes, 60, "v1")
		return err
	})

	// v2: ~2 MB that every node reads at 384 KiB/s: a few seconds of build.
	writeVersion(t, root, "d", "v2", 8, 40000)
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	var st node.Status
	waitFor(t, "v2 building with progress on node 1, broken in ERROR", func() (err error) {
		if st, err = status(nodes[0]); err != nil {
			return err
		}
		v2, ok := st.DBs["d"].Versions["v2"]
		if !ok || v2.Build == nil || v2.Build.Percent <= 0 || v2.Build.Percent >= 100 {
			return fmt.Errorf("names v2: %+v", v2)
		}
		building := false
		for _, nv := range v2.Nodes {
			building = building || nv.State == "BUILDING"
		}
		if !building {
			return errors.New("no node BUILDING v2")
		}
		for _, nv := range st.DBs["broken"].Versions["v1"].Nodes {
			if nv.State == "ERROR" && nv.Error != "" {
				return nil
			}
		}
		return fmt.Errorf("broken v1: %+v", st.DBs["broken"])
	})

	shot := filepath.Join(t.TempDir(), "dashboard.png")
	headless(t, browser, nodes[0].base+"/", "--screenshot="+shot)
	dom := string(headless(t, browser, nodes[0].base+"/", "--dump-dom"))

	// Timestamps in spans that do not wrap, durations at a sane
	// precision (issue 29: "took 0.036788604s", timestamps broken
	// mid-token).
	if regexp.MustCompile(`took \d+\.\d{4,}s`).MatchString(dom) {
		t.Errorf("the dashboard shows a duration at full precision")
	}
	for _, want := range []string{`href="/d/"`, `href="/broken/"`, "v1", "v2", "ACTIVE", "BUILDING", "ERROR", "<progress", "records", `<span class="ts">`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered dashboard lacks %q", want)
		}
	}
	for name := range st.DBs["d"].Versions["v1"].Nodes {
		if !strings.Contains(dom, name) {
			t.Errorf("rendered dashboard lacks node %q", name)
		}
	}
	if n := len(st.DBs["d"].Versions["v1"].Nodes); n != 3 {
		t.Errorf("names v1 lists %d nodes, want 3", n)
	}
	for _, nv := range st.DBs["broken"].Versions["v1"].Nodes {
		if nv.Error != "" && !strings.Contains(dom, templateEscape(nv.Error)) {
			t.Errorf("rendered dashboard lacks the error %q", nv.Error)
		}
	}

	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 1100 {
		t.Errorf("screenshot is %v, want 1400x1100", b)
	}
	if os.Getenv("SPANGLE_UPDATE_SCREENSHOT") != "" {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "dashboard.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// templateEscape escapes s as the DOM Chromium dumps writes text: it
// serialises a text node with &, < and > escaped, and quotes as they are
// (html/template's &#34; and &#39; are decoded when the page is parsed).
func templateEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
