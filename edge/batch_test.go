package edge_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/batchwire"
)

// echoBackend answers each key of a batch with a copy of the key.
type echoBackend struct{ benchBackend }

func (echoBackend) GetMany(_ context.Context, _ string, keys [][]byte, _ node.GetOptions) (string, []node.Result, error) {
	results := make([]node.Result, len(keys))
	for i, k := range keys {
		results[i] = node.Result{Value: bytes.Clone(k), Found: true, Version: "20260301"}
	}
	return "20260301", results, nil
}

// TestBatchBodies: batch requests over HTTP with and without a
// Content-Length (chunked), within and over MaxBatchBytes, one after
// another on one server, so that pooled buffers are reused: each gets
// its own answer (the keys, echoed).
func TestBatchBodies(t *testing.T) {
	cfg := edge.DefaultConfig()
	cfg.Backend, cfg.Batch = echoBackend{}, echoBackend{}
	cfg.MaxBatchBytes = 4096
	srv, err := edge.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	keys := func(n int) [][]byte {
		ks := make([][]byte, n)
		for i := range ks {
			ks[i] = bytes.Repeat([]byte{byte('a' + n%26)}, i)
		}
		return ks
	}
	for _, tc := range []struct {
		name    string
		keys    int
		chunked bool
		status  int
	}{
		{"length/1", 1, false, 200},
		{"length/50", 50, false, 200},
		{"chunked/3", 3, true, 200},
		{"chunked/50", 50, true, 200},
		{"chunked/too large", 100, true, 413}, // 100 keys of 0..99 bytes: ~5 KB
		{"length/2", 2, false, 200},
		{"chunked/0", 0, true, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks := keys(tc.keys)
			body := batchwire.AppendRequest(nil, ks)
			var rd io.Reader = bytes.NewReader(body)
			if tc.chunked {
				rd = io.MultiReader(rd) // no length known: sent chunked
			}
			req, err := http.NewRequest("POST", hs.URL+"/db/_batch?proxy=20260301", rd)
			if err != nil {
				t.Fatal(err)
			}
			if got := req.ContentLength > 0; got == tc.chunked {
				t.Fatalf("ContentLength %d, chunked %v", req.ContentLength, tc.chunked)
			}
			resp, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			reply, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, reply)
			}
			if tc.status != 200 {
				return
			}
			r, err := batchwire.DecodeReply(reply, 0)
			if err != nil {
				t.Fatal(err)
			}
			if r.Version != "20260301" || len(r.Items) != tc.keys || resp.Header.Get("X-Spangle-Version") != r.Version {
				t.Fatalf("version %q (header %q), %d items, want %d", r.Version, resp.Header.Get("X-Spangle-Version"), len(r.Items), tc.keys)
			}
			for i, it := range r.Items {
				if it.Status != batchwire.Found || !bytes.Equal(it.Value, ks[i]) {
					t.Fatalf("item %d: %+v", i, it)
				}
			}
		})
	}
}
