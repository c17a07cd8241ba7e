package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// wrkScript asks for random existing keys: key i of n, formatted with
// keyFormat exactly as gen.go formats it, under prefix. Every wrk thread
// seeds its own generator, and done() prints one line that parseWrk reads
// (latencies in microseconds).
//
// A strict script counts every answer whose status is not 200 in
// status=. It needs a Lua response() callback, which costs wrk (and so,
// on a small machine, the server) about 15 % of the throughput, so
// measured loads use the lean script, whose status= is wrk's own count of
// answers with status 400 or above, and warm-ups use the strict one.
var wrkScript = template.Must(template.New("bench.lua").Parse(`-- Written by spangle-bench; rewritten on every run.
local n = {{.N}}
local keyformat = "{{.KeyFormat}}"
local prefix = "{{.Prefix}}"

function request()
  return wrk.format("GET", prefix .. string.format(keyformat, math.random(0, n - 1)))
end
` + wrkScriptCommon))

// zipfScript asks for keys with a Zipf distribution of exponent {{.Theta}}
// over n keys (YCSB's "zipfian", by Gray et al.'s method: O(n) once per
// thread for zeta(n), then O(1) per request). The ranks are spread over
// the keyspace by a multiplication modulo n with a prime that does not
// divide n (zipfPrime), so that the hot keys fall in different blocks
// and partitions rather than at the start of the first one.
var zipfScript = template.Must(template.New("zipf.lua").Parse(`-- Written by spangle-bench; rewritten on every run.
local n = {{.N}}
local keyformat = "{{.KeyFormat}}"
local prefix = "{{.Prefix}}"
local theta = {{.Theta}}
local zetan = 0
for i = 1, n do zetan = zetan + 1 / (i ^ theta) end
local zeta2 = 1 + 0.5 ^ theta
local alpha = 1 / (1 - theta)
local eta = (1 - (2 / n) ^ (1 - theta)) / (1 - zeta2 / zetan)

local function rank()
  local u = math.random()
  local uz = u * zetan
  if uz < 1 then return 0 end
  if uz < zeta2 then return 1 end
  return math.min(n - 1, math.floor(n * (eta * u - eta + 1) ^ alpha))
end

function request()
  return wrk.format("GET", prefix .. string.format(keyformat, (rank() * {{.Prime}}) % n))
end
` + wrkScriptCommon))

// zipfTheta is the Zipf exponent of the skewed load: YCSB's default.
const zipfTheta = 0.99

// zipfPrime spreads the Zipf ranks over the keyspace; the rank times it
// stays below 2^53 (exact in Lua's numbers) for n below 2^33.
const zipfPrime = 1000003

