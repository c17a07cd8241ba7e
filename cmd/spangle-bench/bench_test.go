package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/blocks/seqfile"
)

func TestParseWrk(t *testing.T) {
	const good = wrkMarker + " requests=1000 duration_us=2000000 p50_us=150 p99_us=2500 max_us=9000 connect=0 read=1 write=0 timeout=2 status=3"
	tests := []struct {
		name    string
		out     string
		want    wrkStats
		wantErr bool
	}{
		{
			name: "among wrk output",
			out:  "Running 2s test @ http://127.0.0.1:1/\n  2 threads and 50 connections\nRequests/sec: 500.00\n" + good + "\n",
			want: wrkStats{Requests: 1000, Elapsed: 2 * time.Second, P50: 150 * time.Microsecond,
				P99: 2500 * time.Microsecond, Max: 9 * time.Millisecond, Errors: loadErrors{Read: 1, Timeout: 2, Status: 3}},
		},
		{name: "no result line", out: "Running 2s test\n", wantErr: true},
		{name: "missing field", out: wrkMarker + " requests=1 duration_us=1\n", wantErr: true},
		{name: "unknown field", out: good + " extra=1\n", wantErr: true},
		{name: "bad number", out: wrkMarker + " requests=x duration_us=1 p50_us=1 p99_us=1 max_us=1 connect=0 read=0 write=0 timeout=0 status=0\n", wantErr: true},
		{name: "zero duration", out: wrkMarker + " requests=0 duration_us=0 p50_us=0 p99_us=0 max_us=0 connect=0 read=0 write=0 timeout=0 status=0\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWrk(tt.out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseWrk: err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseWrk = %+v, want %+v", got, tt.want)
			}
			if !tt.wantErr && got.Errors.Total() != 6 {
				t.Errorf("Total = %d, want 6", got.Errors.Total())
			}
		})
	}
}

// TestScriptKeys checks that the keys the wrk script asks for are the keys
// gen writes: Lua's string.format and Go's fmt agree on "%0Nx" for
// non-negative integers, so it is enough that the script carries the same
// format and range.
func TestScriptKeys(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run("strict="+strconv.FormatBool(strict), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bench.lua")
			if err := writeWrkScript(path, 2_000_000, 16, "/bench/", strict); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			script := string(b)
			format := regexp.MustCompile(`local keyformat = "(.*)"`).FindStringSubmatch(script)
			n := regexp.MustCompile(`local n = (\d+)`).FindStringSubmatch(script)
			if format == nil || n == nil || n[1] != "2000000" {
				t.Fatalf("script lacks keyformat or n = 2000000:\n%s", script)
			}
			if !regexp.MustCompile(`math\.random\(0, n - 1\)`).MatchString(script) {
				t.Errorf("script does not draw from [0, n-1]")
			}
			if got := regexp.MustCompile(`(?m)^function response`).MatchString(script); got != strict {
				t.Errorf("response() defined = %v, want %v", got, strict)
			}
			for _, i := range []int64{0, 1, 255, 1_999_999} {
				if got, want := fmt.Sprintf(format[1], i), key(i, 16); got != want {
					t.Errorf("script key %d = %q, gen key %q", i, got, want)
				}
			}
			if got := key(255, 16); got != "00000000000000ff" {
				t.Errorf("key(255) = %q", got)
			}
		})
	}
}

