package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPublishToObjectStore runs a node whose source is the NATS object
// store of its own embedded server, publishes two versions with the real
// "spangle publish", and reads them over HTTP: the node learns of each from
// the versions bucket, without polling. A second publish of the same
// directory uploads nothing; --delete removes a version's objects.
func TestPublishToObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	s := startServe(t, bin, true, "--source", "nats-object://spangle-data")
	src := t.TempDir()
	// writeVersion's files differ on each write (a SequenceFile's sync
	// marker is random): each version is written once.
	writeVersion(t, src, "d", "v1", 3, 30)
	writeVersion(t, src, "d", "v2", 3, 30)
	publish := func(version string, args ...string) string {
		t.Helper()
		args = append([]string{"publish", filepath.Join(src, "d", version), "--to", "nats-object://spangle-data",
			"--db", "d", "--version", version, "--nats", s.nats}, args...)
		code, _, stderr := runCLI(t, bin, args...)
		if code != 0 {
			t.Fatalf("publish %s: exit %d\n%s", version, code, stderr)
		}
		return stderr
	}
	waitValue := func(key, want string) {
		t.Helper()
		deadline := time.Now().Add(testTimeout)
		for {
			resp, err := http.Get(s.http + "/d/" + key)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 && string(body) == want {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /d/%s never returned %q", key, want)
			}
			time.Sleep(10 * time.Millisecond) // polling interval
		}
	}

	out := publish("v1")
	if !strings.Contains(out, "3 uploaded, 0 skipped") {
		t.Errorf("first publish: %s", out)
	}
	waitValue("key-7", "v1:7")
	out = publish("v1")
	if !strings.Contains(out, "0 uploaded, 3 skipped") {
		t.Errorf("second publish of the same files: %s", out)
	}
	publish("v2")
	waitValue("key-7", "v2:7")

	code, _, stderr := runCLI(t, bin, "publish", "--delete", "--to", "nats-object://spangle-data", "--nats", s.nats, "d", "v1")
	if code != 0 || !strings.Contains(stderr, fmt.Sprintf("deleted %d objects of d/v1", 4)) {
		t.Errorf("delete: exit %d: %s", code, stderr)
	}
	s.stop(t)
}
