package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/advert"
)

// TestRollbackAndActivate drives a real node with the real CLI over its
// embedded NATS: spangle rollback (to the version before the one served,
// then to a named one), spangle activate --latest, and a manual db whose
// new version waits for spangle activate. Every step is checked over
// HTTP, and the pin survives a restart of the node.
func TestRollbackAndActivate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	root := t.TempDir()
	for _, v := range []string{"v1", "v2", "v3"} {
		writeVersion(t, root, "d", v, 2, 10)
	}
	writeVersion(t, root, "m", "v1", 2, 10)
	writeVersion(t, root, "one", "v1", 2, 10) // a db with one version: nothing to roll back to
	cfgPath := filepath.Join(t.TempDir(), "spangle.toml")
	if err := os.WriteFile(cfgPath, []byte("[dbs.m]\nactivation = \"manual\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	natsAddr := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	start := func() *served {
		s := startServe(t, bin, true, "--source", root, "--config", cfgPath, "--data-dir", dataDir, "--nats-listen", natsAddr)
		s.logOnFailure(t)
		return s
	}
	s := start()
	serves := func(db, version string) func() error {
		return func() error { return wantValue(s.http+"/"+db+"/key-3", version+":3") }
	}
	cli := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLI(t, bin, append(args[:1:1], append([]string{"--nats", "nats://" + natsAddr}, args[1:]...)...)...)
		if code != 0 {
			t.Fatalf("spangle %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return stdout
	}
	waitFor(t, "d on v3", serves("d", "v3"))

	// The node announces the version it serves in the versions bucket
	// just after switching to it: rollback without a version reads it.
	waitFor(t, "a rollback from v3", func() error {
		code, stdout, stderr := runCLI(t, bin, "rollback", "--nats", "nats://"+natsAddr, "d")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		t.Logf("rollback: %s", strings.TrimSpace(stdout))
		return nil
	})
	waitFor(t, "d rolled back to v2", serves("d", "v2"))

	// Impossible targets fail with the node's reason, exit non-zero, and
	// leave no pin behind (issue 29: they printed success and exited 0,
	// and the pin kept the db from taking new versions).
	waitFor(t, "one on v1", serves("one", "v1"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rollback", "d", "v7"}, "not in the source: v7"},
		{[]string{"activate", "d", "v9"}, "not in the source: v9"},
		{[]string{"rollback", "one"}, "no version older than v1"},
	} {
		code, stdout, stderr := runCLI(t, bin, append(tc.args[:1:1], append([]string{"--nats", "nats://" + natsAddr}, tc.args[1:]...)...)...)
		if code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "withdrawn") || stdout != "" {
			t.Errorf("spangle %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
		}
	}
	if err := serves("d", "v2")(); err != nil {
		t.Errorf("after the refused pins: %v", err)
	}
	if err := serves("one", "v1")(); err != nil {
		t.Errorf("after the refused rollback: %v", err)
	}
	// The refused rollback of d put back the pin it replaced.
	if _, out, _ := runCLI(t, bin, "status", "--http", s.http); !strings.Contains(out, "d: pinned to newest before v3") || strings.Contains(out, "one: pinned") {
		t.Errorf("status after the refused pins:\n%s", out)
	}

	// Pins that cannot take effect are refused at once, and write
	// nothing (issue 33 item 3: activate nosuchdb waited out its timeout
	// and left a pin no status showed; --latest of a db never pinned
	// said "unpinned" and exited 0).
	began := time.Now()
	if code, stdout, stderr := runCLI(t, bin, "activate", "--nats", "nats://"+natsAddr, "--timeout", "20s", "nosuchdb", "v1"); code != 1 || !strings.Contains(stderr, "nosuchdb: no such db") || stdout != "" {
		t.Errorf("activate nosuchdb v1: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("activate nosuchdb v1 took %v: it waited for answers (--timeout 20s)", took)
	}
	if code, stdout, stderr := runCLI(t, bin, "activate", "--nats", "nats://"+natsAddr, "--latest", "never-existed"); code != 1 || !strings.Contains(stderr, "never-existed: nothing to unpin") || stdout != "" {
		t.Errorf("activate --latest never-existed: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	out := cli("rollback", "d", "v1")
	if !strings.Contains(out, "serves v1") && !strings.Contains(out, "builds v1") {
		t.Errorf("rollback d v1 printed no node's answer:\n%s", out)
	}
	// The hint names the NATS server the command used: pasted, it works.
	hint := regexp.MustCompile("`(spangle activate [^`]*)`").FindStringSubmatch(out)
	if hint == nil || !strings.Contains(hint[1], "--nats nats://"+natsAddr) {
		t.Fatalf("rollback d v1: no hint naming --nats nats://%s:\n%s", natsAddr, out)
	}
	waitFor(t, "d rolled back to v1", serves("d", "v1"))
	// status (HTTP and NATS) shows the pin.
	if _, out, _ := runCLI(t, bin, "status", "--http", s.http); !strings.Contains(out, "d: pinned to v1") {
		t.Errorf("status --http does not show the pin:\n%s", out)
	}
	waitFor(t, "status --nats to show the pin", func() error {
		code, out, stderr := runCLI(t, bin, "status", "--nats", "nats://"+natsAddr)
		if code != 0 || !regexp.MustCompile(`(?m)^d +\S+ +v1 +v1$`).MatchString(out) {
			return fmt.Errorf("exit %d: %s%s", code, out, stderr)
		}
		return nil
	})

	// The pin survives a restart.
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.cmd.Wait()
	s = start()
	if err := serves("d", "v1")(); err != nil {
		t.Fatalf("after a restart: %v", err)
	}

	// A pin of a db no node serves (written before the refusal, or its
	// db since gone) shows in status --nats, and can be removed.
	writeBucketPin(t, "nats://"+natsAddr, advert.Pin{DB: "ghost", Version: "v1", By: "test"})
	if code, out, stderr := runCLI(t, bin, "status", "--nats", "nats://"+natsAddr); code != 0 ||
		!regexp.MustCompile(`(?m)^ghost +\(all\) +v1 +test `).MatchString(out) || !regexp.MustCompile(`(?m)^d +\(all\) +v1 `).MatchString(out) {
		t.Errorf("status --nats does not show every pin: exit %d\n%s%s", code, out, stderr)
	}
	cli("activate", "--latest", "ghost")

	// The hint of the rollback, run as printed.
	cmd := exec.Command("sh", "-c", strings.Replace(hint[1], "spangle", bin, 1))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "d: unpinned") {
		t.Fatalf("the hint %q: %v\n%s", hint[1], err, out)
	}
	waitFor(t, "d back on v3", serves("d", "v3"))

	// The manual db: nothing until activated, then v2 built ahead waits.
	if err := serves("m", "v1")(); err == nil {
		t.Fatal("the manual db serves v1 before its activation")
	}
	cli("activate", "m", "v1")
	waitFor(t, "m on v1", serves("m", "v1"))
	writeVersion(t, root, "m", "v2", 2, 10)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "m's v2 built", func() error {
		if !strings.Contains(s.logs.String(), `"msg":"version available to peers","db":"m","version":"v2"`) {
			return fmt.Errorf("not built yet")
		}
		return nil
	})
	if err := serves("m", "v1")(); err != nil {
		t.Fatalf("m moved on its own: %v", err)
	}
	cli("activate", "m", "v2")
	waitFor(t, "m on v2", serves("m", "v2"))

	if code, _, stderr := runCLI(t, bin, "rollback", "--nats", "nats://"+natsAddr, "--cluster", "nope", "d"); code == 0 || !strings.Contains(stderr, "cluster name") {
		t.Errorf("rollback on a wrong cluster name: exit %d, %s", code, stderr)
	}
}

// writeBucketPin writes p in the versions bucket of cluster "spangle" at url, as
// spangle activate does.
func writeBucketPin(t *testing.T, url string, p advert.Pin) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, names.KVBucket("spangle", names.Versions))
	if err != nil {
		t.Fatal(err)
	}
	p.At = time.Now().UTC()
	b, err := advert.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, advert.PinKey(p.DB), b); err != nil {
		t.Fatal(err)
	}
}
