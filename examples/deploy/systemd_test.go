package deploy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// unitFile reads spangle.service as key → values of its [Service]
// section (systemd's format: one key=value a line, # comments).
func unitFile(t testing.TB) (raw []byte, service map[string][]string) {
	t.Helper()
	raw, err := os.ReadFile("spangle.service")
	if err != nil {
		t.Fatal(err)
	}
	service = map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("spangle.service: %q is not key=value", line)
			}
			service[k] = append(service[k], v)
		}
	}
	return raw, service
}

// TestUnitVerify checks spangle.service with systemd-analyze verify, which
// must print nothing (it only warns about an unknown key, with exit
// status 0), and that the unit keeps its contract: Type=notify, SIGHUP to
// reload, and the hardening.
func TestUnitVerify(t *testing.T) {
	raw, service := unitFile(t)
	for key, want := range map[string]string{
		"Type":            "notify",
		"ExecReload":      "/bin/kill -HUP $MAINPID",
		"DynamicUser":     "yes",
		"StateDirectory":  "spangle",
		"ProtectSystem":   "strict",
		"NoNewPrivileges": "yes",
		"LimitNOFILE":     "65536",
	} {
		if got := strings.Join(service[key], " "); got != want {
			t.Errorf("spangle.service: %s=%q, want %q", key, got, want)
		}
	}
	analyze := needTool(t, "systemd-analyze", "systemd")
	// verify wants ExecStart's program to exist: point it at the binary
	// this test built, the only change.
	exec0 := strings.Fields(service["ExecStart"][0])[0]
	unit := filepath.Join(t.TempDir(), "spangle.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(raw, []byte("ExecStart="+exec0), []byte("ExecStart="+buildBinary(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestUnitNotify runs the binary as the unit's ExecStart does (its
// arguments, $STATE_DIRECTORY, $NOTIFY_SOCKET on a socket this test
// listens on) on the unit's config, reading from an S3 source whose first
// listing this test holds back: READY=1 must not come while the initial
// load waits, and when it comes the node must already serve. Then the
// unit's reload (SIGHUP) must send RELOADING=1 and READY=1, and its stop
// (SIGTERM) STOPPING=1 and a clean exit.
func TestUnitNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, service := unitFile(t)
	bin := buildBinary(t)

	// The source: the example data in an S3 server on loopback, whose
	// listings wait for release once the first has arrived.
	backend := s3mem.New()
	if err := backend.CreateBucket("exports"); err != nil {
		t.Fatal(err)
	}
	exampleData := exampleData(t)
	err := filepath.WalkDir(exampleData, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(exampleData, path)
		meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
		_, err = backend.PutObject("exports", "v/"+filepath.ToSlash(rel), meta, bytes.NewReader(body), int64(len(body)), nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	listed, release := make(chan struct{}), make(chan struct{})
	var listedOnce sync.Once
	s3 := gofakes3.New(backend, gofakes3.WithoutVersioning()).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		listedOnce.Do(func() { close(listed) })
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		s3.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before srv.Close, which waits for handlers

	// The unit's config, with the S3 endpoint added and the source
	// overridden by a flag, as an operator would.
	conf, err := os.ReadFile("spangle.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "spangle.toml")
	conf = fmt.Appendf(conf, "\n[s3]\nendpoint = %q\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\npath_style = true\n", srv.URL)
	if err := os.WriteFile(config, conf, 0o644); err != nil {
		t.Fatal(err)
	}

	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	notes := make(chan string, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(notes)
		buf := make([]byte, 4096)
		for {
			n, err := sock.Read(buf)
			if err != nil {
				return
			}
			notes <- string(buf[:n])
		}
	})
	t.Cleanup(func() { sock.Close(); wg.Wait() })
	next := func(what string) string {
		t.Helper()
		select {
		case m, ok := <-notes:
			if !ok {
				t.Fatalf("notify socket closed while waiting for %s", what)
			}
			return m
		case <-time.After(testTimeout):
			t.Fatalf("no notification within %v while waiting for %s", testTimeout, what)
		}
		return ""
	}

	// ExecStart as systemd runs it: ${STATE_DIRECTORY} expanded from the
	// environment systemd sets; then this test's flags.
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o750); err != nil {
		t.Fatal(err)
	}
	env := []string{"STATE_DIRECTORY=" + state, "NOTIFY_SOCKET=" + sock.LocalAddr().String(), "PATH=" + os.Getenv("PATH")}
	argv := strings.Fields(os.Expand(service["ExecStart"][0], func(k string) string {
		if k != "STATE_DIRECTORY" {
			t.Fatalf("ExecStart names $%s, which systemd does not set", k)
		}
		return state
	}))
	for i, a := range argv {
		if a == "/etc/spangle/spangle.toml" {
			argv[i] = config
		}
	}
	n := startNode(t, env, bin, append(argv[1:], "--source", "s3://exports/v",
		"--bind", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")...)

	select {
	case <-listed:
	case <-time.After(testTimeout):
		t.Fatalf("the node did not list its source within %v:\n%s", testTimeout, n.logs)
	}
	if code := get(t, n.http+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d while the first listing waits", code)
	}
	select {
	case m := <-notes:
		t.Fatalf("notification %q while the first listing waits", m)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	m := next("READY=1")
	if !strings.HasPrefix(m, "READY=1\n") || !strings.Contains(m, "STATUS=serving 1 of 1 dbs") {
		t.Fatalf("first notification %q; want READY=1 and STATUS=serving 1 of 1 dbs\n%s", m, n.logs)
	}
	// Ready means serving: no polling here.
	if code := get(t, n.http+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d after READY=1", code)
	}
	if code := get(t, n.http+"/baby-names/1881/boy"); code != http.StatusOK {
		t.Fatalf("GET a key: %d after READY=1", code)
	}

	// systemctl reload: the unit's ExecReload sends SIGHUP.
	if reload := service["ExecReload"][0]; reload != "/bin/kill -HUP $MAINPID" {
		t.Fatalf("ExecReload=%s: this test sends SIGHUP", reload)
	}
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if m := next("RELOADING=1"); m != "RELOADING=1" {
		t.Fatalf("after SIGHUP %q; want RELOADING=1", m)
	}
	if m := next("READY=1 after the reload"); !strings.HasPrefix(m, "READY=1\n") || !strings.Contains(m, "STATUS=serving 1 of 1 dbs") {
		t.Fatalf("after RELOADING=1 %q; want READY=1 and STATUS=serving 1 of 1 dbs", m)
	}

	// systemctl stop: SIGTERM (KillSignal's default).
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := next("STOPPING=1"); !strings.HasPrefix(m, "STOPPING=1") {
		t.Fatalf("after SIGTERM %q; want STOPPING=1", m)
	}
	n.wait(t)
}

// get returns the status of GET url, failing the test on a transport error.
func get(t testing.TB, url string) int {
	t.Helper()
	c := &http.Client{Timeout: testTimeout}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
