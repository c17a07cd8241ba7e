package spangle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestRun starts a complete node as a library call, on a source directory
// and an embedded NATS server on a random port: it serves a key over HTTP,
// then Run returns once its context ends, having released everything
// (the package's goleak check fails otherwise) — the data dir can be
// opened again at once.
func TestRun(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 2, nodetest.Numbered("v1", 50))
	cfg := spangle.DefaultConfig()
	cfg.Node.Source = root
	cfg.Node.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Bind = "127.0.0.1:0"
	cfg.NATS.EmbeddedListen = "127.0.0.1:-1"
	cfg.Logger = nodetest.Logger()
	cfg.ShutdownTimeout = 30 * time.Second
	// A zero GCPercent leaves the process's setting alone (an embedder's).
	cfg.GCPercent = 0
	defer debug.SetGCPercent(debug.SetGCPercent(123))

	s, err := spangle.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(123); got != 123 {
		t.Errorf("Start with GCPercent 0 set the GC percent to %d", got)
	}
	url := "http://" + s.Addr().String() + "/d/key-7"
	nodetest.WaitFor(t, 30*time.Second, "key-7 served", func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "v1:7" {
			return errors.New(resp.Status + " " + string(body))
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(url); err == nil {
		t.Fatal("the HTTP door still answers after Shutdown")
	}

	// Run on the same data dir: the lock was released; it serves until
	// its context ends.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- spangle.Run(ctx, cfg) }()
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestStartRegionRefused: a region name that is not a valid JetStream
// domain, or a region with the embedded server and no hub, stops Start
// with an error naming the key.
func TestStartRegionRefused(t *testing.T) {
	for _, tc := range []struct{ name, hub, want string }{
		{"eu.west", "nats-leaf://127.0.0.1:7422", "region.name"},
		{"eu", "", "region.hub"},
		{"eu", "http://127.0.0.1:7422", "region.hub"},
	} {
		cfg := spangle.DefaultConfig()
		cfg.Node.Source = t.TempDir()
		cfg.Node.DataDir = filepath.Join(t.TempDir(), "data")
		cfg.Bind = "127.0.0.1:0"
		cfg.NATS.EmbeddedListen = "127.0.0.1:-1"
		cfg.NATS.Region.Name, cfg.NATS.Region.Hub = tc.name, tc.hub
		s, err := spangle.Start(cfg)
		if err == nil {
			s.Shutdown(context.Background())
			t.Fatalf("name %q hub %q: started", tc.name, tc.hub)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("name %q hub %q: %v, want it to name %s", tc.name, tc.hub, err, tc.want)
		}
	}
}
