package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// memSplit is where a serving process's RSS goes after the loads: its
// mappings' resident pages from /proc/PID/smaps, summed by kind, and, for
// spangle, the Go runtime's and spangle's own figures from its /metrics.
// Sums of smaps' Rss lines (in MiB); a file mapping's privately written
// pages (Anonymous) count as anonymous, as RssAnon counts them.
type memSplit struct {
	BinaryMiB    float64 `json:"binary_mib"`     // the executable's file pages (code, read-only data)
	DataFilesMiB float64 `json:"data_files_mib"` // every other mapped file but libraries: the partitions, bbolt files
	LibsMiB      float64 `json:"libs_mib"`       // shared libraries (.so) and the vDSO
	AnonMiB      float64 `json:"anon_mib"`       // anonymous pages: the Go heap, stacks, the runtime's, mappings outside Go
	DataFiles    int     `json:"data_files"`     // mappings in DataFilesMiB
	// Largest anonymous mappings' resident MiB, largest first (up to 4).
	AnonLargestMiB []float64 `json:"anon_largest_mib,omitempty"`

	// From spangle's /metrics (zero for other servers). GoHeapMiB is
	// go_memstats_heap_inuse_bytes (spans holding objects, live or not
	// yet swept); GoHeapIdleMiB the idle heap not given back
	// (heap_idle - heap_released); GoStacksMiB stack_inuse;
	// GoRuntimeMiB the runtime's own (sys - heap_sys - stack_sys: spans,
	// the GC's metadata, caches); OutsideGoMiB what AnonMiB holds beyond
	// everything the runtime has mapped and not released (sys -
	// heap_released), a floor of the anonymous mappings made outside
	// the Go heap (the index of first keys, wazero's); IndexMiB is
	// spangle_version_index_bytes and HotCacheMiB
	// spangle_hot_cache_bytes (both inside one of the figures above).
	GoHeapMiB     float64 `json:"go_heap_inuse_mib,omitempty"`
	GoHeapIdleMiB float64 `json:"go_heap_idle_kept_mib,omitempty"`
	GoStacksMiB   float64 `json:"go_stacks_mib,omitempty"`
	GoRuntimeMiB  float64 `json:"go_runtime_mib,omitempty"`
	OutsideGoMiB  float64 `json:"outside_go_mib,omitempty"`
	IndexMiB      float64 `json:"index_mib,omitempty"`
	HotCacheMiB   float64 `json:"hot_cache_mib,omitempty"`
}

// readSmaps sums smaps (the text of /proc/PID/smaps) by kind of mapping;
// exe is the executable's path.
func readSmaps(smaps []byte, exe string) memSplit {
	var m memSplit
	var anon []float64
	var path string
	var rss, anonKiB int64
	flush := func() {
		switch {
		case path == "[vdso]" || path == "[vvar]" || path == "[vsyscall]":
			m.LibsMiB += mib(rss)
		case path == "" || strings.HasPrefix(path, "["): // anonymous, [heap], [stack]
			m.AnonMiB += mib(rss)
			if rss > 0 {
				anon = append(anon, mib(rss))
			}
		default:
			m.AnonMiB += mib(anonKiB)
			file := mib(rss - anonKiB)
			switch {
			case path == exe:
				m.BinaryMiB += file
			case strings.HasSuffix(path, ".so") || strings.Contains(path, ".so."):
				m.LibsMiB += file
			default:
				m.DataFilesMiB += file
				m.DataFiles++
			}
		}
		path, rss, anonKiB = "", 0, 0
	}
	started := false
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping's first line: range perms offset dev inode [path]
			if started {
				flush()
			}
			started = true
			if len(f) >= 6 {
				path = strings.Join(f[5:], " ")
			}
			continue
		}
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Rss:":
			rss, _ = strconv.ParseInt(f[1], 10, 64)
		case "Anonymous:":
			anonKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if started {
		flush()
	}
	slices.SortFunc(anon, func(x, y float64) int { return cmp.Compare(y, x) })
	m.AnonLargestMiB = anon[:min(4, len(anon))]
	return m
}

// goMem fills m's runtime figures from one scrape of spangle's /metrics
// at url.
func (m *memSplit) goMem(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	vals := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			vals[name] += v / (1 << 20) // summed over labels, as scrapeCounter does
		}
	}
	sys, ok := vals["go_memstats_sys_bytes"]
	if !ok {
		return fmt.Errorf("%s has no go_memstats_sys_bytes", url)
	}
	released := vals["go_memstats_heap_released_bytes"]
	m.GoHeapMiB = vals["go_memstats_heap_inuse_bytes"]
	m.GoHeapIdleMiB = vals["go_memstats_heap_idle_bytes"] - released
	m.GoStacksMiB = vals["go_memstats_stack_inuse_bytes"]
	m.GoRuntimeMiB = sys - vals["go_memstats_heap_sys_bytes"] - vals["go_memstats_stack_sys_bytes"]
	m.OutsideGoMiB = m.AnonMiB - (sys - released)
	m.IndexMiB = vals["spangle_version_index_bytes"]
	m.HotCacheMiB = vals["spangle_hot_cache_bytes"]
	return nil
}

// smapsSplit reads /proc/PID/smaps, keeping a copy in dir (smaps-NAME.txt)
// to read mapping by mapping after the run.
func smapsSplit(pid int, dir, name string) (memSplit, error) {
	proc := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(proc + "/smaps")
	if err != nil {
		return memSplit{}, err
	}
	exe, _ := os.Readlink(proc + "/exe")
	if dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "smaps-"+name+".txt"), b, 0o644)
	}
	return readSmaps(b, exe), nil
}
