package edge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/node/nodetest"
)

// accessLine is a JSON access log line, as a log shipper decodes it.
type accessLine struct {
	Time       time.Time `json:"time"`
	Client     string    `json:"client"`
	Remote     string    `json:"remote"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	Proto      string    `json:"proto"`
	TLS        bool      `json:"tls"`
	Status     int       `json:"status"`
	Bytes      int64     `json:"bytes"`
	DurationUS int64     `json:"duration_us"`
	DB         string    `json:"db"`
	Version    string    `json:"version"`
	Hot        bool      `json:"hot"`
	ProxiedTo  string    `json:"proxied_to"`
	Keys       int       `json:"keys"`
	UserAgent  string    `json:"user_agent"`
	Referer    string    `json:"referer"`
}

// startAccessLog starts an access log with cfg changed by opt (Path in
// a temporary directory, unless opt sets it) and shuts it down on
// cleanup.
func startAccessLog(t testing.TB, reg prometheus.Registerer, opt func(*edge.AccessLogConfig)) (*edge.AccessLog, string) {
	t.Helper()
	cfg := edge.DefaultAccessLogConfig()
	cfg.Path = filepath.Join(t.TempDir(), "access.log")
	cfg.Registerer = reg
	if opt != nil {
		opt(&cfg)
	}
	l, err := edge.NewAccessLog(cfg, "http")
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Shutdown(ctx); err != nil {
			t.Errorf("access log Shutdown: %v", err)
		}
	})
	return l, cfg.Path
}

// flush waits for l's queued lines to be written.
func flush(t testing.TB, l *edge.AccessLog) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// decodeJSONLines decodes every line of path with a JSON decoder,
// failing on anything that is not one object a line.
func decodeJSONLines(t testing.TB, path string) []accessLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []accessLine
	for i, raw := range bytes.SplitAfter(data, []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		if raw[len(raw)-1] != '\n' {
			t.Fatalf("line %d has no end: %q", i+1, raw)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var l accessLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, raw)
		}
		if dec.More() {
			t.Fatalf("line %d holds more than one object: %s", i+1, raw)
		}
		lines = append(lines, l)
	}
	return lines
}

// accessServer is a real node on a version of "d" (keys key-0…key-99)
// behind an edge.Server with an access log.
func accessServer(t *testing.T, opt func(*edge.AccessLogConfig)) (*testServer, *edge.AccessLog, string) {
	t.Helper()
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "1", 2, nodetest.Numbered("1", 100))
	n := startNode(t, root)
	reg := prometheus.NewRegistry()
	l, path := startAccessLog(t, reg, opt)
	ts := startServer(t, n, func(c *edge.Config) {
		c.Registerer = reg
		c.AccessLog = l
	})
	ts.registry = reg
	return ts, l, path
}

// doAll sends the requests of every door: lookups (found, missing, HEAD,
// twice for the hot cache), a batch, a listing, status pages, health,
// metrics, a method not allowed. It returns how many.
func doAll(t *testing.T, ts *testServer) int {
	t.Helper()
	reqs := []struct {
		method, path string
		status       int
	}{
		{"GET", "/d/key-1", 200},
		{"GET", "/d/key-1", 200}, // admitted to the hot cache
		{"GET", "/d/key-1", 200}, // from the hot cache
		{"GET", "/d/nope", 404},
		{"HEAD", "/d/key-2", 200},
		{"GET", "/d/?prefix=key-1&limit=5", 200},
		{"GET", "/d", 200},
		{"GET", "/", 200},
		{"GET", "/nodb/x", 404},
		{"GET", "/healthz", 200},
		{"GET", "/metrics", 200},
		{"DELETE", "/d/key-1", 405},
	}
	for _, r := range reqs {
		if got := ts.do(t, r.method, r.path, "User-Agent", "accesslog-test/1", "Referer", "http://example.com/a", "Accept", "application/json"); got.status != r.status {
			t.Fatalf("%s %s: %d, want %d", r.method, r.path, got.status, r.status)
		}
	}
	body := batchwire.AppendRequest(nil, [][]byte{[]byte("key-3"), []byte("key-4"), []byte("none")})
	resp, err := ts.client.Post(ts.url+"/d/_batch", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d", resp.StatusCode)
	}
	return len(reqs) + 1
}

// TestAccessLogJSON: every door's request has its line, decoded by a
// JSON decoder, with the fields only the handlers know (db, version,
// hot-cache hit, key counts) and the request's own.
func TestAccessLogJSON(t *testing.T) {
	ts, l, path := accessServer(t, func(c *edge.AccessLogConfig) { c.Format = edge.AccessLogJSON })
	n := doAll(t, ts)
	flush(t, l)
	lines := decodeJSONLines(t, path)
	if len(lines) != n {
		t.Fatalf("%d lines for %d requests", len(lines), n)
	}
	byPath := map[string][]accessLine{}
	for _, l := range lines {
		byPath[l.Method+" "+l.Path] = append(byPath[l.Method+" "+l.Path], l)
		if l.Proto != "HTTP/1.1" || l.TLS || l.UserAgent != "accesslog-test/1" && l.Method != "POST" ||
			!strings.HasPrefix(l.Remote, "127.0.0.1:") || l.Client != "127.0.0.1" || time.Since(l.Time) > time.Minute {
			t.Errorf("line %+v", l)
		}
	}
	got := byPath["GET /d/key-1"]
	if len(got) != 3 || got[0].Status != 200 || got[0].Bytes != int64(len("1:1")) || got[0].DB != "d" || got[0].Version != "1" || got[0].Keys != 1 || got[0].Referer != "http://example.com/a" {
		t.Fatalf("GET /d/key-1: %+v", got)
	}
	if got[0].Hot || !got[2].Hot {
		t.Errorf("hot-cache hits: first %v, third %v; want false, true", got[0].Hot, got[2].Hot)
	}
	for _, c := range []struct {
		key          string
		status       int
		db, version  string
		keys         int
		bytes, least int64
	}{
		{"GET /d/nope", 404, "d", "1", 1, 0, 0},
		{"HEAD /d/key-2", 200, "d", "1", 1, 0, 0},
		{"GET /d/?prefix=key-1&limit=5", 200, "d", "1", 5, -1, 20},
		{"GET /d", 200, "d", "", 0, -1, 2},
		{"GET /", 200, "", "", 0, -1, 2},
		{"GET /nodb/x", 404, "nodb", "", 0, -1, 1},
		{"GET /healthz", 200, "", "", 0, -1, 1},
		{"GET /metrics", 200, "", "", 0, -1, 100},
		{"DELETE /d/key-1", 405, "", "", 0, -1, 1},
		{"POST /d/_batch", 200, "d", "1", 3, -1, 10},
	} {
		ls := byPath[c.key]
		if len(ls) != 1 {
			t.Errorf("%s: %d lines", c.key, len(ls))
			continue
		}
		l := ls[0]
		if l.Status != c.status || l.DB != c.db || l.Version != c.version || l.Keys != c.keys ||
			(c.bytes >= 0 && l.Bytes != c.bytes) || l.Bytes < c.least {
			t.Errorf("%s: %+v", c.key, l)
		}
	}
}

// TestAccessLogGoAccess: the combined format, read by GoAccess (Debian's
// goaccess; make deps-test installs it), which counts every request as
// valid, with its paths, statuses, user agent and the hostile requests'
// lines intact.
func TestAccessLogGoAccess(t *testing.T) {
	goaccess, err := exec.LookPath("goaccess")
	if err != nil {
		t.Skip("goaccess is not installed (make deps-test)")
	}
	ts, l, path := accessServer(t, nil)
	n := doAll(t, ts)
	n += hostileRequests(t, ts)
	flush(t, l)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(data, []byte("\n")); got != n {
		t.Fatalf("%d lines for %d requests:\n%s", got, n, data)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	out, err := exec.Command(goaccess, path, "--log-format=COMBINED", "--no-global-config", "-o", report).CombinedOutput()
	if err != nil {
		t.Fatalf("goaccess: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	type item struct {
		Data string `json:"data"`
		Hits struct {
			Count int `json:"count"`
		} `json:"hits"`
	}
	var rep struct {
		General struct {
			Total  int `json:"total_requests"`
			Valid  int `json:"valid_requests"`
			Failed int `json:"failed_requests"`
		} `json:"general"`
		Requests struct{ Data []item } `json:"requests"`
		NotFound struct{ Data []item } `json:"not_found"`
		Hosts    struct{ Data []item } `json:"hosts"`
		Status   struct{ Data []item } `json:"status_codes"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("goaccess's report: %v", err)
	}
	g := rep.General
	if g.Total != n || g.Valid != n || g.Failed != 0 {
		t.Fatalf("goaccess read %d requests, %d valid, %d failed; want %d valid:\n%s", g.Total, g.Valid, g.Failed, n, data)
	}
	if len(rep.Hosts.Data) != 1 || rep.Hosts.Data[0].Data != "127.0.0.1" {
		t.Errorf("hosts %+v: want only 127.0.0.1 (no forged one)", rep.Hosts.Data)
	}
	paths := map[string]int{}
	for _, it := range append(rep.Requests.Data, rep.NotFound.Data...) {
		paths[it.Data] += it.Hits.Count
	}
	if paths["/d/key-1"] != 4 || paths["/d/nope"] != 1 || paths["/d/_batch"] != 1 {
		t.Errorf("goaccess's requests: %v", paths)
	}
	for p := range paths {
		if strings.Contains(p, "forged") && !strings.Contains(p, "/d/") {
			t.Errorf("a forged request %q", p)
		}
	}
}

