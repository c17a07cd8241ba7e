package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HTTP/2 loads. wrk speaks HTTP/1.1 only, and spangle answers HTTP/1.1
// through its fast path: HTTP/2 (h2 by ALPN over TLS; spangle answers
// no h2c) is still net/http's. h2load (Debian package nghttp2-client)
// loads it: the https scenario's "https h2" rows, against the bare TLS
// handler loaded alike.
//
// h2load asks every connection for the URIs of its list in the same
// order, so that 50 connections would ask for each key some 50 times
// at once (answered from the cache after the first). An h2 load is
// therefore one connection carrying the row's connection count as
// concurrent streams (-c 1 -m N), which is how HTTP/2 clients carry
// concurrency, over a list of uniformly random keys written afresh for
// each load (a list read again would be answered from the cache the
// second time).

// h2URIs is how many keys an h2 load's list holds: more than a load of
// a few seconds asks for on a small machine.
const h2URIs = 400_000

// h2Seq numbers the lists, each of its own keys.
var h2Seq uint64

// writeH2URIs writes an h2load input file to path: url+db+"/"+key for
// n keys of p's dataset drawn uniformly with seed (h2load takes the
// scheme, host and port of the first line only).
func writeH2URIs(path, url string, p genParams, n int, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	r := rand.New(rand.NewPCG(seed, 0x68326c6f6164)) // "h2load"
	format := keyFormat(p.KeySize)
	for i := range n {
		if i == 0 {
			w.WriteString(strings.TrimSuffix(url, "/"))
		}
		fmt.Fprintf(w, "/%s/"+format+"\n", p.DB, r.Int64N(p.Records))
	}
	return errors.Join(w.Flush(), f.Close())
}

// h2Args is h2load's command line for r, without the program name: one
// connection and thread, r.Conns streams, for r.Duration, the keys of
// r.Script (an input file), each request's latency logged to log.
func h2Args(r wrkRun, log string) []string {
	secs := max(1, int(r.Duration.Round(time.Second)/time.Second))
	return []string{"-c", "1", "-t", "1", "-m", strconv.Itoa(r.Conns), "-D", strconv.Itoa(secs),
		"--log-file", log, "-i", r.Script}
}

// runH2load runs an h2 load of r (h2load found at path; r.Script
// unused: the load's list of keys of p is written to dir first) and
// returns what it measured, wrk's figures.
func runH2load(ctx context.Context, path, dir string, p genParams, r wrkRun) (wrkStats, error) {
	h2Seq++
	r.Script = filepath.Join(dir, "h2load-uris.txt")
	if err := writeH2URIs(r.Script, r.URL, p, h2URIs, h2Seq); err != nil {
		return wrkStats{}, err
	}
	defer os.Remove(r.Script)
	log := filepath.Join(dir, "h2load-requests.log")
	defer os.Remove(log)
	args := h2Args(r, log)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = childSysProcAttr()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkStats{}, fmt.Errorf("h2load %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	lat, err := os.ReadFile(log)
	if err != nil {
		return wrkStats{}, err
	}
	s, err := parseH2load(string(out), string(lat))
	if err != nil {
		return wrkStats{}, fmt.Errorf("%w\nh2load output:\n%s", err, out)
	}
	s.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return s, nil
}

var (
	h2Finished = regexp.MustCompile(`(?m)^finished in [^,]+, ([0-9.]+) req/s`)
	h2Requests = regexp.MustCompile(`(?m)^requests: \d+ total, \d+ started, (\d+) done, \d+ succeeded, \d+ failed, (\d+) errored, (\d+) timeout`)
	h2Statuses = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
)

// parseH2load reads h2load's summary (out) and its per-request log
// (lines of start time, status and microseconds, tab-separated) into
// wrk's figures: requests done, over the main duration (done / req/s),
// latencies from the log, answers other than 2xx as Status errors,
// errored requests as Read and timed-out ones as Timeout.
func parseH2load(out, log string) (wrkStats, error) {
	f, rq, st := h2Finished.FindStringSubmatch(out), h2Requests.FindStringSubmatch(out), h2Statuses.FindStringSubmatch(out)
	if f == nil || rq == nil || st == nil {
		return wrkStats{}, errors.New("h2load: no summary in output")
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	rps, err := strconv.ParseFloat(f[1], 64)
	if err != nil || rps <= 0 {
		return wrkStats{}, fmt.Errorf("h2load: no request rate in %q", f[0])
	}
	s := wrkStats{Requests: num(rq[1])}
	s.Elapsed = time.Duration(float64(s.Requests) / rps * float64(time.Second))
	s.Errors.Read, s.Errors.Timeout = num(rq[2]), num(rq[3])
	s.Errors.Status = num(st[2]) + num(st[3]) + num(st[4])
	var us []int64
	for line := range strings.Lines(log) {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		if n, err := strconv.ParseInt(fields[2], 10, 64); err == nil {
			us = append(us, n)
		}
	}
	if len(us) == 0 {
		return wrkStats{}, errors.New("h2load: no request in its log")
	}
	slices.Sort(us)
	at := func(q float64) time.Duration {
		return time.Duration(us[min(len(us)-1, int(q*float64(len(us))))]) * time.Microsecond
	}
	s.P50, s.P99, s.Max = at(0.50), at(0.99), at(1)
	return s, nil
}

// lookH2load finds h2load on PATH, or returns "".
func lookH2load() string {
	p, err := exec.LookPath("h2load")
	if err != nil {
		return ""
	}
	return p
}
