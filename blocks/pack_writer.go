package blocks

import (
	"os"
	"slices"

	"github.com/spangledb/spangle/blocks/internal/boltpack"
)

// packWriter writes a partition file by laying out its bbolt pages
// directly (boltpack): the default, several times faster than bbolt
// transactions.
type packWriter struct {
	w    *boltpack.Writer
	path string
}

// newPackWriter creates the partition file path with pages of pageSize
// bytes (0: the OS page size).
func newPackWriter(path string, pageSize int) (*packWriter, error) {
	w, err := boltpack.Create(path, boltpack.Options{PageSize: pageSize})
	if err != nil {
		return nil, err
	}
	if err := w.Bucket(dataBucket); err != nil {
		_ = w.Close()
		return nil, err
	}
	return &packWriter{w: w, path: path}, nil
}

func (p *packWriter) put(k, v []byte) error { return p.w.Put(k, v) }

func (p *packWriter) finish(meta map[string][]byte) error {
	if err := p.w.Bucket(metaBucket); err != nil {
		return err
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := p.w.Put([]byte(k), meta[k]); err != nil {
			return err
		}
	}
	return p.w.Finish()
}

func (p *packWriter) syncClose() (int64, error) {
	if err := p.w.Sync(); err != nil {
		_ = p.w.Close()
		return 0, err
	}
	return p.w.Size(), p.w.Close()
}

// checksum is the file's split checksum, hashed as it was written.
func (p *packWriter) checksum() string { return splitChecksum(p.w.Sums()) }

func (p *packWriter) abort() {
	_ = p.w.Close()
	_ = os.Remove(p.path)
}
