package edge_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/plugins"
)

// natsEnv is one node with embedded NATS serving db "d" (version v1, 4
// partitions, keys key-0..key-99 plus the odd ones below), and a client
// connection over TCP.
type natsEnv struct {
	root string
	node *edgetest.Node
	nc   *nats.Conn
	reg  *prometheus.Registry
	logs *logRecorder // the NATS door's log
}

// Odd records of db "d".
var (
	binaryKey = append([]byte("bin\x00\n\xff\xfe"), bytes.Repeat([]byte{0x80, 0}, 508)...) // 1 KiB, NUL, newline, invalid UTF-8
	emptyKey  = []byte("empty-value")
	hugeKey   = []byte("huge")
	hugeValue = bytes.Repeat([]byte("x"), 1<<20) // over NATS's default max_payload once headers are added
)

func startNATSEnv(t *testing.T) *natsEnv {
	t.Helper()
	root := t.TempDir()
	recs := edgetest.Numbered("v1", 100)
	recs = append(recs,
		edgetest.Record{Key: binaryKey, Value: []byte("binary key's value")},
		edgetest.Record{Key: emptyKey, Value: []byte{}},
		edgetest.Record{Key: hugeKey, Value: hugeValue},
	)
	edgetest.WriteVersion(t, root, "d", "v1", 4, recs)
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	reg := prometheus.NewRegistry()
	logs := &logRecorder{}
	n := edgetest.StartNode(t, kv, root, edgetest.Options{
		NATS: func(c *edge.NATSConfig) {
			c.Registerer = reg
			c.Logger = slog.New(logs)
			c.MaxBatchKeys = 10
			c.MaxBatchBytes = 4 << 10
		},
		HTTP: func(c *edge.Config) {
			c.MaxBatchKeys = 10
			c.MaxBatchBytes = 4 << 10
			c.MaxBatchReplyBytes = 4 << 20
			c.BatchBytesInFlight = 4<<10 + 8<<20
		},
	})
	nc := edgetest.Connect(t, kv.ClientURL())
	env := &natsEnv{root: root, node: n, nc: nc, reg: reg, logs: logs}
	env.waitAnswers(t, "spangle.test.part.d.v1.0")
	return env
}

// waitAnswers waits until someone answers on subject.
func (e *natsEnv) waitAnswers(t *testing.T, subject string) {
	t.Helper()
	edgetest.WaitFor(t, subject+" answers", func() error {
		_, err := e.nc.Request(subject, []byte("key-0"), time.Second)
		return err
	})
}

