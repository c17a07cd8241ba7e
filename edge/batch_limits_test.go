package edge_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/node/nodetest"
)

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestBatchStalledBodies: 120 connections, and 200 streams of one
// HTTP/2 connection, announce 1 MiB batch bodies and send 3 bytes of
// them, and stay: the server's heap does not grow with what they
// announce (it once grew by 1 MiB each), and they hold only what they
// sent of the node-wide budget, so that batches of other clients keep
// being answered (the budget was taken by what a body announced: every
// other batch was 503 while they stayed).
func TestBatchStalledBodies(t *testing.T) {
	const conns, streams = 120, 200
	ca := nodetest.NewCA(t)
	tc := tlsFiles(t, ca, t.TempDir(), 2)
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	limits := func(c *edge.Config) {
		c.MaxBatchBytes = 1 << 20
		c.MaxBatchReplyBytes = 64 << 10
		c.BatchBytesInFlight = 8 << 20 // room for 7 of what they announce, with their replies
		c.BatchWait = 200 * time.Millisecond
		c.ReadTimeout = 30 * time.Second
	}
	ts := startServer(t, echoBackend{}, limits)
	h2s := startServer(t, echoBackend{}, limits, func(c *edge.Config) { c.TLS = tl.ServerConfig() })
	h2s.url, h2s.client = "https://"+h2s.addr, h2Client(ca, true)
	t.Cleanup(h2s.client.CloseIdleConnections)

	before := heapInUse()
	for range conns {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := fmt.Fprintf(c, "POST /d/_batch HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nabc", 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	h2 := dialH2(t, ca, h2s.addr)
	for i := range streams {
		id := uint32(2*i + 1)
		if err := h2.headers(id, "POST", "/d/_batch", false, "content-length", "1048576"); err != nil {
			t.Fatal(err)
		}
		if err := h2.fr.WriteData(id, false, []byte("abc")); err != nil {
			t.Fatal(err)
		}
	}
	// Every stalled batch is in its handler, reading its body.
	checkFor(t, 10*time.Second, "the stalled batches in their handlers", func() bool {
		return counterOf(t, ts.registry, "spangle_http_inflight_requests") == conns &&
			counterOf(t, h2s.registry, "spangle_http_inflight_requests") == streams
	})
	grew := heapInUse() - before
	t.Logf("%d stalled batches: heap grew %d KiB", conns+streams, grew>>10)
	if grew > 32<<20 {
		t.Errorf("heap grew by %d MiB for %d stalled batches", grew>>20, conns+streams)
	}
	// Other clients' batches are answered while they stay.
	body := batchwire.AppendRequest(nil, [][]byte{[]byte("k")})
	for _, srv := range []*testServer{ts, h2s} {
		for i := range 5 {
			resp, err := srv.client.Post(srv.url+"/d/_batch", batchwire.ContentType, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: batch %d while the stalled ones stay: %d", srv.url, i, resp.StatusCode)
			}
		}
	}
	if n := counterOf(t, ts.registry, "spangle_http_batch_rejected_total") + counterOf(t, h2s.registry, "spangle_http_batch_rejected_total"); n != 0 {
		t.Errorf("%v batches rejected", n)
	}
}

// TestBatchReplyLimit: copies of one key whose value is 1 MiB would make
// a reply of that many MiB; the node stops at MaxBatchReplyBytes (4 MiB
// here; NATS: max_payload) and answers 413 at once, reading the value
// once, over HTTP and NATS. Duplicate keys within the limit are answered at every position.
func TestBatchReplyLimit(t *testing.T) {
	env := startNATSEnv(t)
	keys := make([][]byte, 10) // the env's limit: 10 keys
	for i := range keys {
		keys[i] = hugeKey
	}
	body := batchwire.AppendRequest(nil, keys)
	before := heapInUse()
	start := time.Now()
	resp, err := http.Post(env.node.HTTPURL+"/d/_batch", batchwire.ContentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("HTTP: status %d, want 413", resp.StatusCode)
	}
	m, err := env.nc.Request("spangle.test.mget.d", body, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Header.Get("Spangle-Status"); st != "413" {
		t.Errorf("NATS: status %s, want 413", st)
	}
	if grew := heapInUse() - before; grew > 16<<20 {
		t.Errorf("heap grew by %d MiB", grew>>20)
	}
	t.Logf("two refused batches of 10 copies of a 1 MiB value: %v", time.Since(start))

	// Duplicates within the limit.
	ks := [][]byte{[]byte("key-1"), []byte("key-2"), []byte("key-1"), []byte("key-1")}
	resp, err = http.Post(env.node.HTTPURL+"/d/_batch", batchwire.ContentType, bytes.NewReader(batchwire.AppendRequest(nil, ks)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	rep, err := batchwire.DecodeReply(buf.Bytes(), 10)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("duplicates: %d %v", resp.StatusCode, err)
	}
	for i, want := range []string{"v1:1", "v1:2", "v1:1", "v1:1"} {
		if string(rep.Items[i].Value) != want {
			t.Errorf("item %d: %q, want %q", i, rep.Items[i].Value, want)
		}
	}
}

// TestBatchReplyBudget sends 20 batches at once, each asking for a 3 MiB
// reply (three copies of a 1 MiB value), to a node whose batches may hold
// 8 MiB in flight: replies take their room in that budget as they grow,
// so the heap never holds much more than the budget (it once held every
// reply at once, twice), and what does not fit waits, then gets a 503.
func TestBatchReplyBudget(t *testing.T) {
	env := startNATSEnv(t)
	body := batchwire.AppendRequest(nil, [][]byte{hugeKey, hugeKey, hugeKey})
	// Collect often, so that the heap shows what is live rather than
	// garbage; the clients below keep no reply.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	before := heapInUse()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if v := int64(m.HeapInuse); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond): // sampling interval
			}
		}
	}()
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for range 20 {
		wg.Go(func() {
			resp, err := http.Post(env.node.HTTPURL+"/d/_batch", batchwire.ContentType, bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			switch {
			case err != nil:
				t.Error(err)
			case resp.StatusCode == http.StatusOK && n > 3*int64(len(hugeValue)):
				ok.Add(1)
			case resp.StatusCode == http.StatusServiceUnavailable:
				refused.Add(1)
			default:
				t.Errorf("status %d, %d bytes", resp.StatusCode, n)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	grew := peak.Load() - before
	t.Logf("20 batches of 3 MiB replies, 8 MiB budget: %d answered, %d refused (503), heap peak +%d MiB", ok.Load(), refused.Load(), grew>>20)
	if ok.Load() == 0 {
		t.Error("no batch was answered")
	}
	if grew > 16<<20 {
		t.Errorf("heap peak grew by %d MiB, want about the 8 MiB budget", grew>>20)
	}
}