// hostileRequests sends requests whose target, User-Agent and Referer
// try to end the field or the line and forge another one: raw quotes
// and bytes the request line allows, and header values with quotes,
// tabs and bytes above 0x7f. It returns how many.
func hostileRequests(t *testing.T, ts *testServer) int {
	t.Helper()
	forged := `" 200 1 "-" "-"` + "\n" + `6.6.6.6 - - [01/Jan/2026:00:00:00 +0000] "GET /forged HTTP/1.1" 200 1 "-" "-`
	raw := []string{
		// Raw bytes in the request target: a quote, a backslash, bytes
		// above 0x7f (net/http lets them through).
		"GET /d/a\"b\\c\xff\xfe HTTP/1.1\r\nHost: x\r\nUser-Agent: ua\"\t\\\xc3\xa9\r\nReferer: " + strings.ReplaceAll(forged, "\n", "\t") + "\r\n\r\n",
		// A percent-encoded newline in the key: the target is logged as
		// received, encoded.
		"GET /d/x%0A6.6.6.6%20-%20-%20%22forged HTTP/1.1\r\nHost: x\r\nUser-Agent: " + strings.ReplaceAll(forged, "\n", " ") + "\r\n\r\n",
	}
	for _, req := range raw {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.Close()
		if resp.StatusCode >= 500 || resp.StatusCode == 400 {
			t.Fatalf("%q: %d: the request was not served, so not logged", req, resp.StatusCode)
		}
	}
	return len(raw)
}

