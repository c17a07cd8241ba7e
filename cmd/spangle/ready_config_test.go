package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestReadyFollowsConfig: spangle ready with no --http, as the image's
// HEALTHCHECK runs it, asks the node its configuration describes: one
// bound elsewhere than 9599 (the URL serve records in its data dir), and
// one serving HTTPS with client certificates required, both from that
// record and, without it, from bind and tls_* alone. Before, it asked
// http://127.0.0.1:9599 whatever the node's configuration, and a node
// started with another --bind or with TLS was unhealthy.
func TestReadyFollowsConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	source, err := filepath.Abs(filepath.Join("..", "..", "examples", "data"))
	if err != nil {
		t.Fatal(err)
	}
	serve := func(config string) (cfgPath, data string) {
		t.Helper()
		dir := t.TempDir()
		data = filepath.Join(dir, "data")
		cfgPath = writeFile(t, dir, "spangle.toml", fmt.Sprintf("source = %q\ndata_dir = %q\n%s", source, data, config))
		p := &clusterProc{bin: bin, cfgPath: cfgPath,
			args: []string{"serve", "--config", cfgPath, "--nats-listen", "127.0.0.1:0", "--log-format", "json"}}
		p.logOnFailure(t)
		p.start(t)
		return cfgPath, data
	}
	waitReady := func(what string, args ...string) {
		t.Helper()
		waitFor(t, what, func() error {
			if code, _, stderr := runCLI(t, bin, append([]string{"ready"}, args...)...); code != 0 {
				return fmt.Errorf("spangle ready %s: exit %d: %s", strings.Join(args, " "), code, stderr)
			}
			return nil
		})
	}

	// Plain HTTP on a port the system chose.
	cfgPath, _ := serve("bind = \"127.0.0.1:0\"\n")
	waitReady("plain HTTP, bound at random", "--config", cfgPath)

	// HTTPS with mutual TLS on a port of the configuration.
	ca := nodetest.NewCA(t)
	cert, key := ca.Issue(t, 2, time.Now().Add(time.Hour))
	dir := t.TempDir()
	pem := map[string][]byte{"cert.pem": cert, "key.pem": key, "ca.pem": ca.PEM}
	for name, b := range pem {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath, data := serve(fmt.Sprintf("bind = \"127.0.0.1:%d\"\n[http]\ntls_cert = %q\ntls_key = %q\ntls_client_ca = %q\n",
		natstest.FreePort(t), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")))
	waitReady("HTTPS from the recorded URL", "--config", cfgPath)
	b, err := os.ReadFile(filepath.Join(data, probeFile))
	if err != nil || !strings.HasPrefix(string(b), "https://127.0.0.1:") {
		t.Fatalf("%s: %q, %v", probeFile, b, err)
	}
	if err := os.Remove(filepath.Join(data, probeFile)); err != nil {
		t.Fatal(err)
	}
	waitReady("HTTPS from bind and tls_*", "--config", cfgPath)
	// A probe file that names another host is refused.
	if err := os.WriteFile(filepath.Join(data, probeFile), []byte("http://example.com:9599\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, bin, "ready", "--config", cfgPath); code == 0 || !strings.Contains(stderr, "loopback") {
		t.Fatalf("a probe file naming another host: exit %d: %s", code, stderr)
	}
}
