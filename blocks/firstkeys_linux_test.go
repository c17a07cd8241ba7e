package blocks

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// rssFile is the process's RssFile, in bytes.
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for line := range bytes.Lines(b) {
		if f := bytes.Fields(line); len(f) == 3 && string(f[0]) == "RssFile:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssFile")
	return 0
}

// TestBlockIndexUnmapsPages: opening an s2-blocks version, whose index
// walk reads every page of its files, leaves them out of the process's
// resident set (they were all in it without unmapPages: the test fails).
func TestBlockIndexUnmapsPages(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 1, perFile: 100_000, seed: 13})
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{})
	build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks}).Close()
	st, err := os.Stat(filepath.Join(dir, "dbs", "db", "v1", partitionFile(0)))
	if err != nil {
		t.Fatal(err)
	}
	before := rssFile(t)
	v, err := s.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	grew := rssFile(t) - before
	if v.contents.Load().parts[0].index == nil {
		t.Fatal("no index")
	}
	if grew > st.Size()/4 {
		t.Errorf("opening a %d-byte partition file made the RSS %d bytes larger", st.Size(), grew)
	}
	t.Logf("file %d bytes, RssFile %+d", st.Size(), grew)
}

// TestBlockIndexOffHeap: an s2-blocks version's index of first keys is
// not on the Go heap (the heap's live bytes grow by much less than
// IndexBytes when it opens), so the collector neither scans it nor lets
// the heap grow by twice its size more. Without place, the heap grows by
// the index and more.
func TestBlockIndexOffHeap(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 1, perFile: 300_000, seed: 17, keyLen: 24})
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{})
	build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks}).Close()
	live := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := live()
	v, err := s.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	grew := live() - before
	if v.IndexBytes() < 200<<10 || grew > v.IndexBytes()/2 {
		t.Errorf("an index of %d bytes; the live heap grew by %d", v.IndexBytes(), grew)
	}
	t.Logf("index %d bytes, live heap %+d", v.IndexBytes(), grew)
	runtime.KeepAlive(v)
}
