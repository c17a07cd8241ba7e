package main

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readers read key-0 … key-(keys-1) of db d from cluster nodes over HTTP
// until stopped, each in its own loop: every answer is checked (readKey),
// and no reader may see its node's version go back. They count their full
// passes over the keys and record every failure with its time and the
// phase it happened in.
type readers struct {
	t        *testing.T
	keys     int
	stop     atomic.Bool
	wg       sync.WaitGroup
	sweeps   []atomic.Int64 // per reader: full passes over the keys
	requests atomic.Int64
	phase    atomic.Value // string

	mu       sync.Mutex
	failures []readFailure
}

// readFailure is one failed read.
type readFailure struct {
	at    time.Time
	phase string
	err   error
}

func (f readFailure) String() string { return fmt.Sprintf("%s: %v", f.phase, f.err) }

// startReaders starts perNode readers on each of targets; they stop at the
// end of the test at the latest (before the processes are killed).
func startReaders(t *testing.T, client *http.Client, targets []*clusterProc, perNode, keys int, phase string) *readers {
	r := &readers{t: t, keys: keys, sweeps: make([]atomic.Int64, len(targets)*perNode)}
	r.phase.Store(phase)
	for i := range r.sweeps {
		n := targets[i%len(targets)]
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			last := ""
			for k := i; !r.stop.Load(); k++ {
				if k%keys == 0 {
					r.sweeps[i].Add(1)
				}
				err := readKey(client, n, k%keys, &last)
				r.requests.Add(1)
				if err != nil {
					r.mu.Lock()
					r.failures = append(r.failures, readFailure{time.Now(), r.phase.Load().(string), err})
					r.mu.Unlock()
				}
			}
		}()
	}
	t.Cleanup(r.halt)
	return r
}

// setPhase files later failures under phase.
func (r *readers) setPhase(phase string) { r.phase.Store(phase) }

// waitSweeps waits until every reader has made n more full passes.
func (r *readers) waitSweeps(what string, n int64) {
	r.t.Helper()
	base := make([]int64, len(r.sweeps))
	for i := range r.sweeps {
		base[i] = r.sweeps[i].Load()
	}
	waitFor(r.t, what, func() error {
		for i := range r.sweeps {
			if got := r.sweeps[i].Load() - base[i]; got < n {
				return fmt.Errorf("reader %d: %d passes", i, got)
			}
		}
		return nil
	})
}

// halt stops the readers and waits for them.
func (r *readers) halt() {
	r.stop.Store(true)
	r.wg.Wait()
}

// takeFailures returns the failures so far and forgets them.
func (r *readers) takeFailures() []readFailure {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.failures
	r.failures = nil
	return f
}

// noFailures reports the failures so far as errors (the first 20) and
// forgets them.
func (r *readers) noFailures() {
	r.t.Helper()
	for i, f := range r.takeFailures() {
		if i == 20 {
			r.t.Errorf("... and more")
			break
		}
		r.t.Error(f)
	}
}

// allKeys checks that every key is readable from every node of nodes with
// version v's value, and counts the proxied answers.
func allKeys(client *http.Client, nodes []*clusterProc, keys int, v string) (proxied int, err error) {
	for _, n := range nodes {
		for k := range keys {
			val, ver, px, err := clusterGet(client, n.base, k)
			if err != nil {
				return 0, err
			}
			if ver != v || val != fmt.Sprintf("%s:%d", v, k) {
				return 0, fmt.Errorf("node %d key-%d: %q version %q, want version %s", n.id, k, val, ver, v)
			}
			if px {
				proxied++
			}
		}
	}
	return proxied, nil
}