// TestAccessLogHostile: requests that try to forge a line leave one
// line each, which decodes to what they sent.
func TestAccessLogHostile(t *testing.T) {
	for _, format := range []string{edge.AccessLogCombined, edge.AccessLogJSON} {
		t.Run(format, func(t *testing.T) {
			ts, l, path := accessServer(t, func(c *edge.AccessLogConfig) { c.Format = format })
			n := hostileRequests(t, ts)
			flush(t, l)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			if len(lines) != n {
				t.Fatalf("%d lines for %d requests:\n%s", len(lines), n, data)
			}
			for _, line := range lines {
				if strings.HasPrefix(line, "6.6.6.6") {
					t.Errorf("a forged line: %q", line)
				}
				if strings.IndexFunc(line, func(r rune) bool { return r < 0x20 }) >= 0 || !utf8.ValidString(line) {
					t.Errorf("a raw control or non-UTF-8 byte in %q", line)
				}
			}
			if format == edge.AccessLogJSON {
				ls := decodeJSONLines(t, path)
				if ls[0].Path != "/d/a\"b\\c\ufffd\ufffd" || ls[0].UserAgent != "ua\"\t\\é" || !strings.Contains(ls[0].Referer, "\t6.6.6.6") {
					t.Errorf("decoded: path %q, user agent %q, referer %q", ls[0].Path, ls[0].UserAgent, ls[0].Referer)
				}
				return
			}
			// Combined: every quoted field holds no bare quote, so a
			// reader splitting on quotes finds the same fields in each line.
			for _, line := range lines {
				if q := strings.Count(line, `"`); q != 14 {
					t.Errorf("%d quotes (want 14) in %q", q, line)
				}
			}
			if !strings.Contains(lines[0], `"GET /d/a\x22b\x5cc\xff\xfe HTTP/1.1"`) || !strings.Contains(lines[0], `"ua\x22\x09\x5c\xc3\xa9"`) {
				t.Errorf("escaping: %q", lines[0])
			}
		})
	}
}

