package spangle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestAccessLogRefresh: with [http] access_log, a node logs its
// lookups; Refresh (SIGHUP) reopens the file after logrotate renamed
// it, and Shutdown writes the last lines.
func TestAccessLogRefresh(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 2, nodetest.Numbered("v1", 50))
	cfg := spangle.DefaultConfig()
	cfg.Node.Source = root
	cfg.Node.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Bind = "127.0.0.1:0"
	cfg.NATS.EmbeddedListen = "127.0.0.1:-1"
	cfg.Logger = nodetest.Logger()
	logPath := filepath.Join(t.TempDir(), "access.log")
	cfg.AccessLog.Path = logPath
	s, err := spangle.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(key string) error {
		resp, err := http.Get("http://" + s.Addr().String() + "/d/" + key)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	nodetest.WaitFor(t, 30*time.Second, "key-7 served", func() error { return get("key-7") })
	nodetest.WaitFor(t, 10*time.Second, "the line of key-7", func() error {
		b, err := os.ReadFile(logPath)
		if err != nil || !strings.Contains(string(b), `"GET /d/key-7 HTTP/1.1" 200 4 `) {
			return errors.New("not yet")
		}
		return err
	})
	rotated := logPath + ".1"
	if err := os.Rename(logPath, rotated); err != nil {
		t.Fatal(err)
	}
	s.Refresh()
	nodetest.WaitFor(t, 10*time.Second, "the file reopened", func() error {
		_, err := os.Stat(logPath)
		return err
	})
	if err := get("key-8"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(rotated)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(old), "key-8") || !strings.Contains(string(cur), `"GET /d/key-8 HTTP/1.1" 200 4 `) || !strings.Contains(string(cur), `db="d" version="v1"`) {
		t.Errorf("rotated:\n%s\ncurrent:\n%s", old, cur)
	}
}