func (e *natsEnv) request(t *testing.T, subject string, data []byte) *nats.Msg {
	t.Helper()
	m, err := e.nc.Request(subject, data, 5*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return m
}

// partOf returns the part subject of key in db "d" v1 (4 partitions).
func partOf(t *testing.T, key []byte) string {
	p, _, err := must(plugins.Builtin("sequins")).Partition(key, 4)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("spangle.test.part.d.v1.%d", p)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestNATSLookups(t *testing.T) {
	env := startNATSEnv(t)
	for _, tc := range []struct {
		name        string
		db          string
		key         []byte
		status      string
		version     string
		value       []byte
		contentType string
	}{
		{"found", "d", []byte("key-7"), "200", "v1", []byte("v1:7"), "application/octet-stream"},
		{"missing", "d", []byte("nope"), "404", "v1", nil, ""},
		{"binary key", "d", binaryKey, "200", "v1", []byte("binary key's value"), "application/octet-stream"},
		{"empty value", "d", emptyKey, "200", "v1", nil, "application/octet-stream"},
		{"empty key", "d", []byte{}, "404", "v1", nil, ""},
		{"unknown db", "nope", []byte("key-7"), "404", "", nil, ""},
	} {
		subjects := []string{"spangle.test.get." + tc.db}
		if tc.db == "d" {
			subjects = append(subjects, partOf(t, tc.key))
		}
		for _, subject := range subjects {
			t.Run(tc.name+"/"+strings.Split(subject, ".")[2], func(t *testing.T) {
				m := env.request(t, subject, tc.key)
				h := m.Header
				if h.Get("Spangle-Status") != tc.status || h.Get("Spangle-Version") != tc.version ||
					h.Get("Content-Type") != tc.contentType || !bytes.Equal(m.Data, tc.value) {
					t.Fatalf("got %v %q, want status %s version %q content type %q value %q",
						h, m.Data, tc.status, tc.version, tc.contentType, tc.value)
				}
				if _, ok := h["Spangle-Version"]; ok != (tc.version != "") {
					t.Fatalf("Spangle-Version present: %v", ok)
				}
			})
		}
	}
}

// TestNATSMaxPayload: an answer larger than the server's max_payload gets
// a 413 saying so, at once, rather than a timeout.
func TestNATSMaxPayload(t *testing.T) {
	env := startNATSEnv(t)
	for _, subject := range []string{"spangle.test.get.d", partOf(t, hugeKey)} {
		start := time.Now()
		m := env.request(t, subject, hugeKey)
		if m.Header.Get("Spangle-Status") != "413" || m.Header.Get("Spangle-Version") != "v1" ||
			!strings.Contains(m.Header.Get("Spangle-Error"), "exceeds the NATS max_payload") || len(m.Data) != 0 {
			t.Fatalf("%s: %v %d bytes", subject, m.Header, len(m.Data))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: answered after %v", subject, d)
		}
	}
	// The same value over HTTP, where no such limit applies.
	resp, err := http.Get(env.node.HTTPURL + "/d/huge")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body) //nolint:errcheck // checked below
	if resp.StatusCode != 200 || !bytes.Equal(buf.Bytes(), hugeValue) {
		t.Fatalf("HTTP: %d, %d bytes", resp.StatusCode, buf.Len())
	}
	if got := testutil.ToFloat64(mustCounter(t, env.reg, "get", "413")); got != 1 {
		t.Errorf("413s counted for get: %v", got)
	}
	// The log says how large the refused answer was (it said 0: the size
	// of the pooled reply, already cleared).
	if want := fmt.Sprintf("edge: NATS answer too large subject=%s bytes=%d", partOf(t, hugeKey), len(hugeValue)); !strings.Contains(env.logs.all(), want) {
		t.Errorf("log %q lacks %q", env.logs.all(), want)
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, op, code string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "spangle_nats_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["op"] == op && labels["code"] == code {
				c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
				c.Add(m.GetCounter().GetValue())
				return c
			}
		}
	}
	t.Fatalf("no spangle_nats_requests_total{op=%q,code=%q}", op, code)
	return nil
}

func TestNATSMGet(t *testing.T) {
	env := startNATSEnv(t)
	subject := "spangle.test.mget.d"
	keys := [][]byte{[]byte("key-1"), []byte("nope"), binaryKey, []byte("key-1"), emptyKey}
	m := env.request(t, subject, batchwire.AppendRequest(nil, keys))
	if m.Header.Get("Spangle-Status") != "200" || m.Header.Get("Spangle-Version") != "v1" ||
		m.Header.Get("Content-Type") != batchwire.ContentType {
		t.Fatalf("headers %v", m.Header)
	}
	r, err := batchwire.DecodeReply(m.Data, len(keys))
	if err != nil {
		t.Fatal(err)
	}
	want := []batchwire.Item{
		{Status: batchwire.Found, Value: []byte("v1:1")},
		{Status: batchwire.Missing},
		{Status: batchwire.Found, Value: []byte("binary key's value")},
		{Status: batchwire.Found, Value: []byte("v1:1")},
		{Status: batchwire.Found, Value: []byte{}},
	}
	if r.Version != "v1" || len(r.Items) != len(want) {
		t.Fatalf("reply %+v", r)
	}
	for i, it := range r.Items {
		if it.Status != want[i].Status || !bytes.Equal(it.Value, want[i].Value) {
			t.Errorf("item %d: %v %q, want %v %q", i, it.Status, it.Value, want[i].Status, want[i].Value)
		}
	}

	for _, tc := range []struct {
		name, subject string
		data          []byte
		status, error string
	}{
		{"malformed", subject, []byte("not a batch"), "400", "malformed batch"},
		{"too many keys", subject, batchwire.AppendRequest(nil, make([][]byte, 11)), "413", "11 keys, at most 10"},
		{"too many bytes", subject, batchwire.AppendRequest(nil, [][]byte{bytes.Repeat([]byte("k"), 5000)}), "413", "at most 4096 allowed"},
		{"unknown db", "spangle.test.mget.nope", batchwire.AppendRequest(nil, keys), "404", ""},
		{"reply over max_payload", subject, batchwire.AppendRequest(nil, [][]byte{hugeKey}), "413", "exceeds the NATS max_payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := env.request(t, tc.subject, tc.data)
			if m.Header.Get("Spangle-Status") != tc.status || !strings.Contains(m.Header.Get("Spangle-Error"), tc.error) || len(m.Data) != 0 {
				t.Fatalf("got %v %q, want %s with error %q", m.Header, m.Data, tc.status, tc.error)
			}
		})
	}
}