func TestGenerateCache(t *testing.T) {
	root := filepath.Join(t.TempDir(), "source")
	p := genParams{Format: genFormat, DB: "db", Version: "7", Records: 1000, Files: 3, KeySize: 16, ValueSize: 40, Seed: 1}

	steps := []struct {
		name       string
		p          genParams
		wantCached bool
	}{
		{"first", p, false},
		{"same", p, true},
		{"value size changed", func() genParams { q := p; q.ValueSize = 50; return q }(), false},
		{"changed again", func() genParams { q := p; q.ValueSize = 50; return q }(), true},
		{"back", p, false},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			cached, err := generate(root, s.p)
			if err != nil {
				t.Fatal(err)
			}
			if cached != s.wantCached {
				t.Errorf("cached = %v, want %v", cached, s.wantCached)
			}
			checkDataset(t, root, s.p)
		})
	}
	t.Run("partial leftover", func(t *testing.T) {
		if err := os.MkdirAll(root+".partial/junk", 0o755); err != nil {
			t.Fatal(err)
		}
		q := p
		q.Files = 2
		if _, err := generate(root, q); err != nil {
			t.Fatal(err)
		}
		checkDataset(t, root, q)
		if _, err := os.Stat(root + ".partial"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("partial dir left behind: %v", err)
		}
	})
	t.Run("foreign dir", func(t *testing.T) {
		foreign := t.TempDir()
		if err := os.WriteFile(filepath.Join(foreign, "precious"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := generate(foreign, p); err == nil {
			t.Fatal("generate replaced a directory it did not write")
		}
		if _, err := os.Stat(filepath.Join(foreign, "precious")); err != nil {
			t.Error(err)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		q := p
		q.KeySize = 2 // 1000 records need 3 hex digits
		if _, err := generate(filepath.Join(t.TempDir(), "x"), q); err == nil {
			t.Error("key size too small was accepted")
		}
	})
}

// checkDataset reads root back and checks it holds exactly p's records:
// every key once, each with its value, spread over p.Files files.
func checkDataset(t testing.TB, root string, p genParams) {
	t.Helper()
	got, err := readParams(root)
	if err != nil || got != p {
		t.Fatalf("params file = %+v, %v; want %+v", got, err, p)
	}
	dir := filepath.Join(root, p.DB, p.Version)
	if _, err := os.Stat(filepath.Join(dir, "_SUCCESS")); err != nil {
		t.Fatal(err)
	}
	parts, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil || len(parts) != p.Files {
		t.Fatalf("%d part files (%v), want %d", len(parts), err, p.Files)
	}
	seen := make([]bool, p.Records)
	for _, part := range parts {
		f, err := os.Open(part)
		if err != nil {
			t.Fatal(err)
		}
		r, err := seqfile.NewReader(f, part)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			i, err := strconv.ParseInt(string(r.Key()), 16, 64)
			if err != nil || i < 0 || i >= p.Records || seen[i] || string(r.Key()) != key(i, p.KeySize) {
				t.Fatalf("%s: unexpected or repeated key %q", part, r.Key())
			}
			seen[i] = true
			if want := appendValue(nil, p.Seed, i, p.ValueSize); string(r.Value()) != string(want) {
				t.Fatalf("%s: key %q: value %q, want %q", part, r.Key(), r.Value(), want)
			}
		}
		f.Close()
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("key %d missing", i)
		}
	}
}

func TestValue(t *testing.T) {
	for _, size := range []int{0, 1, 100, 1000} {
		v := appendValue([]byte("prefix"), 1, 42, size)
		if len(v) != len("prefix")+size || string(v[:6]) != "prefix" {
			t.Fatalf("size %d: got %d bytes", size, len(v))
		}
		for _, c := range v {
			if c < ' ' || c > '~' {
				t.Fatalf("size %d: unprintable byte %q", size, c)
			}
		}
		if string(appendValue(nil, 1, 42, size)) != string(v[6:]) {
			t.Fatalf("size %d: value not deterministic", size)
		}
	}
	if string(appendValue(nil, 1, 1, 100)) == string(appendValue(nil, 1, 2, 100)) {
		t.Error("records 1 and 2 have the same value")
	}
}

func TestReportFinish(t *testing.T) {
	r := &report{Scenarios: []scenarioResult{
		{Name: "spangle", Loads: []loadResult{{Conns: 1, ReqPerSec: 50}, {Conns: 50, ReqPerSec: 300, Errors: loadErrors{Status: 2}}}},
		{Name: baselineName, Loads: []loadResult{{Conns: 1, ReqPerSec: 100}, {Conns: 50, ReqPerSec: 1000}}, Problems: []string{"exit 1"}},
	}}
	r.finish()
	if got := r.Scenarios[0].Loads[0].VsBaseline; got != 0.5 {
		t.Errorf("ratio at 1 = %v, want 0.5", got)
	}
	if got := r.Scenarios[0].Loads[1].VsBaseline; got != 0.3 {
		t.Errorf("ratio at 50 = %v, want 0.3", got)
	}
	if got := r.Scenarios[1].Loads[0].VsBaseline; got != 0 {
		t.Errorf("baseline's own ratio = %v, want 0", got)
	}
	if len(r.Failures) != 2 {
		t.Errorf("failures = %q, want the status errors and the problem", r.Failures)
	}
}

