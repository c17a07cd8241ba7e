package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// h2loadOut is h2load 1.52's summary of a timed load, as printed.
const h2loadOut = `starting benchmark...
spawning thread #0: 1 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for measurements.
Application protocol: h2
finished in 2.08s, 28591.00 req/s, 3.33MB/s
requests: 57182 total, 57232 started, 57182 done, 57170 succeeded, 12 failed, 7 errored, 2 timeout
status codes: 57170 2xx, 1 3xx, 3 4xx, 1 5xx
traffic: 6.65MB (6976354) total, 223.45KB (228817) headers (space savings 95.83%), 5.45MB (5718200) data
                     min         max         mean         sd        +/- sd
time for request:       80us    254.47ms      1.64ms      7.90ms    99.34%
`

func TestParseH2load(t *testing.T) {
	var log strings.Builder
	for i := range 100 { // latencies of 1 to 100 µs, out of order
		fmt.Fprintf(&log, "1795871595326324\t200\t%d\n", (i*37)%100+1)
	}
	lat := log.String()
	s, err := parseH2load(h2loadOut, lat)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkStats{Requests: 57182, Elapsed: time.Duration(57182 / 28591.0 * float64(time.Second)),
		P50: 51 * time.Microsecond, P99: 100 * time.Microsecond, Max: 100 * time.Microsecond,
		Errors: loadErrors{Read: 7, Timeout: 2, Status: 5}}
	if s != want {
		t.Errorf("parseH2load = %+v, want %+v", s, want)
	}
	for name, bad := range map[string][2]string{
		"no summary":  {"starting benchmark...\n", lat},
		"no requests": {strings.Replace(h2loadOut, "28591.00 req/s", "0.00 req/s", 1), lat},
		"empty log":   {h2loadOut, ""},
	} {
		if _, err := parseH2load(bad[0], bad[1]); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestWriteH2URIs(t *testing.T) {
	p := genParams{DB: "bench", Records: 1000, KeySize: 16}
	path := filepath.Join(t.TempDir(), "uris")
	if err := writeH2URIs(path, "https://127.0.0.1:8443/", p, 500, 1); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		line := sc.Text()
		if i == 0 {
			rest, ok := strings.CutPrefix(line, "https://127.0.0.1:8443/bench/")
			if !ok {
				t.Fatalf("first line %q: want the URL's scheme, host and port", line)
			}
			line = "/bench/" + rest
		}
		k, ok := strings.CutPrefix(line, "/bench/")
		if !ok || len(k) != 16 || strings.Trim(k, "0123456789abcdef") != "" {
			t.Fatalf("line %d: %q is not a key of the dataset", i, line)
		}
		seen[k] = true
	}
	if len(seen) < 300 { // 500 draws of 1000 keys: about 390 distinct
		t.Errorf("%d distinct keys of 500: not random", len(seen))
	}
}

// TestH2load runs a real h2load against the baseline over TLS (HTTP/2
// by ALPN): the rows' figures come out of it.
func TestH2load(t *testing.T) {
	path := lookH2load()
	if path == "" {
		t.Skip("h2load not found (Debian package nghttp2-client; make deps-bench)")
	}
	dir := t.TempDir()
	cert, key, err := writeBenchCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveBaseline(ctx, addr, false, cert, key) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's own server
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the baseline does not listen: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := genParams{DB: "bench", Records: 1000, KeySize: 16}
	s, err := runH2load(context.Background(), path, dir, p, wrkRun{URL: "https://" + addr + "/", Conns: 4, Duration: time.Second, H2: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests == 0 || s.Errors.Total() != 0 || s.P99 <= 0 || s.Elapsed <= 0 {
		t.Errorf("h2load: %+v; want requests, no errors, latencies", s)
	}
	if _, err := os.Stat(filepath.Join(dir, "h2load-uris.txt")); !os.IsNotExist(err) {
		t.Errorf("the list of keys was left behind: %v", err)
	}
}