// TestNATSPartsFollowUpgrade: after an upgrade the retired version's part
// subjects have no responders, and the new version's answer.
func TestNATSPartsFollowUpgrade(t *testing.T) {
	env := startNATSEnv(t)
	edgetest.WriteVersion(t, env.root, "d", "v2", 3, edgetest.Numbered("v2", 100))
	env.node.Refresh()
	env.waitAnswers(t, "spangle.test.part.d.v2.2")
	for p := range 4 {
		subject := fmt.Sprintf("spangle.test.part.d.v1.%d", p)
		edgetest.WaitFor(t, subject+" gone", func() error {
			_, err := env.nc.Request(subject, []byte("key-1"), time.Second)
			if errors.Is(err, nats.ErrNoResponders) {
				return nil
			}
			return fmt.Errorf("still answered: %v", err)
		})
	}
	if _, err := env.nc.Request("spangle.test.part.d.v2.3", []byte("key-1"), time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("v2 has 3 partitions, yet partition 3 answered: %v", err)
	}
	m := env.request(t, "spangle.test.get.d", []byte("key-1"))
	if string(m.Data) != "v2:1" || m.Header.Get("Spangle-Version") != "v2" {
		t.Fatalf("get after upgrade: %v %q", m.Header, m.Data)
	}
}

func TestHTTPBatch(t *testing.T) {
	env := startNATSEnv(t)
	base := env.node.HTTPURL
	post := func(t *testing.T, path string, body []byte) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Post(base+path, batchwire.ContentType, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		return resp, buf.Bytes()
	}
	keys := [][]byte{[]byte("key-2"), []byte("nope"), []byte("key-2"), emptyKey, binaryKey}
	resp, body := post(t, "/d/_batch", batchwire.AppendRequest(nil, keys))
	if resp.StatusCode != 200 || resp.Header.Get("X-Spangle-Version") != "v1" || resp.Header.Get("Content-Type") != batchwire.ContentType {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	r, err := batchwire.DecodeReply(body, len(keys))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range r.Items {
		got = append(got, fmt.Sprintf("%d:%q", it.Status, it.Value))
	}
	if want := `1:"v1:2" 0:"" 1:"v1:2" 1:"" 1:"binary key's value"`; strings.Join(got, " ") != want {
		t.Fatalf("items %s", strings.Join(got, " "))
	}

	for _, tc := range []struct {
		name   string
		path   string
		body   []byte
		status int
		text   string
	}{
		{"malformed", "/d/_batch", []byte("nope"), 400, "malformed batch"},
		{"too many keys", "/d/_batch", batchwire.AppendRequest(nil, make([][]byte, 11)), 413, "11 keys"},
		{"too large", "/d/_batch", make([]byte, 5000), 413, "at most 4096"},
		{"unknown db", "/nope/_batch", batchwire.AppendRequest(nil, keys), 404, ""},
		{"pinned unknown version", "/d/_batch?proxy=v0", batchwire.AppendRequest(nil, keys), 501, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, tc.path, tc.body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.text) || resp.Header.Get("X-Spangle-Version") != "" {
				t.Fatalf("%d %q %v, want %d with %q", resp.StatusCode, body, resp.Header, tc.status, tc.text)
			}
		})
	}

	// Methods: POST only on /<db>/_batch; GET there is still a lookup.
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/d/_batch", 404, ""},
		{"PUT", "/d/_batch", 405, "GET, HEAD, POST"},
		{"DELETE", "/d/_batch", 405, "GET, HEAD, POST"},
		{"POST", "/d/key-1", 405, "GET, HEAD"},
		{"POST", "/", 405, "GET, HEAD"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want %d %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.status, tc.allow)
		}
	}
}
