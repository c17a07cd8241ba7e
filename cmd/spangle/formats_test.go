package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/parquet-go/parquet-go"
)

// writeFormats writes version v1 of three dbs under root: pq as Spark's
// snappy Parquet, av as deflate Avro container files, spk as sequins'
// own Sparkey test files; each with _SUCCESS. Their keys: pq and av
// key-0..key-29 → <db>:<i>; spk Alice → Practice and three more.
func writeFormats(t *testing.T, root string) {
	t.Helper()
	type kv struct {
		Key   string `parquet:"key" avro:"key"`
		Value string `parquet:"value" avro:"value"`
	}
	for _, db := range []string{"pq", "av", "spk"} {
		if err := os.MkdirAll(filepath.Join(root, db, "v1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f := range 2 {
		var rows []kv
		for i := f; i < 30; i += 2 {
			rows = append(rows, kv{fmt.Sprintf("key-%d", i), fmt.Sprintf("%d", i)})
		}
		var pq bytes.Buffer
		w := parquet.NewGenericWriter[kv](&pq, parquet.Compression(&parquet.Snappy))
		var av bytes.Buffer
		enc, err := ocf.NewEncoder(`{"type":"record","name":"KV","fields":[{"name":"key","type":"string"},{"name":"value","type":"string"}]}`,
			&av, ocf.WithCodec(ocf.Deflate))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			pr := kv{r.Key, "pq:" + r.Value}
			if _, err := w.Write([]kv{pr}); err != nil {
				t.Fatal(err)
			}
			if err := enc.Encode(kv{r.Key, "av:" + r.Value}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("part-%05d-0b1c-c000", f)
		for path, b := range map[string][]byte{
			filepath.Join(root, "pq", "v1", name+".snappy.parquet"): pq.Bytes(),
			filepath.Join(root, "av", "v1", name+".avro"):           av.Bytes(),
		} {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	spk := filepath.Join("..", "..", "blocks", "sparkey", "testdata", "sequins")
	for _, name := range []string{"part0-file0", "part0-file1", "part1"} {
		for _, ext := range []string{".spl", ".spi.sz"} {
			b, err := os.ReadFile(filepath.Join(spk, name+ext))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "spk", "v1", name+ext), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, db := range []string{"pq", "av", "spk"} {
		if err := os.WriteFile(filepath.Join(root, db, "v1", "_SUCCESS"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFormats waits until a node at base serves every format's keys.
func waitFormats(t *testing.T, base string) {
	t.Helper()
	client := &http.Client{Timeout: testTimeout}
	for path, want := range map[string]string{
		"/pq/key-7": "pq:7", "/pq/key-28": "pq:28", "/av/key-7": "av:7", "/av/key-28": "av:28",
		"/spk/Alice": "Practice", "/spk/Dylan": "Thomas",
	} {
		waitFor(t, path+" = "+want, func() error {
			resp, err := client.Get(base + path)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != want {
				return fmt.Errorf("GET %s: %d %q", path, resp.StatusCode, b)
			}
			return nil
		})
	}
}

// TestFormatsRemote serves Parquet, Avro and Sparkey versions from S3 and
// from the Object Store, published with spangle publish, with no
// configuration of their formats.
func TestFormatsRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	root := t.TempDir()
	writeFormats(t, root)
	bin := buildBinary(t)

	backend := s3mem.New()
	if err := backend.CreateBucket("spangle-data"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithoutVersioning()).Server())
	t.Cleanup(srv.Close)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
		_, err = backend.PutObject("spangle-data", "datasets/"+filepath.ToSlash(rel), meta, bytes.NewReader(body), int64(len(body)), nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "spangle.toml")
	body := fmt.Sprintf("require_success_file = true\n[s3]\nendpoint = %q\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\npath_style = true\n", srv.URL)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, bin, false, "--config", config, "--source", "s3://spangle-data/datasets")
	waitFormats(t, s.http)
	s.stop(t)

	s = startServe(t, bin, true, "--source", "nats-object://spangle-data")
	for _, db := range []string{"pq", "av", "spk"} {
		code, _, stderr := runCLI(t, bin, "publish", filepath.Join(root, db, "v1"), "--to", "nats-object://spangle-data",
			"--db", db, "--version", "v1", "--nats", s.nats, "--quiet")
		if code != 0 {
			t.Fatalf("publish %s: exit %d\n%s", db, code, stderr)
		}
	}
	waitFormats(t, s.http)
	s.stop(t)
}
