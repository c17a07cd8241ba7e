package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSourceErrorVisible: a node whose source root does not exist says
// at start what to fix, is not ready (503 naming the source error, not
// 200 with no dbs), its status and dashboard say why; once the root appears and a SIGHUP lists it,
// the node serves and is ready.
func TestSourceErrorVisible(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	root := filepath.Join(t.TempDir(), "not-yet")
	cmd := exec.Command(bin, "serve", "--source", root, "--data-dir", t.TempDir(), "--bind", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	var logMu sync.Mutex
	var logTail []string // the node's last lines, shown if the test fails
	t.Cleanup(func() {
		if t.Failed() {
			logMu.Lock()
			t.Logf("the node's last log lines:\n%s", strings.Join(logTail, "\n"))
			logMu.Unlock()
		}
	})
	go func() {
		re := regexp.MustCompile(`"bind":"([^"]+)"`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			logTail = append(logTail, sc.Text())
			if len(logTail) > 30 {
				logTail = logTail[1:]
			}
			logMu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "spangle serving") {
				addr <- "http://" + m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var base string
	select {
	case base = <-addr:
	case <-time.After(testTimeout):
		t.Fatal("no start-up line")
	}
	// The start says what to fix (issue 29: it said nothing).
	logMu.Lock()
	if lines := strings.Join(logTail, "\n"); !strings.Contains(lines, "the source does not exist") || !strings.Contains(lines, "set source / --source") {
		t.Errorf("no start-up warning saying what to fix:\n%s", lines)
	}
	logMu.Unlock()
	get := func(path, accept string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "the source error in /readyz", func() error {
		if code, body := get("/readyz", "*/*"); code != 503 || !strings.Contains(body, "not-yet") {
			return fmt.Errorf("/readyz: %d %q", code, body)
		}
		return nil
	})
	code, body := get("/", "application/json")
	var st struct {
		SourceError string `json:"source_error"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || !strings.Contains(st.SourceError, "not-yet") {
		t.Errorf("status: %d %s", code, body)
	}
	if code, body := get("/", "text/html"); !strings.Contains(body, "Source unavailable") {
		t.Errorf("dashboard: %d lacks the source error", code)
	}

	writeVersion(t, root, "d", "v1", 2, 10)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready once the source is there", func() error {
		if code, body := get("/readyz", "*/*"); code != 200 {
			return fmt.Errorf("/readyz: %d %q", code, body)
		}
		if code, body := get("/d/key-3", "*/*"); code != 200 || body != "v1:3" {
			return fmt.Errorf("lookup: %d %q", code, body)
		}
		return nil
	})
}
