package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeNATSPortBusy: a taken embedded-NATS port stops spangle serve
// with a non-zero exit naming the problem, the key and the flag, before
// anything starts (it once served HTTP for ever without its NATS side,
// then stopped after a "spangle serving" line).
func TestServeNATSPortBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, "serve", "--source", exampleData(t),
		"--data-dir", t.TempDir(), "--bind", "127.0.0.1:0", "--nats-listen", l.Addr().String()).CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "[nats] listen (--nats-listen)") ||
		!strings.Contains(string(out), l.Addr().String()) || strings.Contains(string(out), "spangle serving") {
		t.Fatalf("serve with its NATS port taken: %v after %v\n%s", err, time.Since(start), out)
	}
}

// TestServeNATSAuth: with [[nats.users]], lookups over the embedded
// NATS need a login (a client role may look keys up), and an embedded
// server on a non-loopback address without users refuses to start.
func TestServeNATSAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	cfg := filepath.Join(t.TempDir(), "spangle.toml")
	if err := os.WriteFile(cfg, []byte(`
[[nats.users]]
name = "app"
password = "app-secret"
role = "client"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, bin, true, "--config", cfg)
	authed := strings.Replace(s.nats, "nats://", "nats://app:app-secret@", 1)
	if code, stdout, stderr := runCLI(t, bin, "get", "--nats", authed, "baby-names", "1881/boy"); code != 0 || stdout != "John\n" {
		t.Errorf("get with a login: %d %q %q", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, bin, "get", "--timeout", "2s", "--nats", s.nats, "baby-names", "1881/boy"); code != 2 ||
		!strings.Contains(strings.ToLower(stderr), "authorization") {
		t.Errorf("get without a login: %d %q", code, stderr)
	}

	out, err := exec.Command(bin, "serve", "--source", exampleData(t),
		"--data-dir", t.TempDir(), "--bind", "127.0.0.1:0", "--nats-listen", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "allow_insecure") {
		t.Fatalf("an open embedded server: %v\n%s", err, out)
	}
}

// TestPublishUnreachableNATS: spangle publish to a NATS nobody listens on
// fails at once saying so (it once waited for --timeout, an hour, in
// silence).
func TestPublishUnreachableNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "part-00000"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	start := time.Now()
	code, _, stderr := runCLI(t, bin, "publish", dir, "--to", "nats-object://b", "--db", "d", "--version", "v1", "--nats", "nats://"+addr)
	if code == 0 || !strings.Contains(stderr, "connection refused") || time.Since(start) > 10*time.Second {
		t.Fatalf("publish to %s: exit %d after %v: %s", addr, code, time.Since(start), stderr)
	}
}

// TestShardingIslandWarning: sharding with a stand-alone embedded NATS
// server warns that the node is an island.
func TestShardingIslandWarning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	cfg := filepath.Join(t.TempDir(), "spangle.toml")
	if err := os.WriteFile(cfg, []byte("[sharding]\nenabled = true\ntime_to_converge = \"100ms\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, bin, false, "--config", cfg)
	if !strings.Contains(s.logs.String(), "each node is an island") {
		t.Fatalf("no warning:\n%s", s.logs.String())
	}
}

// TestNATSRoles runs a node whose embedded NATS has a client, a publisher
// and an operator login (docs/SECURITY.md), and drives it with the real
// CLI under each: the publisher publishes versions to its Object Store
// bucket, which the node serves; the client looks keys up over NATS; the
// publisher may not roll the db back (pins are the operator's), the
// operator may, and activates the latest again.
func TestNATSRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	cfg := filepath.Join(t.TempDir(), "spangle.toml")
	if err := os.WriteFile(cfg, []byte(`
[[nats.users]]
name = "app"
password = "app-secret"
role = "client"

[[nats.users]]
name = "etl"
password = "etl-secret"
role = "publisher"
buckets = ["data"]

[[nats.users]]
name = "ops"
password = "ops-secret"
role = "operator"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, bin, true, "--config", cfg, "--source", "nats-object://data")
	s.logOnFailure(t)
	as := func(user, password string) string {
		return strings.Replace(s.nats, "nats://", "nats://"+user+":"+password+"@", 1)
	}
	serves := func(version string) func() error {
		return func() error { return wantValue(s.http+"/d/key-3", version+":3") }
	}
	src := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		writeVersion(t, src, "d", v, 2, 10)
		if code, _, stderr := runCLI(t, bin, "publish", filepath.Join(src, "d", v), "--to", "nats-object://data",
			"--db", "d", "--version", v, "--nats", as("etl", "etl-secret")); code != 0 {
			t.Fatalf("publish %s as the publisher: exit %d\n%s", v, code, stderr)
		}
	}
	waitFor(t, "d on v2", serves("v2"))
	if code, stdout, stderr := runCLI(t, bin, "get", "--nats", as("app", "app-secret"), "d", "key-3"); code != 0 || stdout != "v2:3\n" {
		t.Errorf("lookup as the client: %d %q %q", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, bin, "rollback", "--timeout", "2s", "--nats", as("etl", "etl-secret"), "d", "v1"); code == 0 ||
		!strings.Contains(stderr, "Permissions Violation") || !strings.Contains(stderr, "operator role") {
		t.Fatalf("the publisher's rollback: exit %d\n%s", code, stderr)
	}
	if err := serves("v2")(); err != nil {
		t.Fatalf("after the publisher's refused rollback: %v", err)
	}
	if code, _, stderr := runCLI(t, bin, "rollback", "--nats", as("ops", "ops-secret"), "d", "v1"); code != 0 {
		t.Fatalf("rollback as the operator: exit %d\n%s", code, stderr)
	}
	waitFor(t, "d rolled back to v1", serves("v1"))
	if code, _, stderr := runCLI(t, bin, "activate", "--nats", as("ops", "ops-secret"), "--latest", "d"); code != 0 {
		t.Fatalf("activate --latest as the operator: exit %d\n%s", code, stderr)
	}
	waitFor(t, "d back on v2", serves("v2"))
}

