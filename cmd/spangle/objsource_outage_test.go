package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// startNATSServer starts one nats-server process with JetStream on a
// random loopback port, its store in a temporary directory.
func startNATSServer(t *testing.T, bin string) *natsProc {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
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
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("spangle log:\n%s", tail(s.logs.String(), 8000))
		}
	})
	src := t.TempDir()
	writeVersion(t, src, "d", "v1", 3, keys)
	writeVersion(t, src, "d", "v2", 3, keys)
	publish := func(version string) error {
		code, _, stderr := runCLI(t, bin, "publish", filepath.Join(src, "d", version), "--to", to,
			"--db", "d", "--version", version, "--nats", ns.url)
		if code != 0 {
			return fmt.Errorf("publish %s: exit %d: %s", version, code, stderr)
		}
		return nil
	}
	// allKeys reads every key and wants version's values.
	allKeys := func(version string) error {
		for k := range keys {
			resp, err := http.Get(fmt.Sprintf("%s/d/key-%d", s.http, k))
			if err != nil {
				return err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("%s:%d", version, k); resp.StatusCode != 200 || string(body) != want {
				return fmt.Errorf("key-%d: %d %q, want %q", k, resp.StatusCode, body, want)
			}
		}
		return nil
	}

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
