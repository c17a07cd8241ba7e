package source

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// seqOnly hides OpenAt: a source that can only open files from the start.
type seqOnly struct{ Source }

// TestDownloadBandwidth reads a file through the limit, from a source that opens at an offset and from one that cannot: it cannot
// go faster than the limit allows, and every byte is counted.
func TestDownloadBandwidth(t *testing.T) {
	root := t.TempDir()
	const size = 1 << 20
	const bw = 4 << 20
	dir := filepath.Join(root, "d", "v1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := Open(root, false)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDownloads(DownloadConfig{MaxBandwidth: bw})
	for _, src := range []Source{files, seqOnly{files}} {
		start := time.Now()
		rc, err := d.Open(context.Background(), src, "d", "v1", SourceFile{Name: "f", Size: size}, new(atomic.Int64))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || got != size {
			t.Fatalf("read %d bytes, %v; want %d", got, err, size)
		}
		// The limiter starts with one burst in hand; the rest takes its time.
		if min := time.Duration(float64(size-d.chunk) / bw * float64(time.Second)); time.Since(start) < min {
			t.Errorf("read %d bytes in %v at %d B/s: want at least %v", size, time.Since(start), bw, min)
		}
	}
	if got := testutil.ToFloat64(d.bytes.WithLabelValues("d")); got != 2*size {
		t.Errorf("bytes metric = %v, want %d", got, 2*size)
	}
}