// TestNATSPermissionsCommand: spangle nats-permissions prints a role's
// block for an external server's configuration; an unknown role, or a
// publisher without buckets, is a usage error.
func TestNATSPermissionsCommand(t *testing.T) {
	bin := buildBinary(t)
	code, stdout, stderr := runCLI(t, bin, "nats-permissions", "--cluster", "prod", "--buckets", "data", "publisher")
	if code != 0 || !strings.HasPrefix(stdout, "permissions: {") || !strings.Contains(stdout, `"$O.data.>"`) ||
		!strings.Contains(stdout, `"$KV.spangle_prod_versions.*"`) || strings.Contains(stdout, "STREAM.DELETE") {
		t.Fatalf("publisher: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, bin, "nats-permissions", "--cluster", "prod", "--buckets", "data", "--hub-domain", "hub", "node")
	if code != 0 || !strings.Contains(stdout, `"$JS.hub.API.INFO"`) || !strings.Contains(stdout, `"$JS.API.STREAM.CREATE.OBJ_data"`) ||
		strings.Contains(stdout, `"$KV.spangle_prod_versions.*"`) {
		t.Fatalf("a region's node: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, bin, "nats-permissions", "--cluster", "prod", "--hub-domain", "hub", "--region", "eu", "operator")
	if code != 0 || !strings.Contains(stdout, `"$KV.spangle_prod_versions.*.pin.eu"`) || !strings.Contains(stdout, `"$JS.eu.API.STREAM.INFO.KV_spangle_prod_nodes"`) ||
		strings.Contains(stdout, `"$KV.spangle_prod_versions.*.pin"`+"\n") {
		t.Fatalf("a region's operator: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, args := range [][]string{{"admin"}, {"publisher"}, {}, {"--region", "eu", "operator"}, {"responder"}} {
		if code, _, stderr := runCLI(t, bin, append([]string{"nats-permissions"}, args...)...); code != 2 {
			t.Errorf("nats-permissions %q: exit %d, want 2\n%s", args, code, stderr)
		}
	}
}