// TestAccessLogReopenUnderLoad: the log is rotated (renamed, then
// Reopen, as logrotate and SIGHUP do) three times while requests run;
// every request has exactly one line in the old files and the new.
func TestAccessLogReopenUnderLoad(t *testing.T) {
	ts, l, path := accessServer(t, func(c *edge.AccessLogConfig) { c.Format = edge.AccessLogJSON })
	const workers = 8
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := ts.client.Get(fmt.Sprintf("%s/d/key-%d?raw=%d", ts.url, (w*7+i)%100, 1))
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sent.Add(1)
			}
		})
	}
	rotated := []string{}
	for i := range 3 {
		// Some requests before each rotation.
		base := sent.Load()
		checkFor(t, 20*time.Second, "requests before a rotation", func() bool { return sent.Load() >= base+200 })
		old := fmt.Sprintf("%s.%d", path, i+1)
		if err := os.Rename(path, old); err != nil {
			t.Fatal(err)
		}
		rotated = append(rotated, old)
		l.Reopen()
		checkFor(t, 20*time.Second, "the reopened file", func() bool {
			st, err := os.Stat(path)
			return err == nil && st.Size() > 0
		})
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	flush(t, l)
	total := 0
	for _, p := range append(rotated, path) {
		lines := decodeJSONLines(t, p)
		if len(lines) == 0 {
			t.Errorf("%s is empty", p)
		}
		for _, line := range lines {
			if line.Status != 200 || line.DB != "d" {
				t.Fatalf("%s: %+v", p, line)
			}
		}
		total += len(lines)
	}
	if int64(total) != sent.Load() {
		t.Fatalf("%d lines in %d files for %d requests", total, len(rotated)+1, sent.Load())
	}
	if got := counterOf(t, ts.registry, "spangle_access_log_dropped_total", "log", "http"); got != 0 {
		t.Errorf("%v lines dropped", got)
	}
	t.Logf("%d requests, %d rotations, every line kept", total, len(rotated))
}

// TestAccessLogCopyTruncate: logrotate's copytruncate empties the file
// under the writer; the next lines start at its beginning (O_APPEND),
// not after a hole of zeros where the old end was.
func TestAccessLogCopyTruncate(t *testing.T) {
	ts, l, path := accessServer(t, nil)
	for range 20 {
		ts.do(t, "GET", "/d/key-1")
	}
	flush(t, l)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	ts.do(t, "GET", "/d/key-2")
	flush(t, l)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(data, 0) >= 0 || !bytes.HasPrefix(data, []byte("127.0.0.1 - - [")) || bytes.Count(data, []byte("\n")) != 1 {
		t.Fatalf("after a truncate: %q", data)
	}
}