// TestMedianLoad: a scenario's row is its median round, by the ratio to
// the paired baseline load when there is one (else by req/s), with every
// round's figure and all rounds' errors.
func TestMedianLoad(t *testing.T) {
	paired := []loadResult{
		{ReqPerSec: 900, VsBaseline: 0.95, P99us: 1},
		{ReqPerSec: 700, VsBaseline: 0.80, P99us: 2, Errors: loadErrors{Status: 1}},
		{ReqPerSec: 800, VsBaseline: 0.90, P99us: 3, Errors: loadErrors{Read: 2}},
	}
	m := medianLoad(paired)
	if m.VsBaseline != 0.90 || m.ReqPerSec != 800 || m.P99us != 3 {
		t.Errorf("median of paired rounds %+v, want the 0.90 round", m)
	}
	if !slices.Equal(m.Rounds, []float64{0.95, 0.80, 0.90}) || m.Errors != (loadErrors{Status: 1, Read: 2}) {
		t.Errorf("rounds %v errors %+v, want every round's ratio in order and the errors summed", m.Rounds, m.Errors)
	}
	// Without a baseline the req/s decide: 0.80's round is the fastest.
	for i := range paired {
		paired[i].VsBaseline = 0
	}
	if m := medianLoad(paired); m.ReqPerSec != 800 || !slices.Equal(m.Rounds, []float64{900, 700, 800}) {
		t.Errorf("median by req/s %+v, want the 800 round", m)
	}
	if m := medianLoad(paired[:1]); m.Rounds != nil || m.ReqPerSec != 900 {
		t.Errorf("one round %+v, want it without rounds", m)
	}
	// An even count takes the lower middle.
	if m := medianLoad(paired[:2]); m.ReqPerSec != 700 {
		t.Errorf("median of two %+v, want the slower", m)
	}
}

// TestSetServing: start to serving is the median of the starts, which
// are kept when there are several.
func TestSetServing(t *testing.T) {
	var b buildResult
	b.setServing([]float64{1.3, 1.1, 1.2})
	if b.ServingSeconds != 1.2 || !slices.Equal(b.ServingRounds, []float64{1.3, 1.1, 1.2}) {
		t.Errorf("three starts: %v %v, want 1.2 and all three", b.ServingSeconds, b.ServingRounds)
	}
	b = buildResult{}
	b.setServing([]float64{0.9})
	if b.ServingSeconds != 0.9 || b.ServingRounds != nil {
		t.Errorf("one start: %v %v, want 0.9 and no rounds", b.ServingSeconds, b.ServingRounds)
	}
}

// TestVersusSequinsPaired: when both were paired with baseline loads, the
// GET ratio is the ratio of their ratios, so that the machine's drift
// between the two scenarios cancels.
func TestVersusSequinsPaired(t *testing.T) {
	r := &report{Scenarios: []scenarioResult{
		{Name: "spangle", Build: &buildResult{ServingSeconds: 1}, Loads: []loadResult{{Conns: 1, ReqPerSec: 60, VsBaseline: 0.9}}},
		{Name: sequinsName, Build: &buildResult{ServingSeconds: 1}, Loads: []loadResult{{Conns: 1, ReqPerSec: 30, VsBaseline: 0.6}}},
	}}
	r.finish()
	if got := r.VsSequins["spangle"].GET[1]; got < 1.499 || got > 1.501 {
		t.Errorf("paired GET ratio %v, want 0.9/0.6 = 1.5 (not 60/30)", got)
	}
	if r.Scenarios[0].Loads[0].VsBaseline != 0.9 {
		t.Errorf("finish replaced the paired ratio: %v", r.Scenarios[0].Loads[0].VsBaseline)
	}
}

