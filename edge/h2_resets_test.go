//go:build unix

package edge_test

import (
	"io"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node/nodetest"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestH2RapidReset: a client that opens streams and resets them at once
// (HEADERS then RST_STREAM, CVE-2023-44487) on one TLS connection gets
// GOAWAY with ENHANCE_YOUR_CALM and a closed connection once it passes
// H2MaxResets within H2ResetWindow; a client below the limit, and other
// connections, are served. Without the guard the 1200 pairs were all
// taken, with no GOAWAY. (Go's server has a mitigation of its own: it
// sends GOAWAY when more than four times MaxConcurrentStreams handlers
// wait to start, which fast handlers never let happen; 1200 pairs stay
// below it whatever the handlers' speed, so that only the guard can
// close the connection here.)
func TestH2RapidReset(t *testing.T) {
	const pairs = 1200
	ca := nodetest.NewCA(t)
	tc := tlsFiles(t, ca, t.TempDir(), 2)
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, newFake(), func(c *edge.Config) {
		c.TLS = tl.ServerConfig()
		c.H2MaxResets = 100
		c.H2ResetWindow = time.Minute
	})
	ts.url, ts.client = "https://"+ts.addr, h2Client(ca, true)
	t.Cleanup(ts.client.CloseIdleConnections)

	// Below the limit: the connection stays and keeps answering.
	calm := dialH2(t, ca, ts.addr)
	for i := range 50 {
		id := uint32(2*i + 1)
		if err := calm.headers(id, "GET", "/baby-names/1881", true); err != nil {
			t.Fatal(err)
		}
		if err := calm.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	if err := calm.headers(101, "GET", "/baby-names/1881", true); err != nil {
		t.Fatal(err)
	}
	calm.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for answered := false; !answered; {
		f, err := calm.fr.ReadFrame()
		if err != nil {
			t.Fatalf("a connection with 50 resets: %v", err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("a connection with 50 resets got GOAWAY %v", f.ErrCode)
		case *http2.HeadersFrame:
			answered = f.StreamID == 101
		}
	}

	// A flood: closed, with GOAWAY.
	flood := dialH2(t, ca, ts.addr)
	cpu0 := cpuTime(t)
	sent := make(chan int, 1)
	go func() {
		n := 0
		defer func() { sent <- n }()
		for ; n < pairs; n++ {
			id := uint32(2*n + 1)
			if flood.headers(id, "GET", "/baby-names/1881", true) != nil ||
				flood.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	closed, goaway := flood.readUntilClosed(30 * time.Second)
	n := <-sent
	t.Logf("rapid reset: %d HEADERS+RST_STREAM pairs written before the close, %v of CPU (client and server)", n, cpuTime(t)-cpu0)
	if !closed {
		t.Fatalf("the connection stayed open after %d pairs", n)
	}
	if goaway == nil || goaway.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM", goaway)
	}
	if got := counterOf(t, ts.registry, "spangle_http2_reset_floods_total"); got != 1 {
		t.Errorf("spangle_http2_reset_floods_total %v, want 1", got)
	}

	// Others are served.
	resp, err := ts.client.Get(ts.url + "/baby-names/1881")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || string(body) != "value of 1881" {
		t.Errorf("another client: %s %d %q", resp.Proto, resp.StatusCode, body)
	}
}
