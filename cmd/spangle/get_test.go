package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"github.com/spangledb/spangle"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// served is a running "spangle serve" and what its log told.
type served struct {
	cmd        *exec.Cmd
	http, nats string // nats is "" until (unless) the NATS front door serves
	logs       *safeBuffer
}

// startServe runs "spangle serve" on the example data with a random HTTP
// port and the given extra flags, and waits until it is ready; with
// wantNATS, also until its NATS front door serves.
func startServe(t *testing.T, bin string, wantNATS bool, extra ...string) *served {
	t.Helper()
	args := append([]string{"serve", "--source", exampleData(t),
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--bind", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-format", "json"}, extra...)
	cmd := exec.Command(bin, args...)
	logPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &served{cmd: cmd, logs: &safeBuffer{}}
	type addrs struct{ http, nats string }
	found := make(chan addrs, 2)
	go func() {
		var a addrs
		sc := bufio.NewScanner(logPipe)
		for sc.Scan() {
			s.logs.WriteLine(sc.Text())
			var line struct {
				Msg, Bind   string
				EmbeddedURL string `json:"embedded_url"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case "spangle serving":
				a.http = "http://" + line.Bind
			case "NATS front door serving":
				a.nats = line.EmbeddedURL
			default:
				continue
			}
			if a.http != "" && (a.nats != "" || !wantNATS) {
				found <- a
			}
		}
		close(found)
	}()
	select {
	case a, ok := <-found:
		if !ok {
			t.Fatalf("spangle exited before serving:\n%s", s.logs.String())
		}
		s.http, s.nats = a.http, a.nats
	case <-time.After(testTimeout):
		t.Fatalf("no start-up lines:\n%s", s.logs.String())
	}
	deadline := time.Now().Add(testTimeout)
	for {
		resp, err := http.Get(s.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	return s
}

// exampleData returns a source root holding a copy of the example data's
// baby-names version 1 (what make run serves), made for the test: a
// version or db a user drops into examples/data to try make run cannot
// change what the tests see, and no test writes there.
func exampleData(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("..", "..", "examples", "data", "baby-names", "1")
	dst := filepath.Join(root, "baby-names", "1")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return root
}

// stop sends SIGTERM and waits for a clean exit.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, s.logs.String())
		}
	case <-time.After(testTimeout):
		t.Fatal("did not stop after SIGTERM")
	}
}

// logOnFailure prints the end of the log if the test fails.
func (s *served) logOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("spangle log:\n%s", tail(s.logs.String(), 8000))
		}
	})
}

// runCLI runs the binary and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

// TestGetAndStatus runs "spangle serve" on the example data with an
// embedded NATS server, then "spangle get" and "spangle status" over HTTP
// and NATS, then stops it with SIGTERM.
func TestGetAndStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	s := startServe(t, bin, true, "--nats-listen", "127.0.0.1:0")
	a := struct{ http, nats string }{s.http, s.nats}
	logs := s.logs
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, bin, args...)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"get", "--http", a.http, "baby-names", "1881/boy"}, 0, "John\n", "200 version=1"},
		{[]string{"get", "--nats", a.nats, "baby-names", "1881/boy"}, 0, "John\n", "200 version=1"},
		{[]string{"get", "baby-names", "1881/girl", "--raw", "--nats", a.nats}, 0, "Mary", "200 version=1"},
		{[]string{"get", "--http", a.http, "baby-names", "1881/nobody"}, 1, "", "404 version=1"},
		{[]string{"get", "--nats", a.nats, "baby-names", "1881/nobody"}, 1, "", "404 version=1"},
		{[]string{"get", "--nats", a.nats, "nope", "x"}, 1, "", `db "nope" unknown`},
		{[]string{"get", "--http", "http://127.0.0.1:1", "--timeout", "1s", "baby-names", "x"}, 2, "", "no node answered"},
		{[]string{"get", "baby-names"}, 2, "", "usage"},
		{[]string{"get", "--http", a.http, "baby-names", "1881/boy", "1881/girl"}, 0, "1881/boy\tJohn\n1881/girl\tMary\n", "version=1 found=2 missing=0"},
		{[]string{"get", "--nats", a.nats, "baby-names", "1881/nobody", "1881/girl"}, 1, "1881/girl\tMary\n", "404 1881/nobody\nversion=1 found=1 missing=1"},
		{[]string{"get", "--nats", a.nats, "--raw", "baby-names", "1881/boy", "1881/girl"}, 2, "", "--raw takes one key"},
		{[]string{"list", "--http", a.http, "baby-names", "1881/"}, 0, "1881/boy\n1881/girl\n", "keys=2"},
		{[]string{"list", "--nats", a.nats, "baby-names", "1881/", "--values"}, 0, "1881/boy\tJohn\n1881/girl\tMary\n", "keys=2"},
		{[]string{"list", "--http", a.http, "--limit", "3", "--start", "1900", "baby-names"}, 0, "1900/boy\n1900/girl\n1901/boy\n", "keys=3"},
		{[]string{"list", "--nats", a.nats, "--start", "1881/c", "--end", "1882", "baby-names"}, 0, "1881/girl\n", "keys=1"},
		{[]string{"list", "--http", a.http, "nope"}, 1, "", `db "nope" unknown`},
	} {
		code, stdout, stderr := run(tc.args...)
		if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("spangle %s: exit %d, stdout %q, stderr %q; want %d, %q, %q", strings.Join(tc.args, " "),
				code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}

	code, stdout, stderr := run("status", "--http", a.http)
	if code != 0 || !strings.Contains(stdout, "baby-names") || !strings.Contains(stdout, "ACTIVE") || !strings.Contains(stdout, "20/20") {
		t.Errorf("status --http: %d\n%s%s", code, stdout, stderr)
	}
	// The node advertises itself shortly after start: poll the cluster map.
	deadline := time.Now().Add(testTimeout)
	for {
		code, stdout, stderr = run("status", "--nats", a.nats)
		if code == 0 && strings.Contains(stdout, "SERVING") && strings.Contains(stdout, "baby-names") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status --nats: %d\n%s%s", code, stdout, stderr)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	fields := strings.Fields(stdout[strings.Index(stdout, "baby-names"):])
	if !slices.Equal(fields[:6], []string{"baby-names", "1", "yes", "20", "sequins", "1/1.00/1"}) {
		t.Errorf("status --nats row: %v\n%s", fields, stdout)
	}
	code, stdout, _ = run("status", "--nats", a.nats, "--json")
	var m struct {
		Loaded   bool
		Versions map[string]struct{ Version string }
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &m) != nil || !m.Loaded || m.Versions["baby-names"].Version != "1" ||
		!strings.Contains(stdout, `"loaded": true`) || !strings.Contains(stdout, `"versions": {`) {
		t.Errorf("status --json: %d %s", code, stdout)
	}

	s.stop(t)
	for _, want := range []string{"NATS front door stopped", "kvwatch stopped"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestNATSDown: with NATS unreachable, HTTP serves all the same, and
// SIGTERM still stops the process at once.
func TestNATSDown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	s := startServe(t, bin, false, "--nats", "nats://127.0.0.1:1") // nothing listens on port 1
	code, stdout, stderr := runCLI(t, bin, "get", "--http", s.http, "baby-names", "1881/boy")
	if code != 0 || stdout != "John\n" {
		t.Fatalf("get: %d %q %q", code, stdout, stderr)
	}
	start := time.Now()
	s.stop(t)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stopping took %v", d)
	}
}

func TestNATSConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		urls       []string
		listen     string
		cluster    string
	}{
		{"defaults", ``, nil, "127.0.0.1:4222", "spangle"},
		{"string", "[nats]\nurl = \"nats://a:4222\"\nlisten = \"0.0.0.0:4333\"\ncluster_name = \"prod\"\n",
			[]string{"nats://a:4222"}, "0.0.0.0:4333", "prod"},
		{"comma list", "[nats]\nurl = \"nats://a:4222, nats://b:4222\"\n", []string{"nats://a:4222", "nats://b:4222"}, "127.0.0.1:4222", "spangle"},
		{"array", "[nats]\nurl = [\"nats://a:4222\", \"nats://b:4222\"]\ncreds = \"/c\"\ntls_ca = \"/ca\"\n",
			[]string{"nats://a:4222", "nats://b:4222"}, "127.0.0.1:4222", "spangle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".toml")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := spangle.DefaultConfig()
			if err := spangle.LoadConfig(p, &cfg); err != nil {
				t.Fatal(err)
			}
			k := cfg.NATS
			if !slices.Equal(k.URLs, tc.urls) || k.EmbeddedListen != tc.listen || k.ClusterName != tc.cluster {
				t.Fatalf("nats config %+v", k)
			}
			if err := k.Validate(); len(k.URLs) == 0 && err == nil {
				t.Fatal("an embedded server needs a store dir: Validate should say so until serve sets it")
			}
		})
	}
	// An embedded server joining a NATS cluster of embedded servers.
	p := filepath.Join(dir, "embedded-cluster.toml")
	body := `[nats]
server_name = "n2"
embedded_cluster = "edge"
embedded_cluster_listen = "127.0.0.1:6202"
embedded_routes = ["nats://127.0.0.1:6201", "nats://127.0.0.1:6202", "nats://127.0.0.1:6203"]
replicas = 3
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := spangle.DefaultConfig()
	if err := spangle.LoadConfig(p, &cfg); err != nil {
		t.Fatal(err)
	}
	if k := cfg.NATS; k.EmbeddedServerName != "n2" || k.EmbeddedClusterName != "edge" || k.EmbeddedClusterListen != "127.0.0.1:6202" ||
		len(k.EmbeddedRoutes) != 3 || k.Replicas != 3 {
		t.Fatalf("embedded cluster config %+v", k)
	}

	p = filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(p, []byte("[nats]\nurl = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = spangle.DefaultConfig()
	if err := spangle.LoadConfig(p, &cfg); err == nil || !strings.Contains(err.Error(), "string") {
		t.Fatalf("url = 3: %v", err)
	}
	if err := os.WriteFile(p, []byte("[nats]\nport = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := spangle.LoadConfig(p, &cfg); err == nil || !strings.Contains(err.Error(), "nats.port") {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"John":         "John",
		"a\tb\nc":      "a\tb\nc",
		"\x00\xff":     `"\x00\xff"`,
		"caf\u00e9":    "caf\u00e9",
		"bell\x07":     `"bell\a"`,
		"":             "",
		"\x7fdel":      `"\x7fdel"`,
		"line\r\n":     `"line\r\n"`,
		"ok \u2603 ok": "ok \u2603 ok",
	} {
		if got := printable([]byte(in)); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// safeBuffer collects log lines from one goroutine for another.
type safeBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *safeBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, s)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}