// TestAccessLogDiskFull: the log's disk is full. Every request is still
// answered, the lines that cannot be written are dropped and counted,
// and the error is logged once, not once per write.
func TestAccessLogDiskFull(t *testing.T) {
	disk := nodetest.SmallDisk(t, "1m")
	rec := &logRecorder{}
	ts, l, path := accessServer(t, func(c *edge.AccessLogConfig) {
		c.Path = filepath.Join(disk, "access.log")
		c.Logger = slog.New(rec)
		c.FlushInterval = time.Millisecond
	})
	filler := filepath.Join(disk, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for _, n := range []int{4 << 10, 512, 1} { // the last bytes
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	f.Close()
	for i := range 300 {
		if resp := ts.do(t, "GET", fmt.Sprintf("/d/key-%d", i%100)); resp.status != 200 {
			t.Fatalf("a request on a full disk: %d", resp.status)
		}
		if i%100 == 0 {
			flush(t, l) // several writes fail, not one
		}
	}
	flush(t, l)
	dropped := counterOf(t, ts.registry, "spangle_access_log_dropped_total", "log", "http")
	if dropped < 250 {
		t.Errorf("%v lines dropped of 300 on a full disk", dropped)
	}
	if failures := counterOf(t, ts.registry, "spangle_access_log_errors_total", "log", "http"); failures < 3 {
		t.Errorf("%v failed writes counted", failures)
	}
	if got := strings.Count(rec.all(), "access log write failed"); got != 1 {
		t.Errorf("the write error logged %d times, want once a minute:\n%s", got, rec.all())
	}
	// Space comes back: lines are written again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ts.do(t, "GET", "/d/key-5")
	flush(t, l)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("GET /d/key-5 ")) {
		t.Errorf("no line once space came back: %q", data)
	}
}

// TestAccessLogFull: the writer is not running (a write that hangs):
// requests never wait for it; lines past the buffer are dropped and
// counted.
func TestAccessLogFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := edge.DefaultAccessLogConfig()
	cfg.Path = filepath.Join(t.TempDir(), "access.log")
	cfg.Registerer = reg
	cfg.BufferBytes = 4 << 10
	l, err := edge.NewAccessLog(cfg, "http")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(context.Background())
	ts := startServer(t, newFake(), func(c *edge.Config) { c.AccessLog = l; c.Registerer = reg })
	for range 100 {
		if resp := ts.do(t, "GET", "/baby-names/x"); resp.status != 200 {
			t.Fatalf("status %d", resp.status)
		}
	}
	dropped := counterOf(t, reg, "spangle_access_log_dropped_total", "log", "http")
	if dropped < 50 || dropped > 90 {
		t.Errorf("%v of 100 lines dropped with 4 KiB of buffer", dropped)
	}
}

// TestAccessLogTrustedProxies: the client is X-Forwarded-For's only
// for a request from a trusted proxy, and then the right-most address
// that is not one; a header that is no address is not logged.
func TestAccessLogTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted []string
		xff     []string
		want    string
	}{
		{"untrusted peer", nil, []string{"203.0.113.9"}, "127.0.0.1"},
		{"trusted peer", []string{"127.0.0.0/8"}, []string{"203.0.113.9"}, "203.0.113.9"},
		{"chain", []string{"127.0.0.0/8", "10.0.0.0/8"}, []string{"198.51.100.1, 203.0.113.9", "10.1.2.3"}, "203.0.113.9"},
		{"spoofed left", []string{"127.0.0.0/8"}, []string{"1.1.1.1, 203.0.113.9"}, "203.0.113.9"},
		{"all trusted", []string{"127.0.0.0/8", "10.0.0.0/8"}, []string{"10.0.0.1"}, "10.0.0.1"},
		{"not an address", []string{"127.0.0.0/8"}, []string{`6.6.6.6" - - [x`}, "127.0.0.1"},
		{"no header", []string{"127.0.0.0/8"}, nil, "127.0.0.1"},
		{"ipv6", []string{"127.0.0.0/8"}, []string{"2001:db8::1"}, "2001:db8::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prefixes []netip.Prefix
			for _, p := range tc.trusted {
				prefixes = append(prefixes, netip.MustParsePrefix(p))
			}
			l, path := startAccessLog(t, nil, func(c *edge.AccessLogConfig) {
				c.Format, c.TrustedProxies = edge.AccessLogJSON, prefixes
			})
			ts := startServer(t, newFake(), func(c *edge.Config) { c.AccessLog = l })
			var hdrs []string
			for _, x := range tc.xff {
				hdrs = append(hdrs, "X-Forwarded-For", x)
			}
			ts.do(t, "GET", "/baby-names/x", hdrs...)
			flush(t, l)
			lines := decodeJSONLines(t, path)
			if len(lines) != 1 || lines[0].Client != tc.want || !strings.HasPrefix(lines[0].Remote, "127.0.0.1:") {
				t.Fatalf("%+v, want client %s", lines, tc.want)
			}
		})
	}
}

