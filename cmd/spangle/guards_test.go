package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// TestActivateForce drives a real node whose db has a guard
// (min_records) with the real CLI: a version with too few records is
// refused (spangle status says why, the old version serves), spangle
// activate of it fails with the node's reason and leaves no pin, and
// spangle activate --force activates it.
func TestActivateForce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	root := t.TempDir()
	writeVersion(t, root, "g", "v1", 2, 20)
	cfgPath := filepath.Join(t.TempDir(), "spangle.toml")
	if err := os.WriteFile(cfgPath, []byte("[dbs.g]\nmin_records = 15\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	natsAddr := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	s := startServe(t, bin, true, "--source", root, "--config", cfgPath, "--data-dir", filepath.Join(t.TempDir(), "data"), "--nats-listen", natsAddr)
	s.logOnFailure(t)
	serves := func(version string) func() error {
		return func() error { return wantValue(s.http+"/g/key-3", version+":3") }
	}
	waitFor(t, "g on v1", serves("v1"))

	writeVersion(t, root, "g", "v2", 2, 10)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v2 refused", func() error {
		_, out, _ := runCLI(t, bin, "status", "--http", s.http)
		if !strings.Contains(out, "REFUSED") || !strings.Contains(out, "refused: min_records: 10 records, fewer than min_records 15 (spangle activate --force g v2 activates it)") {
			return fmt.Errorf("status:\n%s", out)
		}
		return nil
	})
	if err := serves("v1")(); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}

	code, stdout, stderr := runCLI(t, bin, "activate", "--nats", "nats://"+natsAddr, "--timeout", "20s", "g", "v2")
	if code != 1 || !strings.Contains(stderr, "refused by its guards") {
		t.Fatalf("activate of the refused v2: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, out, _ := runCLI(t, bin, "status", "--http", s.http); strings.Contains(out, "pinned to") {
		t.Errorf("a pin left behind:\n%s", out)
	}
	code, stdout, stderr = runCLI(t, bin, "activate", "--nats", "nats://"+natsAddr, "--timeout", "20s", "--force", "g", "v2")
	if code != 0 {
		t.Fatalf("activate --force: exit %d\n%s\n%s", code, stdout, stderr)
	}
	waitFor(t, "g forced to v2", serves("v2"))
	if _, out, _ := runCLI(t, bin, "status", "--http", s.http); !strings.Contains(out, "forced past its guards: min_records") {
		t.Errorf("status after the forced activation:\n%s", out)
	}
}
