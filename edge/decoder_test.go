package edge_test

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/batchwire"
)

// TestDecoderOnEveryDoor serves a db through a decoder module (it keeps the
// value and says text/plain) on HTTP, NATS get, part and mget and the HTTP
// batch; asking for raw values skips it on each.
func TestDecoderOnEveryDoor(t *testing.T) {
	const decoded, raw = "text/plain; charset=utf-8", "application/x-stored"
	module, err := filepath.Abs(filepath.Join("..", "plugins", "testdata", "echo.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 1, edgetest.Numbered("v1", 10))
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	n := edgetest.StartNode(t, kv, root, edgetest.Options{Node: func(c *node.Config) {
		c.DBs = map[string]node.DBConfig{"d": {Decoder: "wasm:" + module, ContentType: raw}}
		c.Plugins.CallTimeout = 10 * time.Second // a loaded CI machine under -race
	}})
	nc := edgetest.Connect(t, kv.ClientURL())
	edgetest.WaitFor(t, "part subject", func() error {
		_, err := nc.Request("spangle.test.part.d.v1.0", []byte("key-1"), time.Second)
		return err
	})

	for _, tc := range []struct {
		name string
		raw  bool
		want string
	}{{"decoded", false, decoded}, {"raw", true, raw}} {
		t.Run(tc.name, func(t *testing.T) {
			url := n.HTTPURL + "/d/key-1"
			if tc.raw {
				url += "?raw=1"
			}
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "v1:1" || resp.Header.Get("Content-Type") != tc.want {
				t.Errorf("HTTP: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
			}

			for _, subject := range []string{"spangle.test.get.d", "spangle.test.part.d.v1.0"} {
				m := nats.NewMsg(subject)
				m.Data = []byte("key-1")
				if tc.raw {
					m.Header.Set("Spangle-Raw", "1")
				}
				r, err := nc.RequestMsg(m, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if string(r.Data) != "v1:1" || r.Header.Get("Content-Type") != tc.want {
					t.Errorf("%s: %q %q", subject, r.Data, r.Header.Get("Content-Type"))
				}
			}

			req := batchwire.AppendRequest(nil, [][]byte{[]byte("key-1"), []byte("key-2")})
			m := nats.NewMsg("spangle.test.mget.d")
			m.Data = req
			if tc.raw {
				m.Header.Set("Spangle-Raw", "true")
			}
			r, err := nc.RequestMsg(m, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			checkBatch(t, "mget", r.Data, tc.want)

			url = n.HTTPURL + "/d/_batch"
			if tc.raw {
				url += "?raw=1"
			}
			resp, err = http.Post(url, batchwire.ContentType, bytes.NewReader(req))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			checkBatch(t, "HTTP batch", body, tc.want)
		})
	}
}

func checkBatch(t *testing.T, door string, body []byte, contentType string) {
	t.Helper()
	r, err := batchwire.DecodeReply(body, 2)
	if err != nil {
		t.Fatalf("%s: %v", door, err)
	}
	if r.ContentType != contentType || len(r.Items) != 2 || string(r.Items[0].Value) != "v1:1" || string(r.Items[1].Value) != "v1:2" {
		t.Errorf("%s: %+v", door, r)
	}
}