// TestAccessLogAdmin: Handler logs the requests of another handler (the
// admin API), with the status it answered.
func TestAccessLogAdmin(t *testing.T) {
	l, path := startAccessLog(t, nil, func(c *edge.AccessLogConfig) { c.Format = edge.AccessLogJSON })
	h := l.Handler(edge.RequireToken(edge.AdminHandler(pinAdmin{}), "secret", true))
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	for _, auth := range []string{"", "Bearer secret"} {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/admin/pins", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	flush(t, l)
	lines := decodeJSONLines(t, path)
	if len(lines) != 2 || lines[0].Status != 401 || lines[1].Status != 200 || lines[1].Path != "/admin/pins" || lines[1].Bytes == 0 {
		t.Fatalf("%+v", lines)
	}
}

// pinAdmin is an admin API without pins.
type pinAdmin struct{}

func (pinAdmin) CheckPin(context.Context, string, node.Pin) error { return nil }
func (pinAdmin) Pin(string, node.Pin) error                       { return nil }
func (pinAdmin) Pins() map[string]node.Pin                        { return map[string]node.Pin{} }

// TestAccessLogHTTP2TLS: over HTTPS, a line says TLS and the protocol
// the request came in, HTTP/2 or HTTP/1.1.
func TestAccessLogHTTP2TLS(t *testing.T) {
	ca := nodetest.NewCA(t)
	tc := tlsFiles(t, ca, t.TempDir(), 2)
	tc.Logger = nodetest.Logger()
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	tl.Start()
	t.Cleanup(tl.Stop)
	l, path := startAccessLog(t, nil, func(c *edge.AccessLogConfig) { c.Format = edge.AccessLogJSON })
	ts := startServer(t, newFake(), func(c *edge.Config) { c.TLS, c.AccessLog = tl.ServerConfig(), l })
	for _, h2 := range []bool{true, false} {
		c := h2Client(ca, h2)
		resp, err := c.Get("https://" + ts.addr + "/baby-names/1881")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.CloseIdleConnections()
	}
	// HTTP/1.1 on a connection the fast path handed to net/http (a
	// request for /livez first): net/http sees it above TLS, and the
	// line says TLS still.
	c := h2Client(ca, false)
	for _, p := range []string{"/livez", "/baby-names/1881"} {
		resp, err := c.Get("https://" + ts.addr + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c.CloseIdleConnections()
	flush(t, l)
	lines := decodeJSONLines(t, path)
	if len(lines) != 4 || lines[0].Proto != "HTTP/2.0" || lines[1].Proto != "HTTP/1.1" ||
		lines[0].Bytes != int64(len("value of 1881")) || lines[0].Path != "/baby-names/1881" || lines[3].Path != "/baby-names/1881" {
		t.Fatalf("%+v", lines)
	}
	for i, line := range lines {
		if !line.TLS {
			t.Errorf("line %d (%s %s): tls false", i, line.Proto, line.Path)
		}
	}
	if n := counterOf(t, ts.registry, "spangle_http_handovers_total"); n != 1 {
		t.Errorf("%v connections handed over, want 1", n)
	}
}

// TestAccessLogReopenFails: a path that cannot be opened fails
// NewAccessLog; a reopen that fails (its directory is gone) keeps the old
// file, logs the error, and a later reopen that works moves to the new
// file.
func TestAccessLogReopenFails(t *testing.T) {
	cfg := edge.DefaultAccessLogConfig()
	cfg.Path = filepath.Join(t.TempDir(), "missing", "access.log")
	if _, err := edge.NewAccessLog(cfg, "http"); err == nil {
		t.Fatal("NewAccessLog opened a file in a missing directory")
	}

	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := &logRecorder{}
	l, path := startAccessLog(t, nil, func(c *edge.AccessLogConfig) {
		c.Path, c.Logger = filepath.Join(dir, "access.log"), slog.New(rec)
	})
	ts := startServer(t, newFake(), func(c *edge.Config) { c.AccessLog = l })
	ts.do(t, "GET", "/baby-names/1")
	flush(t, l)
	// logrotate moves the directory away: the reopen cannot create the file.
	moved := dir + ".old"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	l.Reopen()
	ts.do(t, "GET", "/baby-names/2")
	flush(t, l)
	if !strings.Contains(rec.all(), "access log reopen failed") {
		t.Errorf("the failed reopen is not logged:\n%s", rec.all())
	}
	old, err := os.ReadFile(filepath.Join(moved, "access.log"))
	if err != nil || !strings.Contains(string(old), "/baby-names/1 ") || !strings.Contains(string(old), "/baby-names/2 ") {
		t.Fatalf("the old file after a failed reopen: %q, %v", old, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l.Reopen()
	ts.do(t, "GET", "/baby-names/3")
	flush(t, l)
	cur, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(cur), "/baby-names/3 ") || strings.Contains(string(cur), "/baby-names/2 ") {
		t.Fatalf("the new file: %q, %v", cur, err)
	}
}
