package blocks

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// txWriter writes a partition file through bbolt transactions of batch
// keys (Options.TxWrites): sorted keys, FillPercent 1.0 set in every
// transaction (it is not persisted), no syncs until the one at the end.
type txWriter struct {
	db    *bolt.DB
	path  string
	batch int
	tx    *bolt.Tx
	b     *bolt.Bucket
	n     int
	arena []byte // keys and values of the open transaction: bbolt keeps references until commit
}

func newTxWriter(path string, batch int, expect int64) (*txWriter, error) {
	db, err := bolt.Open(path, 0o644, &bolt.Options{
		NoSync:          true,
		NoGrowSync:      true,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: int(min(expect+expect/4, 1<<30)), // avoid remaps as the file grows
	})
	if err != nil {
		return nil, err
	}
	return &txWriter{db: db, path: path, batch: batch}, nil
}

func (w *txWriter) begin(bucket []byte) error {
	tx, err := w.db.Begin(true)
	if err != nil {
		return err
	}
	b, err := tx.CreateBucketIfNotExists(bucket)
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	b.FillPercent = 1.0
	w.tx, w.b = tx, b
	return nil
}

func (w *txWriter) commit() error {
	if w.tx == nil {
		return nil
	}
	err := w.tx.Commit()
	w.tx, w.b, w.n = nil, nil, 0
	w.arena = w.arena[:0]
	return err
}

func (w *txWriter) put(k, v []byte) error {
	if w.tx == nil {
		if err := w.begin(dataBucket); err != nil {
			return err
		}
	}
	start := len(w.arena)
	w.arena = append(w.arena, k...)
	w.arena = append(w.arena, v...)
	kv := w.arena[start:]
	if err := w.b.Put(kv[:len(k):len(k)], kv[len(k):]); err != nil {
		return err
	}
	if w.n++; w.n >= w.batch {
		return w.commit()
	}
	return nil
}

func (w *txWriter) finish(meta map[string][]byte) error {
	if err := w.commit(); err != nil {
		return err
	}
	return w.db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(dataBucket); err != nil { // an empty partition
			return err
		}
		b, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		b.FillPercent = 1.0
		for k, v := range meta {
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (w *txWriter) syncClose() (int64, error) {
	if err := w.db.Sync(); err != nil {
		_ = w.db.Close()
		return 0, err
	}
	if err := w.db.Close(); err != nil {
		return 0, err
	}
	fi, err := os.Stat(w.path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// checksum is empty: bbolt writes pages out of order and in place, so the
// file is hashed by reading it back.
func (w *txWriter) checksum() string { return "" }

func (w *txWriter) abort() {
	if w.tx != nil {
		_ = w.tx.Rollback()
	}
	_ = w.db.Close()
	_ = os.Remove(w.path)
}
