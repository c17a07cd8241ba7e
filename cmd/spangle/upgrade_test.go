package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/nodetest"
)

// writeVersion writes version v of db under root: files SequenceFiles
// holding key-0..key-(n-1) → "<v>:<i>", then _SUCCESS.
func writeVersion(t *testing.T, root, db, v string, files, n int) {
	t.Helper()
	nodetest.WriteVersion(t, root, db, v, files, nodetest.Numbered(v, n))
}

// TestUpgradesOverHTTP runs the real binary and drives HTTP readers through
// 50 consecutive upgrades, each triggered by SIGHUP: every answer must be
// a 200 with the value of the version it names, and no reader may see a
// version older than one it saw before.
func TestUpgradesOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const upgrades, keys, readers = 50, 100, 4
	root := t.TempDir()
	vname := func(i int) string { return fmt.Sprintf("v%03d", i) }
	writeVersion(t, root, "d", vname(0), 3, keys)
	config := filepath.Join(t.TempDir(), "spangle.toml")
	if err := os.WriteFile(config, []byte("require_success_file = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	srv := startServe(t, buildBinary(t), false, "--config", config, "--source", root)
	base := srv.http

	client := &http.Client{Timeout: testTimeout}
	version := func() string {
		resp, err := client.Get(base + "/d/key-0")
		if err != nil {
			return ""
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get("X-Spangle-Version")
	}
	waitVersion := func(v string) {
		t.Helper()
		deadline := time.Now().Add(testTimeout)
		for version() != v {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for version %s", v)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitVersion(vname(0))

	var stop atomic.Bool
	var requests atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for i := r; !stop.Load(); i++ {
				k := i % keys
				resp, err := client.Get(fmt.Sprintf("%s/d/key-%d", base, k))
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				v := resp.Header.Get("X-Spangle-Version")
				switch {
				case err != nil:
					errs <- err
				case resp.StatusCode != 200:
					errs <- fmt.Errorf("key-%d: status %d", k, resp.StatusCode)
				case v < last:
					errs <- fmt.Errorf("version went back from %s to %s", last, v)
				case string(body) != fmt.Sprintf("%s:%d", v, k):
					errs <- fmt.Errorf("key-%d: %q from version %s (mixed versions)", k, body, v)
				default:
					last = v
					requests.Add(1)
					continue
				}
				return
			}
		}()
	}
	for u := 1; u <= upgrades && len(errs) == 0; u++ {
		writeVersion(t, root, "d", vname(u), 3, keys)
		if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitVersion(vname(u))
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := requests.Load(); n < upgrades {
		t.Fatalf("only %d requests over %d upgrades", n, upgrades)
	}
	t.Logf("%d requests over %d upgrades, none failed", requests.Load(), upgrades)
}
