package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout is how long stop waits after SIGTERM before SIGKILL.
const stopTimeout = 10 * time.Second

// child is a started process. A goroutine owned by the child waits for it
// to exit; stop ends the process and that goroutine. Not safe for
// concurrent use.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	started time.Time
	done    chan struct{} // closed once the process has exited and err is set
	err     error         // the exit status; read only after done is closed
	stopped bool
	told    bool // exited has reported the exit
}

// startChild starts path with args in the directory dir (so that it
// picks up no config file from where this program was started), its
// stdout and stderr written to a new file at logPath. The process is put in its own process group, so a
// Ctrl-C reaches only this program, which then stops it; on Linux it is
// also killed if this program dies.
func startChild(name, dir, logPath, path string, args ...string) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = childSysProcAttr()
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited returns nil while the child runs, and an error saying how it
// ended (with the end of its log) once it has exited.
func (c *child) exited() error {
	select {
	case <-c.done:
		c.told = true
		return fmt.Errorf("%s exited unexpectedly (%v); end of %s:\n%s", c.name, c.err, c.logPath, c.logTail(20))
	default:
		return nil
	}
}

// stop sends SIGTERM, waits up to stopTimeout, then sends SIGKILL, and
// waits for the exit. It returns an error if the child did not exit
// cleanly after SIGTERM, or had exited before and exited has not said so
// yet; nil otherwise. It is idempotent: later calls return nil at once.
func (c *child) stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	select {
	case <-c.done:
		if c.told {
			return nil
		}
		return c.exited()
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-c.done:
		if c.err != nil {
			return fmt.Errorf("%s: exit after SIGTERM: %w", c.name, c.err)
		}
		return nil
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s: did not exit within %v of SIGTERM; killed", c.name, stopTimeout)
	}
}

// logTail returns up to the last n lines of the child's log.
func (c *child) logTail(n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// memKiB reads a field such as "VmHWM" or "VmRSS" (in KiB) from
// /proc/<pid>/status.
func memKiB(pid int, field string) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		v := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB"))
		return strconv.ParseInt(v, 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// freeAddr returns a loopback address with a port that was free a moment
// ago, below Linux's ephemeral range (32768 on): with a hundred nodes
// opening outbound connections, a port from that range that is free now
// is soon some connection's, and the node meant to listen on it fails.
func freeAddr() (string, error) {
	givenMu.Lock()
	defer givenMu.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if given[port] {
			continue // handed out already: its process may not listen yet
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		given[port] = true
		return l.Addr().String(), nil
	}
	return "", errors.New("no free port in 20000-31999")
}

// given holds the ports freeAddr handed out.
var (
	givenMu sync.Mutex
	given   = map[int]bool{}
)

// errNotYet is returned by a poll condition that is not met yet.
var errNotYet = errors.New("not yet")

// pollUntil calls cond every interval until it returns nil or an error
// other than errNotYet, c exits, ctx ends, or timeout passes.
func pollUntil(ctx context.Context, c *child, timeout, interval time.Duration, what string, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		last := cond()
		if !errors.Is(last, errNotYet) {
			return last
		}
		if err := c.exited(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, context.Cause(ctx), last)
		case <-tick.C:
		}
	}
}

// clockTick is the unit of CPU times in /proc (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuSample is cumulative CPU time at one moment: the whole machine's busy
// time (all CPUs, steal included) and one process's.
type cpuSample struct {
	busy, proc time.Duration
}

// sampleCPU reads /proc/stat and /proc/<pid>/stat. On error (not Linux, or
// pid gone) it returns the zero sample and the error.
func sampleCPU(pid int) (cpuSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return cpuSample{}, errors.New("unexpected /proc/stat")
	}
	var s cpuSample
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return cpuSample{}, err
		}
		s.busy += time.Duration(n) * clockTick
	}
	b, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return cpuSample{}, err
	}
	// After the command name, which may hold anything: state ppid … utime
	// (index 11) stime (12).
	f = strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return cpuSample{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return cpuSample{}, err
		}
		s.proc += time.Duration(n) * clockTick
	}
	return s, nil
}
