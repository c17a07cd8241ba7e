package blocks

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spangledb/spangle/blocks/sparkey"
)

// Sparkey file names: a log and its framed-Snappy compressed hash index.
const (
	sparkeyLog   = ".spl"
	sparkeyIndex = ".spi.sz"
)

// sparkeyLayout is a version of Sparkey files as sequins reads them: logs
// (.spl) each beside its index (.spi.sz, same base name), the partition
// of a log the first run of digits in its name, several logs per
// partition allowed; N is the number of distinct partitions.
type sparkeyLayout struct {
	n     int
	part  []int // by file: its partition
	index []int // by file: a log's index file, -1 for an index
	logs  []int // the logs, in spec order
}

// isSparkey reports whether spec's files are read as Sparkey: forced, or
// a log among them.
func isSparkey(spec BuildSpec) bool {
	if spec.Format == FormatSparkey {
		return true
	}
	if spec.Format != FormatAuto {
		return false
	}
	for _, f := range spec.Files {
		if strings.HasSuffix(f.Name, sparkeyLog) {
			return true
		}
	}
	return false
}

// layoutSparkey pairs logs and indexes and numbers partitions. Other files
// beside them, a log without its index and partition numbers other than
// 0..N-1 are refused; an index without its log is not read (sequins'
// listing skips indexes).
func layoutSparkey(files []SourceFile) (*sparkeyLayout, error) {
	l := &sparkeyLayout{part: make([]int, len(files)), index: make([]int, len(files))}
	byName := map[string]int{}
	for i, f := range files {
		byName[f.Name] = i
		l.index[i] = -1
	}
	parts := map[int]bool{}
	for i, f := range files {
		switch {
		case strings.HasSuffix(f.Name, sparkeyIndex):
			continue
		case !strings.HasSuffix(f.Name, sparkeyLog):
			return nil, fmt.Errorf("%w: %s is not a Sparkey file (.spl, .spi.sz) among Sparkey files: a version holds one kind",
				ErrBadInput, f.Name)
		}
		base := strings.TrimSuffix(f.Name, sparkeyLog)
		ix, ok := byName[base+sparkeyIndex]
		if !ok {
			return nil, fmt.Errorf("%w: Sparkey log %s has no index %s", ErrBadInput, f.Name, base+sparkeyIndex)
		}
		p, ok := partitionOfName(f.Name)
		if !ok {
			return nil, fmt.Errorf("%w: Sparkey log %s: no digits in its name to number its partition", ErrBadInput, f.Name)
		}
		l.part[i], l.part[ix], l.index[i] = p, p, ix
		l.logs = append(l.logs, i)
		parts[p] = true
	}
	l.n = len(parts)
	for p := range parts {
		if p >= l.n {
			var ps []int
			for p := range parts {
				ps = append(ps, p)
			}
			sort.Ints(ps)
			return nil, fmt.Errorf("%w: Sparkey logs number partitions %v: want 0 to %d, one number per partition", ErrBadInput, ps, l.n-1)
		}
	}
	return l, nil
}

// partitionOfName is the first run of digits in a file name:
// part-00012-00034.spl is partition 12.
func partitionOfName(name string) (int, bool) {
	start := strings.IndexAny(name, "0123456789")
	if start < 0 {
		return 0, false
	}
	end := start
	for end < len(name) && name[end] >= '0' && name[end] <= '9' {
		end++
	}
	p, err := strconv.Atoi(name[start:end])
	if err != nil || p >= maxFiles {
		return 0, false
	}
	return p, true
}

// loadSparkey reads the logs of held partitions only: the others are
// skipped by name, unread. Every key is checked against its log's
// partition.
func (b *builder) loadSparkey(ctx context.Context) error {
	l := b.sparkey
	var files []int
	for i := range b.spec.Files {
		b.files[i].Partition = l.part[i]
	}
	for _, i := range l.logs {
		if b.slot[l.part[i]] < 0 {
			continue
		}
		files = append(files, i)
	}
	return b.loadFiles(ctx, files, l.part)
}

// openSparkey opens log i's reader after checking that its index belongs
// to it.
func (b *builder) openSparkey(ctx context.Context, rc io.ReadCloser, r io.Reader, i int) (recordReader, io.Closer, error) {
	name := b.spec.Files[i].Name
	lr, err := sparkey.NewReader(r, name)
	if err != nil {
		return nil, rc, err
	}
	closer := closerFunc(func() error { _ = lr.Close(); return rc.Close() })
	ix := b.spec.Files[b.sparkey.index[i]]
	irc, err := ix.Open(ctx)
	if err != nil {
		return nil, closer, fmt.Errorf("open %s: %w", ix.Name, err)
	}
	defer irc.Close()
	if err := sparkey.CheckIndex(irc, ix.Name, lr.Header().FileID); err != nil {
		return nil, closer, err
	}
	return lr, closer, nil
}
