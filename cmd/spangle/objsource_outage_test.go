package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// startNATSServer starts one nats-server process with JetStream on a
// random loopback port, its store in a temporary directory.
func startNATSServer(t *testing.T, bin string) *natsProc {
	t.Helper()
	dir := t.TempDir()
	port := natstest.FreePort(t)
	p := &natsProc{
		name:     "single",
		url:      fmt.Sprintf("nats://127.0.0.1:%d", port),
		storeDir: filepath.Join(dir, "store"),
		logPath:  filepath.Join(dir, "nats.log"),
	}
	p.args = []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "--server_name", p.name, "-js", "-sd", p.storeDir}
	p.start(t, bin)
	p.cleanup(t)
	return p
}

// TestObjectSourceOutage runs "spangle serve" with its versions in the
// object store of an external nats-server, and stops that server: the node
// keeps serving the version it has (a refresh meanwhile fails, and says
// so), and once the server is back, a version published then is picked up
// from the versions bucket without polling.
func TestObjectSourceOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	const keys = 30
	bin := buildBinary(t)
	ns := startNATSServer(t, buildNATSServer(t))
	const to = "nats-object://outage-data"
	s := startServe(t, bin, false, "--source", to, "--nats", ns.url)
	s.logOnFailure(t)
	src := t.TempDir()
	writeVersion(t, src, "d", "v1", 3, keys)
	writeVersion(t, src, "d", "v2", 3, keys)
	publish := publisher(t, bin, src, to, ns.url)
	allKeys := func(version string) error { return readAll(s.http, version, keys) }

	if err := publish("v1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v1 served", func() error { return allKeys("v1") })

	ns.stop(t)
	// A refresh while the source is unreachable fails and says so; every
	// key is still served, before and after it.
	if err := allKeys("v1"); err != nil {
		t.Fatalf("NATS down: %v", err)
	}
	failedBefore := strings.Count(s.logs.String(), "serving what we have")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refresh during the outage to fail", func() error {
		if strings.Count(s.logs.String(), "serving what we have") == failedBefore {
			return fmt.Errorf("no failed listing logged yet")
		}
		return nil
	})
	if err := allKeys("v1"); err != nil {
		t.Fatalf("NATS down, after a failed refresh: %v", err)
	}

	ns.start(t, buildNATSServer(t))
	// The publish retries until the restarted server has its JetStream
	// streams back.
	waitFor(t, "publish after the restart", func() error { return publish("v2") })
	waitFor(t, "v2 served", func() error { return allKeys("v2") })
	s.stop(t)
}

// TestObjectSourceCluster publishes to an R3 object store on a
// three-server NATS cluster and serves from it: with one server stopped,
// a new version is still published and picked up.
func TestObjectSourceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	const keys = 30
	bin := buildBinary(t)
	servers := startNATSCluster(t, buildNATSServer(t))
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.url
	}
	waitJetStreamR3(t, urls)
	natsURL := strings.Join(urls, ",")
	cfg := filepath.Join(t.TempDir(), "spangle.toml")
	if err := os.WriteFile(cfg, []byte("[nats]\nreplicas = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const to = "nats-object://cluster-data"
	src := t.TempDir()
	writeVersion(t, src, "d", "v1", 3, keys)
	writeVersion(t, src, "d", "v2", 3, keys)
	publish := publisher(t, bin, src, to, natsURL, "--replicas", "3")
	if err := publish("v1"); err != nil {
		t.Fatal(err)
	}
	if r := objectStoreReplicas(t, natsURL, "cluster-data"); r != 3 {
		t.Fatalf("the object store has %d replicas, want 3", r)
	}
	s := startServe(t, bin, false, "--config", cfg, "--source", to, "--nats", natsURL)
	s.logOnFailure(t)
	waitFor(t, "v1 served", func() error { return readAll(s.http, "v1", keys) })

	servers[0].stop(t)
	waitFor(t, "publish with one NATS server down", func() error { return publish("v2") })
	waitFor(t, "v2 served", func() error { return readAll(s.http, "v2", keys) })
	s.stop(t)
}

// publisher returns a func that runs "spangle publish" of version of db
// d from src to the object store URL to, through the NATS servers at
// natsURL, with the extra flags. A failed run is an error, for waitFor to
// retry.
func publisher(t *testing.T, bin, src, to, natsURL string, extra ...string) func(version string) error {
	return func(version string) error {
		args := append([]string{"publish", filepath.Join(src, "d", version), "--to", to,
			"--db", "d", "--version", version, "--nats", natsURL}, extra...)
		if code, _, stderr := runCLI(t, bin, args...); code != 0 {
			return fmt.Errorf("publish %s: exit %d: %s", version, code, stderr)
		}
		return nil
	}
}

// readAll reads key-0 … key-(keys-1) of db d from base and wants
// version's values.
func readAll(base, version string, keys int) error {
	for k := range keys {
		val, ver, _, err := clusterGet(http.DefaultClient, base, k)
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("%s:%d", version, k); ver != version || val != want {
			return fmt.Errorf("key-%d: %q from version %q, want %q", k, val, ver, want)
		}
	}
	return nil
}

// objectStoreReplicas returns the replica count of an object store bucket.
func objectStoreReplicas(t *testing.T, url, bucket string) int {
	t.Helper()
	js := natstest.JetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.Replicas()
}
