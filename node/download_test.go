package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/source"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// faultySource injects failures into a real directory source: opens that
// fail, and readers that break after cutAfter bytes.
type faultySource struct {
	source.RangeSource

	mu        sync.Mutex
	openErr   error // returned by opens while failOpens > 0
	failOpens int
	cutAfter  int64 // a reader fails after this many bytes while cuts > 0
	cuts      int
	short     bool // a cut reader ends with io.EOF (a truncated file) instead of an error
	growing   bool // the k-th cut reader fails after k×cutAfter bytes
	opens     int
	offsets   []int64 // of every OpenAt
	fired     int     // cut readers that ended early
}

// errFlaky is the transient error faultySource injects.
var errFlaky = errors.New("connection reset by peer (injected)")

func newFaultySource(t *testing.T, root string) *faultySource {
	t.Helper()
	fs, err := source.Open(root, false)
	if err != nil {
		t.Fatal(err)
	}
	return &faultySource{RangeSource: fs.(source.RangeSource)}
}

func (s *faultySource) Open(ctx context.Context, db, version, file string) (io.ReadCloser, error) {
	return s.OpenAt(ctx, db, version, file, 0)
}

func (s *faultySource) OpenAt(ctx context.Context, db, version, file string, offset int64) (io.ReadCloser, error) {
	if !source.IsDataFile(file) {
		// _BASE, _DIGEST: read by every build; faults and counts are of
		// the data files.
		return s.RangeSource.OpenAt(ctx, db, version, file, offset)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opens++
	if offset > 0 {
		s.offsets = append(s.offsets, offset)
	}
	if s.failOpens > 0 {
		s.failOpens--
		return nil, s.openErr
	}
	rc, err := s.RangeSource.OpenAt(ctx, db, version, file, offset)
	if err != nil || s.cuts == 0 {
		return rc, err
	}
	s.cuts--
	end := errFlaky
	if s.short {
		end = io.EOF
	}
	left := s.cutAfter
	if s.growing {
		left *= int64(s.fired + 1)
	}
	return &cutReader{rc: rc, left: left, end: end, src: s}, nil
}

func (s *faultySource) counts() (opens int, offsets []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens, append([]int64(nil), s.offsets...)
}

func (s *faultySource) cutsFired() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

// cutReader fails with end after left bytes.
type cutReader struct {
	rc    io.ReadCloser
	left  int64
	end   error
	src   *faultySource
	fired bool
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		if !c.fired {
			c.fired = true
			c.src.mu.Lock()
			c.src.fired++
			c.src.mu.Unlock()
		}
		return 0, c.end
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cutReader) Close() error { return c.rc.Close() }

// seqOnly hides OpenAt: a source that can only open files from the start.
type seqOnly struct{ source.Source }

// downloadNode starts a node over src with fast retries.
func downloadNode(t *testing.T, src source.Source, retries int, reg prometheus.Registerer) *testNode {
	t.Helper()
	return newTestNode(t, src.String(), func(c *Config) {
		c.OpenedSource = src
		c.DownloadRetries = retries
		c.DownloadBackoff = time.Millisecond
		c.DownloadBackoffMax = 5 * time.Millisecond
		c.MaxParallelLoads = 1 // cuts are handed out in order, one file at a time
		c.Registerer = reg
	})
}

// checkKeys checks that every key of writeVersion(…, n) reads back.
func checkKeys(t *testing.T, n *testNode, db, version string, keys int) {
	t.Helper()
	for i := range keys {
		res, err := n.get(t, db, fmt.Sprintf("key-%d", i))
		if err != nil {
			t.Fatalf("key-%d: %v", i, err)
		}
		if want := fmt.Sprintf("%s:%d", version, i); string(res.Value) != want {
			t.Fatalf("key-%d = %q, want %q", i, res.Value, want)
		}
	}
}

// TestDownloadResumes breaks every reader of the first files mid-file: the
// build resumes each at the byte reached (ranged where the source can, by
// skipping otherwise) and serves every key.
func TestDownloadResumes(t *testing.T) {
	for _, ranged := range []bool{true, false} {
		t.Run(fmt.Sprintf("ranged=%v", ranged), func(t *testing.T) {
			root := t.TempDir()
			const keys = 2000
			writeVersion(t, root, "d", "v1", 2, keys)
			fi, err := os.Stat(filepath.Join(root, "d", "v1", "part-00000"))
			if err != nil {
				t.Fatal(err)
			}
			fs := newFaultySource(t, root)
			fs.cutAfter = fi.Size() / 5
			fs.cuts = 6 // more cuts than retries: only progress resets the count
			var src source.Source = fs
			if !ranged {
				// Each open starts again at byte 0: a cut must come later
				// than the last one for the download to progress.
				src, fs.growing = seqOnly{fs}, true
			}
			reg := prometheus.NewRegistry()
			n := downloadNode(t, src, 2, reg)
			waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
			checkKeys(t, n, "d", "v1", keys)

			fired := fs.cutsFired()
			if fired < 5 {
				t.Fatalf("only %d reads were cut", fired)
			}
			_, offsets := fs.counts()
			if ranged && len(offsets) != fired {
				t.Errorf("%d cuts, resumed at %v: want one offset per cut", fired, offsets)
			}
			if !ranged && len(offsets) != 0 {
				t.Errorf("a sequential source was asked for offsets %v", offsets)
			}
			if got := nodetest.Metric(t, reg, "spangle_download_retries_total", "db", "d"); got != float64(fired) {
				t.Errorf("retries metric = %v, want %d (one per cut)", got, fired)
			}
			if got := nodetest.Metric(t, reg, "spangle_download_failures_total", "db", "d"); got != 0 {
				t.Errorf("failures metric = %v, want 0", got)
			}
			build := n.Status().DBs["d"].Versions["v1"].Build
			if build == nil || build.Retries != int64(fired) {
				t.Errorf("status build progress %+v: want %d download retries", build, fired)
			}
		})
	}
}

// TestDownloadShortFile: a file that ends before its listed size is
// truncated in transit, not complete: it is read again from where it ended.
func TestDownloadShortFile(t *testing.T) {
	root := t.TempDir()
	const keys = 500
	writeVersion(t, root, "d", "v1", 1, keys)
	fs := newFaultySource(t, root)
	fs.cutAfter, fs.cuts, fs.short = 100, 1, true
	n := downloadNode(t, fs, 2, prometheus.NewRegistry())
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	checkKeys(t, n, "d", "v1", keys)
	if _, offsets := fs.counts(); len(offsets) != 1 || offsets[0] != 100 {
		t.Errorf("resumed at %v, want [100]", offsets)
	}
}

// TestDownloadGivesUp: opens that keep failing end the build after the
// configured retries, with an error naming the file; a permanent error is
// not retried at all. The previous version keeps serving.
func TestDownloadGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantOpens int
		wantMsg   string
	}{
		{"transient", errFlaky, 3, "giving up after 2 retries"},
		{"permanent", fmt.Errorf("access denied: %w", source.ErrPermanent), 1, "access denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeVersion(t, root, "d", "v1", 1, 10)
			fs := newFaultySource(t, root)
			reg := prometheus.NewRegistry()
			n := downloadNode(t, fs, 2, reg)
			waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })

			writeVersion(t, root, "d", "v2", 1, 10)
			before, _ := fs.counts()
			fs.mu.Lock()
			fs.failOpens, fs.openErr = 100, tc.err
			fs.mu.Unlock()
			n.Refresh()
			waitFor(t, "v2 failed", func() bool { return n.state("d", "v2") == StateError })

			st := n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()]
			if !strings.Contains(st.Error, tc.wantMsg) || !strings.Contains(st.Error, "part-00000") {
				t.Errorf("error %q: want it to contain %q and the file name", st.Error, tc.wantMsg)
			}
			if opens, _ := fs.counts(); opens-before != tc.wantOpens {
				t.Errorf("%d opens, want %d", opens-before, tc.wantOpens)
			}
			if got := nodetest.Metric(t, reg, "spangle_download_failures_total", "db", "d"); got != 1 {
				t.Errorf("failures metric = %v, want 1", got)
			}
			checkKeys(t, n, "d", "v1", 10)
		})
	}
}

// TestFailedVersionRetried: a version whose build failed is built again
// after RetryFailedAfter (doubling), without a Refresh, and becomes active
// once its source reads again.
func TestFailedVersionRetried(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 1, 10)
	fs := newFaultySource(t, root)
	n := newTestNode(t, root, func(c *Config) {
		c.OpenedSource = fs
		c.DownloadRetries = -1 // none: every failed open fails the build
		c.RetryFailedAfter = 10 * time.Millisecond
	})
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })

	writeVersion(t, root, "d", "v2", 1, 10)
	fs.mu.Lock()
	fs.failOpens, fs.openErr = 2, errFlaky
	fs.mu.Unlock()
	n.Refresh()
	waitFor(t, "v2 active", func() bool { return n.activeVersion("d") == "v2" })
	checkKeys(t, n, "d", "v2", 10)
	if got := testutil.ToFloat64(n.metrics.builds.WithLabelValues("d", "error")); got != 2 {
		t.Errorf("%v failed builds, want 2 (then one that works)", got)
	}
}
