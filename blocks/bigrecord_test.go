//go:build linux

package blocks

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// writeGzipSeqFile writes recs as a gzip record-compressed SequenceFile.
func writeGzipSeqFile(t testing.TB, path string, recs []record) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := seqfile.NewWriter(bw, seqfile.WriterOptions{Compression: seqfile.RecordCompressed, Codec: seqfile.GzipCodec})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Append(r.k, r.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(w.Close(), bw.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// bigRecordFiles writes n files into dir, each of 100 small records and
// one value of size bytes (zeros: a few KB compressed), and returns
// their names.
func bigRecordFiles(t testing.TB, dir string, n, size int) []string {
	t.Helper()
	var names []string
	for i := range n {
		recs := []record{{k: bigKey(i, n), v: make([]byte, size)}}
		for j := range 100 {
			recs = append(recs, record{k: fmt.Appendf(nil, "small-%d-%d", i, j), v: []byte("v")})
		}
		name := fmt.Sprintf("part-%05d", i)
		writeGzipSeqFile(t, filepath.Join(dir, name), recs)
		names = append(names, name)
	}
	return names
}

// bigKey is the key of file i's big value, of a partition other than 0
// of n.
func bigKey(i, n int) []byte {
	for j := 0; ; j++ {
		k := fmt.Appendf(nil, "big-%d-%d", i, j)
		if p, _, _ := (sequinsPartitioner{}).Partition(k, n); p != 0 || n == 1 {
			return k
		}
	}
}

const (
	bigRecordBudget = 64 << 20
	bigChildEnv     = "SPANGLE_TEST_BIG_RECORDS_DIR"
)

// TestBigRecordRefused: a record whose value decompresses beyond half the
// memory budget fails the build with ErrTooLarge, naming its file and
// the budget, instead of being loaded whatever the budget (a 207 KB file
// held a 200 MiB value).
func TestBigRecordRefused(t *testing.T) {
	dir := t.TempDir()
	names := bigRecordFiles(t, dir, 1, bigRecordBudget/2+1<<20)
	s := openTestStore(t, t.TempDir(), Options{MemoryBudget: bigRecordBudget})
	_, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, dir, names),
		Partitioner: sequinsPartitioner{}})
	if !errors.Is(err, seqfile.ErrTooLarge) || !strings.Contains(err.Error(), names[0]) ||
		!strings.Contains(err.Error(), "memory budget") {
		t.Fatalf("build: %v; want ErrTooLarge naming %s and the memory budget", err, names[0])
	}
}

// TestBigRecordsBounded: four gzip record-compressed files, each of 20 KB
// holding one value just under half the memory budget, loaded four at a
// time: the build decompresses one such value at a time, so the peak RSS
// of its loads (a child process's VmHWM) stays within a bound derived from
// the budget. Without the gate the four were decompressed at once, each
// with its growing buffer, and the peak passed it.
func TestBigRecordsBounded(t *testing.T) {
	if dir := os.Getenv(bigChildEnv); dir != "" {
		buildBigRecords(t, dir)
		return
	}
	if raceEnabled {
		t.Skip("peak RSS under the race detector measures its shadow memory")
	}
	const files, value = 4, bigRecordBudget/2 - 1<<20
	dir := t.TempDir()
	bigRecordFiles(t, dir, files, value)
	peak := childPeakRSS(t, "TestBigRecordsBounded", bigChildEnv, dir, bigRecordBudget/2)
	// The child runs with GOGC off and GOMEMLIMIT half the budget, so
	// that its RSS follows what it keeps live rather than the GC's slack:
	// one value decompressing, the loads' shares, the chunks and the
	// runtime took 75 MiB here; the four values at once (each doubling
	// its reader's buffer, kept to the end of its file) 129 to 197 MiB.
	limit := int64(13 * bigRecordBudget / 8)
	t.Logf("%d files of one %d MiB value, memory budget %d MiB: build peak RSS %d MiB (bound %d MiB)",
		files, value>>20, bigRecordBudget>>20, peak>>20, limit>>20)
	if peak > limit {
		t.Errorf("peak RSS %d MiB over %d MiB", peak>>20, limit>>20)
	}
}

// childPeakRSS runs test in a child whose env has key=dir ("-" if
// dir is empty: it builds nothing) and returns the child's peak RSS
// (VmHWM, its own: the rusage of a child counts its parent's RSS at the
// fork), with the GC driven by GOMEMLIMIT limit alone (GOGC off), so that
// its RSS follows what it keeps live rather than the GC's slack.
func childPeakRSS(t *testing.T, test, key, dir string, limit int64) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), key+"="+cmp.Or(dir, "-"), "GOGC=off", fmt.Sprintf("GOMEMLIMIT=%d", limit))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, rest, ok := bytes.Cut(out, []byte("VmHWM:"))
	var kib int64
	if _, err := fmt.Sscan(string(rest), &kib); !ok || err != nil {
		t.Fatalf("child printed no VmHWM: %v\n%s", err, out)
	}
	return kib << 10
}

// printPeakRSS prints the process's peak RSS (VmHWM) for childPeakRSS.
func printPeakRSS(t *testing.T) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if strings.HasPrefix(line, "VmHWM:") {
			fmt.Print(strings.TrimSuffix(line, "kB\n"), "\n")
		}
	}
}

// buildBigRecords, in the child, builds the files of dir ("-": none)
// and prints its peak RSS.
func buildBigRecords(t *testing.T, dir string) {
	defer printPeakRSS(t)
	if dir == "-" {
		return
	}
	names := dirNames(t, dir)
	// This node holds partition 0 only, where no big value goes: every
	// file is read and every value decompressed (a node reads all files
	// and keeps its partitions), but none is written, so that the peak is
	// the load's.
	// The files open together (a barrier), so that the four loads run at
	// once, as they may.
	files := sourceFiles(t, dir, names)
	var opened sync.WaitGroup
	opened.Add(len(files))
	for i := range files {
		open := files[i].Open
		files[i].Open = func(ctx context.Context) (io.ReadCloser, error) {
			opened.Done()
			done := make(chan struct{})
			go func() { opened.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second): // a file opened twice: go on
			}
			return open(ctx)
		}
	}
	s := openTestStore(t, t.TempDir(), Options{MemoryBudget: bigRecordBudget, MaxParallelLoads: 4})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: files, Partitions: []int{0}})
	if m := v.Manifest(); len(m.Partitions) != 1 {
		t.Fatalf("partitions %v", m.Partitions)
	}
}
