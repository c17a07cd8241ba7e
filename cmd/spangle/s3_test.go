package main

import (
	"bytes"
	"fmt"
	"github.com/spangledb/spangle"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/spangledb/spangle/node/source/s3"
)

func TestConfigS3(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := spangle.DefaultConfig()
	err := spangle.LoadConfig(write("s3.toml", `
source = "s3://bucket/some/prefix"
[s3]
region = "eu-west-1"
access_key_id = "AKID"
secret_access_key = "SECRET"
endpoint = "http://127.0.0.1:9000"
path_style = true
insecure = true
`), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := s3.DefaultConfig()
	want.Region, want.AccessKeyID, want.SecretAccessKey = "eu-west-1", "AKID", "SECRET"
	want.Endpoint, want.PathStyle, want.Insecure = "http://127.0.0.1:9000", true, true
	if cfg.S3 != want || cfg.Node.Source != "s3://bucket/some/prefix" {
		t.Fatalf("s3 config %+v, source %q; want %+v", cfg.S3, cfg.Node.Source, want)
	}

	// Without the table: AWS, credentials from the environment.
	if def := spangle.DefaultConfig().S3; def != s3.DefaultConfig() || def.Endpoint != s3.DefaultEndpoint {
		t.Fatalf("default s3 config %+v", def)
	}

	for name, body := range map[string]string{
		"unknown key":        "[s3]\nbucket = \"x\"\n",
		"key without secret": "[s3]\naccess_key_id = \"AKID\"\n",
		"endpoint with path": "[s3]\nendpoint = \"http://host:9000/minio\"\n",
		"bad path_style":     "[s3]\npath_style = \"yes\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg := spangle.DefaultConfig()
			if err := spangle.LoadConfig(write("bad.toml", body), &cfg); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestServeS3 runs "spangle serve" on an S3 source (an in-process S3
// server on loopback), reads a version, then one published while it runs
// (SIGHUP), and a bad source URL fails at start.
func TestServeS3(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	backend := s3mem.New()
	if err := backend.CreateBucket("spangle-data"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithoutVersioning()).Server())
	t.Cleanup(srv.Close)

	// Versions are written as files, then uploaded as <prefix>/<db>/<version>/<file>.
	upload := func(db, v string) {
		t.Helper()
		root := t.TempDir()
		writeVersion(t, root, db, v, 3, 100)
		err := filepath.WalkDir(filepath.Join(root, db, v), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			body, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
			_, err = backend.PutObject("spangle-data", "datasets/"+db+"/"+v+"/"+d.Name(), meta, bytes.NewReader(body), int64(len(body)), nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	upload("users", "v1")

	config := filepath.Join(t.TempDir(), "spangle.toml")
	body := fmt.Sprintf(`
require_success_file = true
[s3]
endpoint = %q
access_key_id = "test"
secret_access_key = "test"
path_style = true
`, srv.URL)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	s := startServe(t, bin, false, "--config", config, "--source", "s3://spangle-data/datasets")
	client := &http.Client{Timeout: testTimeout}
	waitValue := func(key, value, version string) {
		t.Helper()
		waitFor(t, key+" = "+value, func() error {
			resp, err := client.Get(s.http + key)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := resp.Header.Get("X-Spangle-Version"); resp.StatusCode != 200 || string(b) != value || got != version {
				return fmt.Errorf("GET %s: %d %q version %q", key, resp.StatusCode, b, got)
			}
			return nil
		})
	}
	waitValue("/users/key-7", "v1:7", "v1")

	upload("users", "v2")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitValue("/users/key-42", "v2:42", "v2")
	req, _ := http.NewRequest(http.MethodGet, s.http+"/users/", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "s3://spangle-data/datasets/users/v2") {
		t.Fatalf("status does not show the S3 path of v2:\n%s", b)
	}
	s.stop(t)

	code, _, stderr := runCLI(t, bin, "serve", "--config", config, "--source", "s3://Bad_Bucket/x",
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--bind", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "bad source URL") {
		t.Fatalf("serve with a bad s3 URL: exit %d, stderr:\n%s", code, stderr)
	}
}
