package blocks

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// A partition file's checksum (PartitionInfo.FileChecksum) is one of:
//
//	xxh64:<16 hex>          XXH64 (seed 0) of the whole file; manifests
//	                        written before split sums, and files written
//	                        with Options.TxWrites
//	xxh64s:<n>:<16 hex>     XXH64 of the 16 bytes XXH64(file[:n]) and
//	                        XXH64(file[n:]), big-endian: the default writer
//	                        writes the first n bytes (bbolt's meta pages)
//	                        last and the rest in order, so it hashes both
//	                        as it writes and the file is never read back
//
// Both are checked in one sequential read (FileSum).
const (
	sumWhole = "xxh64:"
	sumSplit = "xxh64s:"
)

// splitChecksum formats a split checksum of a file whose first headLen
// bytes hash to head and the rest to body.
func splitChecksum(headLen int64, head, body uint64) string {
	return fmt.Sprintf("%s%d:%016x", sumSplit, headLen, combineSums(head, body))
}

func combineSums(head, body uint64) uint64 {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], head)
	binary.BigEndian.PutUint64(b[8:], body)
	return xxhash.Sum64(b[:])
}

// FileSum checks a partition file's bytes, given in order through Write,
// against a PartitionInfo.FileChecksum of either kind: a copy is checked
// as it arrives.
type FileSum struct {
	want    string
	split   bool
	headLen int64
	n       int64
	head    *xxhash.Digest
	body    *xxhash.Digest
}

// NewFileSum returns a FileSum for the checksum want. An empty or
// malformed want is an error wrapping ErrCorrupt.
func NewFileSum(want string) (*FileSum, error) {
	s := &FileSum{want: want, head: xxhash.New(), body: xxhash.New()}
	switch {
	case strings.HasPrefix(want, sumWhole) && len(want) == len(sumWhole)+16:
	case strings.HasPrefix(want, sumSplit):
		n, hex, ok := strings.Cut(want[len(sumSplit):], ":")
		h, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || h < 0 || len(hex) != 16 {
			return nil, fmt.Errorf("%w: file checksum %q", ErrCorrupt, want)
		}
		s.split, s.headLen = true, h
	default:
		return nil, fmt.Errorf("%w: file checksum %q", ErrCorrupt, want)
	}
	return s, nil
}

// Write hashes the next bytes of the file. It never fails.
func (s *FileSum) Write(p []byte) (int, error) {
	n := len(p)
	if s.split && s.n < s.headLen {
		k := int(min(int64(len(p)), s.headLen-s.n))
		_, _ = s.head.Write(p[:k])
		p = p[k:]
		s.n += int64(k)
	}
	_, _ = s.body.Write(p)
	s.n += int64(len(p))
	return n, nil
}

// Size is the number of bytes written.
func (s *FileSum) Size() int64 { return s.n }

// Sum returns the checksum of the bytes written, in want's kind.
func (s *FileSum) Sum() string {
	if !s.split {
		return fmt.Sprintf("%s%016x", sumWhole, s.body.Sum64())
	}
	return splitChecksum(s.headLen, s.head.Sum64(), s.body.Sum64())
}

// Check reports whether the bytes written match the checksum.
func (s *FileSum) Check() error {
	if s.split && s.n < s.headLen {
		return fmt.Errorf("%w: %d bytes, shorter than the checksum's head of %d", ErrCorrupt, s.n, s.headLen)
	}
	if got := s.Sum(); got != s.want {
		return fmt.Errorf("%w: checksum %s, the manifest says %s", ErrCorrupt, got, s.want)
	}
	return nil
}

// VerifyPartitionFile checks the partition file at path against pi: its
// size (when pi records one), then its checksum (when pi records one;
// manifests written before file checksums have none). A mismatch is an
// error wrapping ErrCorrupt that names the file.
func VerifyPartitionFile(path string, pi PartitionInfo) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if pi.StoredBytes > 0 && st.Size() != pi.StoredBytes {
		return fmt.Errorf("%w: %s: %d bytes, the manifest says %d", ErrCorrupt, path, st.Size(), pi.StoredBytes)
	}
	if pi.FileChecksum == "" {
		return nil
	}
	sum, err := NewFileSum(pi.FileChecksum)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := io.CopyBuffer(sum, f, make([]byte, 256<<10)); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := sum.Check(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
