package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFileSourceRefusesNonRegular: a directory, a dangling symlink, a
// FIFO, a socket-like special file or a symlink leaving the root among a
// version's data files fails its listing with a reason naming the entry,
// instead of building the version from the other files. A symlink within
// the root is followed, and hidden/underscore names are still skipped.
func TestFileSourceRefusesNonRegular(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, path string)
		want  error
		says  string
		follw bool // AllowExternalSymlinks
	}{
		{"directory", func(t *testing.T, p string) { must0(t, os.Mkdir(p, 0o755)) }, ErrNotRegular, "is a directory", false},
		{"dangling symlink", func(t *testing.T, p string) { must0(t, os.Symlink(p+".gone", p)) }, ErrNotRegular, "dangling symlink", false},
		{"FIFO", func(t *testing.T, p string) { must0(t, syscall.Mkfifo(p, 0o644)) }, ErrNotRegular, "is a FIFO", false},
		{"symlink outside the root", func(t *testing.T, p string) { must0(t, os.Symlink(outside, p)) }, ErrSymlinkOutside, "resolves to", false},
		{"symlink outside, allowed", func(t *testing.T, p string) { must0(t, os.Symlink(outside, p)) }, nil, "", true},
		{"symlink inside the root", func(t *testing.T, p string) {
			must0(t, os.Symlink(filepath.Join(filepath.Dir(p), "part-00000"), p))
		}, nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeVersion(t, root, "d", "v1", 3, 30)
			dir := filepath.Join(root, "d", "v1")
			tc.make(t, filepath.Join(dir, "part-00009"))
			must0(t, os.Mkdir(filepath.Join(dir, "_logs"), 0o755)) // skipped, as Hadoop's
			src, err := OpenFileSource(root, tc.follw)
			if err != nil {
				t.Fatal(err)
			}
			files, err := src.ListFiles(context.Background(), "d", "v1")
			if tc.want == nil {
				if err != nil || len(files) != 4 {
					t.Fatalf("ListFiles: %d files, %v; want 4", len(files), err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "part-00009") ||
				!strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ListFiles: %v; want %v naming part-00009 and %q", err, tc.want, tc.says)
			}
		})
	}
}

// TestPartialVersionNotActive: a node never activates a version one of
// whose data entries is a directory: v2 fails with the reason in its
// status, and v1 keeps serving every key.
func TestPartialVersionNotActive(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 4, 40)
	n := newTestNode(t, root, nil)
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })

	writeVersion(t, root, "d", "v2", 4, 40)
	p3 := filepath.Join(root, "d", "v2", "part-00003")
	must0(t, os.Remove(p3))
	must0(t, os.Mkdir(p3, 0o755))
	n.Refresh()
	waitFor(t, "v2 failed", func() bool {
		return n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()].State == StateError
	})
	if st := n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()]; !strings.Contains(st.Error, "part-00003 is a directory") {
		t.Fatalf("v2: %+v", st)
	}
	if right, _ := readAllKeys(t, n, "d", "v1", 40); right != 40 || n.activeVersion("d") != "v1" {
		t.Fatalf("v1 serves %d of 40 keys, active %q", right, n.activeVersion("d"))
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestForcedRefreshNotLostBehindAnnounce: a SIGHUP (Refresh) right after
// an announcement, while its wake-up is still queued, still forces the
// next refresh. (Both once travelled on one buffered channel of bools, and
// the forced one was dropped.) The node is not started, so nothing drains
// the queue between the two calls.
func TestForcedRefreshNotLostBehindAnnounce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Source, cfg.DataDir = t.TempDir(), t.TempDir()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Announce("d", "v3") // queues a wake-up
	n.Refresh()           // must not be lost behind it
	select {
	case <-n.refreshCh:
	default:
		t.Fatal("no wake-up queued")
	}
	if !n.forceRefresh.Swap(false) {
		t.Fatal("the forced refresh was lost behind the announcement")
	}
	n.Announce("d", "v4")
	<-n.refreshCh
	if n.forceRefresh.Load() {
		t.Fatal("an announcement alone forced a refresh")
	}
}

// TestFallbackToOlderVersion: a fresh node whose newest version fails to
// build serves the newest one that builds, and switches to the newer one
// on its retry schedule once that one builds.
func TestFallbackToOlderVersion(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 2, 20)
	bad := filepath.Join(root, "d", "v2")
	must0(t, os.MkdirAll(bad, 0o755))
	must0(t, os.WriteFile(filepath.Join(bad, "part-00000"), []byte("not a SequenceFile"), 0o644))
	must0(t, os.WriteFile(filepath.Join(bad, "_SUCCESS"), nil, 0o644))
	n := newTestNode(t, root, func(c *Config) { c.RetryFailedAfter = 50 * time.Millisecond })
	waitFor(t, "v1 serving although v2 is newer", func() bool { return n.activeVersion("d") == "v1" })
	if right, _ := readAllKeys(t, n, "d", "v1", 20); right != 20 {
		t.Fatalf("v1 serves %d of 20 keys", right)
	}
	if st := n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()]; st.State != StateError || st.Error == "" {
		t.Fatalf("v2: %+v", st)
	}

	must0(t, os.RemoveAll(bad))
	writeVersion(t, root, "d", "v2", 2, 20)
	waitFor(t, "v2 active on its retry schedule", func() bool { return n.activeVersion("d") == "v2" })
}