// writeZipfScript writes the Zipf load script for n keys of keySize
// under prefix to path.
func writeZipfScript(path string, n int64, keySize int, prefix string) error {
	if n%zipfPrime == 0 || n >= 1<<33 {
		return fmt.Errorf("zipf: %d records: a multiple of %d or too many for the script", n, zipfPrime)
	}
	var b bytes.Buffer
	err := zipfScript.Execute(&b, map[string]any{
		"N": n, "KeyFormat": keyFormat(keySize), "Prefix": prefix, "Marker": wrkMarker, "Strict": false,
		"Theta": zipfTheta, "Prime": zipfPrime,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// wrkScriptCommon is the part of every load script after its keys and
// request(): per-thread seeds, the strict status count and done()'s line.
const wrkScriptCommon = `local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  math.randomseed(1000003 * id)
  non200 = 0
end

{{if .Strict}}
function response(status, headers, body)
  if status ~= 200 then
    non200 = non200 + 1
  end
end
{{end}}
function done(summary, latency, requests)
  local e = summary.errors
  local status = e.status
{{- if .Strict}}
  status = 0
  for _, t in ipairs(threads) do
    status = status + t:get("non200")
  end
{{- end}}
  io.write(string.format(
    "{{.Marker}} requests=%d duration_us=%d p50_us=%d p99_us=%d max_us=%d connect=%d read=%d write=%d timeout=%d status=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.timeout, status))
end
`

// wrkMarker starts the line the script's done() prints.
const wrkMarker = "spangle-bench-result:"

// writeWrkScript writes the load script for n keys of keySize under prefix
// (e.g. "/bench/") to path; strict as described at wrkScript.
func writeWrkScript(path string, n int64, keySize int, prefix string, strict bool) error {
	var b bytes.Buffer
	err := wrkScript.Execute(&b, map[string]any{
		"N": n, "KeyFormat": keyFormat(keySize), "Prefix": prefix, "Marker": wrkMarker, "Strict": strict,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// wrkStats is what the script's done() reports for one run.
type wrkStats struct {
	Requests int64
	Elapsed  time.Duration
	P50, P99 time.Duration
	Max      time.Duration
	Errors   loadErrors
	CPU      time.Duration // wrk's own user and system time; set by runWrk
}

// loadErrors counts failed requests by kind. Status counts answers with
// a bad status (see wrkScript for which); the others are wrk's socket
// errors.
type loadErrors struct {
	Connect int64 `json:"connect"`
	Read    int64 `json:"read"`
	Write   int64 `json:"write"`
	Timeout int64 `json:"timeout"`
	Status  int64 `json:"status"`
}

// Total is the number of failed requests of any kind.
func (e loadErrors) Total() int64 { return e.Connect + e.Read + e.Write + e.Timeout + e.Status }

// add returns the sum of e and f.
func (e loadErrors) add(f loadErrors) loadErrors {
	return loadErrors{Connect: e.Connect + f.Connect, Read: e.Read + f.Read, Write: e.Write + f.Write,
		Timeout: e.Timeout + f.Timeout, Status: e.Status + f.Status}
}

func (e loadErrors) String() string {
	if e.Total() == 0 {
		return "0"
	}
	var parts []string
	for _, f := range []struct {
		name string
		n    int64
	}{{"status", e.Status}, {"connect", e.Connect}, {"read", e.Read}, {"write", e.Write}, {"timeout", e.Timeout}} {
		if f.n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", f.name, f.n))
		}
	}
	return strings.Join(parts, ",")
}

// parseWrk finds the script's result line in wrk's output.
func parseWrk(out string) (wrkStats, error) {
	var line string
	for l := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), wrkMarker); ok {
			line = rest
		}
	}
	if line == "" {
		return wrkStats{}, errors.New("wrk: no result line in output")
	}
	fields := map[string]*int64{}
	var s wrkStats
	var elapsed, p50, p99, maxUS int64
	fields["requests"] = &s.Requests
	fields["duration_us"] = &elapsed
	fields["p50_us"] = &p50
	fields["p99_us"] = &p99
	fields["max_us"] = &maxUS
	fields["connect"] = &s.Errors.Connect
	fields["read"] = &s.Errors.Read
	fields["write"] = &s.Errors.Write
	fields["timeout"] = &s.Errors.Timeout
	fields["status"] = &s.Errors.Status
	seen := 0
	for _, kv := range strings.Fields(line) {
		k, v, ok := strings.Cut(kv, "=")
		p := fields[k]
		if !ok || p == nil {
			return wrkStats{}, fmt.Errorf("wrk: unexpected field %q in result line", kv)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return wrkStats{}, fmt.Errorf("wrk: field %q: %w", k, err)
		}
		*p = n
		seen++
	}
	if seen != len(fields) {
		return wrkStats{}, fmt.Errorf("wrk: result line has %d of %d fields: %q", seen, len(fields), line)
	}
	if elapsed <= 0 {
		return wrkStats{}, fmt.Errorf("wrk: result line has no duration: %q", line)
	}
	s.Elapsed = time.Duration(elapsed) * time.Microsecond
	s.P50 = time.Duration(p50) * time.Microsecond
	s.P99 = time.Duration(p99) * time.Microsecond
	s.Max = time.Duration(maxUS) * time.Microsecond
	return s, nil
}

// wrkRun is one wrk invocation, or with H2 one of h2load (h2load.go).
type wrkRun struct {
	Script   string        // path of the script written by writeWrkScript
	URL      string        // base URL, e.g. "http://127.0.0.1:8080/"
	Conns    int           // connections; threads are min(Conns, 2)
	Duration time.Duration // whole seconds, at least 1
	// H2 makes it an HTTP/2 load by h2load: one connection and thread,
	// Conns concurrent streams.
	H2 bool
}

// threads is the number of wrk (or h2load) threads for the run.
func (r wrkRun) threads() int {
	if r.H2 {
		return 1
	}
	return min(r.Conns, 2)
}

// args is wrk's command line, without the program name.
func (r wrkRun) args() []string {
	secs := max(1, int(r.Duration.Round(time.Second)/time.Second))
	return []string{
		"-t", strconv.Itoa(r.threads()), "-c", strconv.Itoa(r.Conns),
		"-d", strconv.Itoa(secs) + "s", "--timeout", "2s",
		"-s", r.Script, r.URL,
	}
}

// runWrk runs wrk (found at path) and returns what its script reported. It
// blocks for about r.Duration; cancelling ctx kills wrk.
func runWrk(ctx context.Context, path string, r wrkRun) (wrkStats, error) {
	cmd := exec.CommandContext(ctx, path, r.args()...)
	cmd.SysProcAttr = childSysProcAttr()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkStats{}, fmt.Errorf("wrk %s: %w\n%s", strings.Join(r.args(), " "), err, out)
	}
	s, err := parseWrk(string(out))
	if err != nil {
		return wrkStats{}, fmt.Errorf("%w\nwrk output:\n%s", err, out)
	}
	s.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return s, nil
}

// lookWrk finds wrk on PATH or says how to install it.
func lookWrk() (string, error) {
	p, err := exec.LookPath("wrk")
	if err != nil {
		return "", errors.New("wrk not found on PATH: install it (Debian: apt-get install -y wrk; `make bench` does this)")
	}
	return p, nil
}

// wrkVersion returns wrk's version line, or "" if it cannot tell.
func wrkVersion(path string) string {
	out, _ := exec.Command(path, "--version").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	line, _, _ = strings.Cut(line, " Copyright")
	return strings.TrimPrefix(strings.TrimSpace(line), "wrk ")
}