// TestVersusSequins: with both scenarios, the report states spangle's
// GET rate, start-to-serving speed and RSS as multiples of sequins'.
func TestVersusSequins(t *testing.T) {
	r := &report{Scenarios: []scenarioResult{
		{Name: "spangle", Build: &buildResult{ServingSeconds: 2}, ServingRSSMiB: 100,
			Loads: []loadResult{{Conns: 1, ReqPerSec: 60}, {Conns: 50, ReqPerSec: 300}}},
		{Name: sequinsName, Build: &buildResult{ServingSeconds: 3}, ServingRSSMiB: 200,
			Loads: []loadResult{{Conns: 1, ReqPerSec: 50}, {Conns: 50, ReqPerSec: 200}}},
	}}
	r.finish()
	v := r.VsSequins["spangle"]
	if v == nil || v.StartSpeed != 1.5 || v.RSS != 0.5 || v.GET[1] != 1.2 || v.GET[50] != 1.5 {
		t.Fatalf("vs sequins %+v, want start 1.5x, RSS 0.5x, GET 1.2x and 1.5x", v)
	}
	var out strings.Builder
	r.printSequins(&out)
	if !strings.Contains(out.String(), "spangle vs sequins (same run, same data): start to serving 1.50x") || !strings.Contains(out.String(), "GET at 50 conns 1.50x") {
		t.Errorf("printed %q", out.String())
	}
	// Without sequins: nothing.
	r = &report{Scenarios: r.Scenarios[:1]}
	r.finish()
	if r.VsSequins != nil {
		t.Errorf("vs sequins without a sequins run: %+v", r.VsSequins)
	}
}

func TestIntList(t *testing.T) {
	var l intList
	if err := l.Set("1, 50,200"); err != nil || l.String() != "1,50,200" {
		t.Errorf("Set = %v, %q", err, l.String())
	}
	for _, bad := range []string{"", "0", "1,,2", "x"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

func TestBaselineHandler(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(baselineHandler))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/bench/0000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || len(body) != 100 {
		t.Errorf("GET = %s, %d bytes, %v; want 200 with 100 bytes", resp.Status, len(body), err)
	}
}

func TestSetCPU(t *testing.T) {
	l := loadResult{Requests: 10_000}
	l.setCPU(time.Second, time.Duration(runtime.NumCPU())*time.Second/4, time.Second)
	if l.ServerCPUus != 100 || l.OtherCPUPct != 25 {
		t.Errorf("ServerCPUus, OtherCPUPct = %v, %v; want 100, 25", l.ServerCPUus, l.OtherCPUPct)
	}
	l.setCPU(0, -time.Second, time.Second) // clock ticks can make it negative
	if l.OtherCPUPct != 0 {
		t.Errorf("OtherCPUPct = %v, want 0", l.OtherCPUPct)
	}
}

func TestSampleCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s, err := sampleCPU(os.Getpid())
	if err != nil || s.busy <= 0 || s.proc < 0 {
		t.Errorf("sampleCPU = %+v, %v", s, err)
	}
	if kib, err := memKiB(os.Getpid(), "VmHWM"); err != nil || kib <= 0 {
		t.Errorf("memKiB(VmHWM) = %d, %v", kib, err)
	}
}

// TestServeArgs: the bench's spangle listens for NATS on a free
// loopback address, not the default 4222 another spangle may hold on a
// shared machine (the spangle and https scenarios failed to start).
func TestServeArgs(t *testing.T) {
	b := &bench{source: "src"}
	args := b.serveArgs("dir", "dir/spangle.toml", "127.0.0.1:8080")
	i := slices.Index(args, "--nats-listen")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("args %q: no --nats-listen", args)
	}
	host, port, err := net.SplitHostPort(args[i+1])
	if err != nil || host != "127.0.0.1" || port == "4222" || port == "0" {
		t.Errorf("--nats-listen %q: want a free loopback port", args[i+1])
	}
}
