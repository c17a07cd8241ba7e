// Package deploy holds no code: its tests run the files of
// examples/deploy (the container image, the systemd unit, the alerting
// rules and the dashboard) with the real tools and a real spangle binary.
// A test whose tool is missing skips and says which package provides it
// (make deps-deploy installs them; make deps-test calls it, and so does CI).
package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// testTimeout bounds every wait: a loaded CI machine starts a node in
// seconds, builds the example data in well under one.
const testTimeout = 90 * time.Second

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
		code = 1
	}
	os.Exit(code)
}

// repo is the repository's root, relative to this package.
var repo = filepath.Join("..", "..")

// exampleData returns a source root holding a copy of the example data's
// baby-names version 1, made for the test: what a user drops into
// examples/data to try make run cannot change what the tests see.
func exampleData(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(repo, "examples", "data", "baby-names", "1")
	if err := os.CopyFS(filepath.Join(root, "baby-names", "1"), os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	// Readable by others, as a checkout is: the image's user reads a copy.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// buildBinary builds cmd/spangle once per test run as make build does:
// static (CGO_ENABLED=0), so that it also runs in the scratch image.
func buildBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "spangle-deploy-test-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "spangle")
		cmd := exec.Command("go", "build", "-trimpath", "-o", binPath, "./cmd/spangle")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// needTool skips the test when name is not on PATH.
func needTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found (Debian package %s; make deps-deploy installs it)", name, pkg)
	}
	return p
}

// logBuffer keeps a process's log lines, safe for concurrent use.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// node is a spangle serve process started by startNode.
type node struct {
	cmd  *exec.Cmd
	logs *logBuffer
	http string        // http://host:port, from the "spangle serving" log line
	done chan struct{} // closed once the process exited and err is set
	err  error         // Wait's
}

// startNode starts bin with args plus a JSON log on stderr, and returns
// once it logged the address it serves on (not once it is ready). The
// process is killed on cleanup if still running.
func startNode(t testing.TB, env []string, bin string, args ...string) *node {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--log-format", "json")...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{cmd: cmd, logs: &logBuffer{}, done: make(chan struct{})}
	bound := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			n.logs.add(sc.Text())
			var line struct{ Msg, Bind string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "spangle serving" {
				select {
				case bound <- "http://" + line.Bind:
				default:
				}
			}
		}
	})
	go func() { // joined by the cleanup
		wg.Wait() // the pipe is read to its end before Wait closes it
		n.err = cmd.Wait()
		close(n.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // ErrProcessDone once it exited
		<-n.done
	})
	select {
	case n.http = <-bound:
	case <-n.done:
		t.Fatalf("spangle exited before serving: %v\n%s", n.err, n.logs)
	case <-time.After(testTimeout):
		t.Fatalf("spangle logged no address within %v:\n%s", testTimeout, n.logs)
	}
	return n
}

// stop sends SIGTERM and requires a clean exit within testTimeout.
func (n *node) stop(t testing.TB) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.wait(t)
}

// wait requires a clean exit within testTimeout.
func (n *node) wait(t testing.TB) {
	t.Helper()
	select {
	case <-n.done:
		if n.err != nil {
			t.Fatalf("exit: %v\n%s", n.err, n.logs)
		}
	case <-time.After(testTimeout):
		t.Fatalf("still running %v after SIGTERM:\n%s", testTimeout, n.logs)
	}
}
