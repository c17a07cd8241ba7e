// Package nodetest runs a bare node.Node for a test: started, waited for
// until it has loaded its first source listing, and shut down at test
// cleanup. It also writes the source a node reads: versions of
// SequenceFiles (WriteVersion, WriteFile, Numbered) and deltas over them
// (WriteDelta, Deletes). It is for tests only.
// (In-process clusters with the NATS and HTTP front doors are
// edge/internal/edgetest, which writes sources with this package.)
//
// It does not import node, so that node's own in-package tests can use
// it too: Start takes the few methods it needs of a *node.Node as the
// interface Node. Of ours it imports only blocks and blocks/seqfile (a
// delta's _DELETES is blocks' format), so the in-package tests of blocks
// and of what blocks imports cannot use it.
//
// # Caveats
//
// Start blocks until Loaded, for at most 30s: a cluster node that
// waits for peers not started yet before it loads must be started
// otherwise.
package nodetest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"
)

// timeout bounds Start's wait for the first listing, and the shutdown at
// cleanup.
const timeout = 30 * time.Second

// Node is the lifecycle of a *node.Node.
type Node interface {
	Start() error
	Loaded() <-chan struct{}
	Shutdown(context.Context) error
}

// Start starts n, made by node.New and not started yet, and waits until
// it has loaded its first source listing, failing the test after 30s. n
// is shut down at cleanup; an error of Shutdown fails the test.
func Start(t testing.TB, n Node) {
	t.Helper()
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Errorf("node shutdown: %v", err)
		}
	})
	select {
	case <-n.Loaded():
	case <-time.After(timeout):
		t.Fatal("node did not load")
	}
}

// Logger returns a logger for a node under test: it discards, unless the
// test runs with -v, when it writes text to stderr.
func Logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil)) // formats each record, as a real sink would
}
