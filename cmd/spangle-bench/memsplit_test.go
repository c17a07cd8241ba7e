package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"testing"
)

// TestReadSmaps: each mapping's resident pages land in one part by its
// path, a file mapping's written pages among the anonymous ones.
func TestReadSmaps(t *testing.T) {
	const smaps = `00400000-00800000 r-xp 00000000 08:01 123 /usr/bin/spangle
Size:               4096 kB
Rss:                2048 kB
Anonymous:             0 kB
00800000-00900000 rw-p 00400000 08:01 123 /usr/bin/spangle
Rss:                 100 kB
Anonymous:            60 kB
7f0000000000-7f0000400000 r--s 00000000 08:01 456 /data/db/v1/part-00000.spangle
Rss:                1024 kB
Anonymous:             0 kB
7f0000400000-7f0004400000 rw-p 00000000 00:00 0 
Rss:                8192 kB
Anonymous:          8192 kB
7f0004400000-7f0004500000 rw-p 00000000 00:00 0 
Rss:                 512 kB
Anonymous:           512 kB
7f0005000000-7f0005100000 r-xp 00000000 08:01 789 /lib/x86_64-linux-gnu/libc.so.6
Rss:                 256 kB
Anonymous:             0 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Rss:                  32 kB
Anonymous:            32 kB
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0 [vdso]
Rss:                   8 kB
Anonymous:             0 kB
`
	m := readSmaps([]byte(smaps), "/usr/bin/spangle")
	want := memSplit{
		BinaryMiB: 2088.0 / 1024, DataFilesMiB: 1, LibsMiB: 264.0 / 1024, DataFiles: 1,
		AnonMiB:        (60 + 8192 + 512 + 32) / 1024.0,
		AnonLargestMiB: []float64{8, 0.5, 32.0 / 1024},
	}
	if m.BinaryMiB != want.BinaryMiB || m.DataFilesMiB != want.DataFilesMiB || m.LibsMiB != want.LibsMiB ||
		m.AnonMiB != want.AnonMiB || m.DataFiles != want.DataFiles || len(m.AnonLargestMiB) != 3 ||
		m.AnonLargestMiB[0] != 8 || m.AnonLargestMiB[1] != 0.5 || m.AnonLargestMiB[2] != 32.0/1024 {
		t.Errorf("readSmaps = %+v, want %+v", m, want)
	}
}

// TestSmapsSplitSelf reads this test's own smaps: its binary's pages and
// its heap are resident, and the parts add up to about its VmRSS.
func TestSmapsSplitSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("smaps is Linux's")
	}
	dir := t.TempDir()
	m, err := smapsSplit(os.Getpid(), dir, "self")
	if err != nil {
		t.Fatal(err)
	}
	rss, err := memKiB(os.Getpid(), "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	if m.BinaryMiB <= 0 || m.AnonMiB <= 0 {
		t.Errorf("binary %.1f MiB, anon %.1f MiB: want both resident", m.BinaryMiB, m.AnonMiB)
	}
	sum := m.BinaryMiB + m.DataFilesMiB + m.LibsMiB + m.AnonMiB
	if r := mib(rss); sum < r/2 || sum > r*2 {
		t.Errorf("parts sum to %.1f MiB, VmRSS %.1f MiB", sum, r)
	}
	if _, err := os.Stat(dir + "/smaps-self.txt"); err != nil {
		t.Errorf("no copy of smaps: %v", err)
	}
}

// TestGoMem reads the runtime's and spangle's figures from one scrape of
// an exposition served over loopback, labelled samples summed.
func TestGoMem(t *testing.T) {
	const exposition = `# HELP go_memstats_sys_bytes x
go_memstats_sys_bytes 4.194304e+07
go_memstats_heap_sys_bytes 3.145728e+07
go_memstats_heap_inuse_bytes 2.097152e+07
go_memstats_heap_idle_bytes 1.048576e+07
go_memstats_heap_released_bytes 8.388608e+06
go_memstats_stack_sys_bytes 2.097152e+06
go_memstats_stack_inuse_bytes 1.048576e+06
spangle_version_index_bytes{db="a"} 1.048576e+06
spangle_version_index_bytes{db="b"} 1.048576e+06
spangle_hot_cache_bytes 524288
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, exposition) }))
	defer srv.Close()
	m := memSplit{AnonMiB: 40}
	if err := m.goMem(srv.URL); err != nil {
		t.Fatal(err)
	}
	want := memSplit{AnonMiB: 40, GoHeapMiB: 20, GoHeapIdleMiB: 2, GoStacksMiB: 1, GoRuntimeMiB: 8, OutsideGoMiB: 40 - (40 - 8), IndexMiB: 2, HotCacheMiB: 0.5}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("goMem = %+v, want %+v", m, want)
	}
}
