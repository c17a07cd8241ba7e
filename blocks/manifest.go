package blocks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spangledb/spangle/kvwatch/names"
)

// ManifestFormat is the manifest format this package writes and reads.
const ManifestFormat = 1

const manifestName = "manifest.json"

// errFutureFormat: a manifest written by a newer release. Such a version is
// neither listed nor deleted.
var errFutureFormat = errors.New("blocks: manifest format newer than this release")

// Manifest describes a complete version on disk. It is stored as
// manifest.json in the version directory, written last and atomically: a
// directory without a valid manifest is incomplete.
type Manifest struct {
	Format        int    `json:"format"`
	DB            string `json:"db"`
	Version       string `json:"version"`
	NumPartitions int    `json:"num_partitions"` // N, the number of source files
	// Partitioner identifies the partitioner ("sequins", "murmur3",
	// "wasm:sha256:…"), as given in BuildSpec.PartitionerID.
	Partitioner string `json:"partitioner"`
	Presharded  bool   `json:"presharded,omitempty"`
	// Partitions lists the partitions held, in increasing order.
	Partitions    []int           `json:"partitions"`
	PartitionInfo []PartitionInfo `json:"partition_info"`
	Compression   Compression     `json:"compression"`
	BuiltAt       time.Time       `json:"built_at"`
	// SourceModified is the newest modification time of the version's
	// source files, in whole seconds: the same on every node that built
	// the version from the same source. Zero (and absent) when the
	// source gives no times.
	SourceModified time.Time `json:"source_modified,omitzero"`
	BuildSeconds   float64   `json:"build_seconds"`
	// AddedAt is when Store.AddPartitions last added partitions; zero
	// (and absent from the file) if it never did.
	AddedAt time.Time  `json:"added_at,omitzero"`
	Files   []FileInfo `json:"files"`
	// Records and Bytes total PartitionInfo's.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// StoredBytes totals PartitionInfo.StoredBytes.
	StoredBytes int64 `json:"stored_bytes"`
	// Delta is set when the version was built as a delta over a base.
	Delta *DeltaInfo `json:"delta,omitempty"`
}

// DeltaInfo describes a version built as a delta, over the partitions
// held.
type DeltaInfo struct {
	Base string `json:"base"`
	// Added, Changed and Deleted count the keys the delta added, gave
	// another value, and removed; Unchanged those it upserted with the
	// value they had. A deleted key the base lacks counts nowhere.
	Added     int64 `json:"added"`
	Changed   int64 `json:"changed"`
	Unchanged int64 `json:"unchanged"`
	Deleted   int64 `json:"deleted"`
}

// PartitionInfo describes one held partition.
type PartitionInfo struct {
	Partition int `json:"partition"`
	// Records is the number of distinct keys stored.
	Records int64 `json:"records"`
	// Bytes is the size of the stored keys and values, uncompressed.
	Bytes int64 `json:"bytes"`
	// StoredBytes is the size of the partition's bbolt file.
	StoredBytes int64 `json:"stored_bytes"`
	// Checksum is "xxh64:" and 16 hex digits: XXH64 (seed 0) over every
	// stored record in key order, each as uvarint(len(key)), key,
	// uvarint(len(value)), value, with values uncompressed. It depends only
	// on the logical content: the same records give the same checksum
	// whatever the compression, writer or node. Empty for a partition a
	// delta build wrote by copying its base's stored values (Digest
	// identifies its content).
	Checksum string `json:"checksum"`
	// FileChecksum is the bbolt file's checksum, which Store.Open and
	// VerifyPartitionFile check (with StoredBytes; Open unless
	// Options.SkipVerify): "xxh64s:<n>:<16 hex>", hashed as the file was
	// written, or "xxh64:<16 hex>" over the whole file (TxWrites, and
	// older releases); see checksum.go. Empty in manifests written before
	// it existed: those files are checked by size only.
	FileChecksum string `json:"file_checksum,omitempty"`
	// Digest is the partition's records' Digest (digest.go), which a
	// version's _DIGEST file states: order-independent, so that a delta's
	// can be computed from its base's. Empty in manifests written before
	// it existed.
	Digest string `json:"digest,omitempty"`
}

// FileInfo describes one source file.
type FileInfo struct {
	Name string `json:"name"`
	// Size in bytes: SourceFile.Size, or what was read when that was -1;
	// -1 if unknown.
	Size int64 `json:"size"`
	// Records read from the file; -1 if it was not read in full (a
	// presharded file of a partition not held).
	Records int64 `json:"records"`
	// Partition is the partition a presharded file holds (that of its
	// first record); -1 for an empty presharded file, and always -1 when
	// the version is not presharded.
	Partition int `json:"partition"`
}

// partitionFile is the name of partition p's bbolt file.
func partitionFile(p int) string { return fmt.Sprintf("p-%05d.bolt", p) }

// partitionFileRE matches the names partitionFile makes.
var partitionFileRE = regexp.MustCompile(`^p-[0-9]{5,}\.bolt$`)

func checkNames(db, version string) error {
	if !names.Valid(db) {
		return fmt.Errorf("%w: db %q", ErrInvalidName, db)
	}
	if !names.Valid(version) {
		return fmt.Errorf("%w: version %q", ErrInvalidName, version)
	}
	return nil
}

// readManifest reads and validates dir's manifest. A missing, torn or
// inconsistent manifest is an error wrapping ErrCorrupt or os.ErrNotExist.
func readManifest(dir, db, version string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, filepath.Join(dir, manifestName), err)
	}
	if m.Format > ManifestFormat {
		return nil, fmt.Errorf("%w: %s: format %d", errFutureFormat, filepath.Join(dir, manifestName), m.Format)
	}
	if err := m.validate(db, version); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, filepath.Join(dir, manifestName), err)
	}
	for _, p := range m.Partitions {
		if _, err := os.Stat(filepath.Join(dir, partitionFile(p))); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, dir, err)
		}
	}
	return &m, nil
}

func (m *Manifest) validate(db, version string) error {
	switch {
	case m.Format != ManifestFormat:
		return fmt.Errorf("format %d, want %d", m.Format, ManifestFormat)
	case m.DB != db || m.Version != version:
		return fmt.Errorf("names %s/%s, want %s/%s", m.DB, m.Version, db, version)
	case m.NumPartitions < 0:
		return fmt.Errorf("num_partitions %d", m.NumPartitions)
	case len(m.PartitionInfo) != len(m.Partitions):
		return fmt.Errorf("%d partition infos for %d partitions", len(m.PartitionInfo), len(m.Partitions))
	}
	if _, err := m.Compression.normalize(); err != nil {
		return err
	}
	for i, p := range m.Partitions {
		if p < 0 || p >= m.NumPartitions || (i > 0 && p <= m.Partitions[i-1]) {
			return fmt.Errorf("partitions %v not increasing in [0,%d)", m.Partitions, m.NumPartitions)
		}
		if m.PartitionInfo[i].Partition != p {
			return fmt.Errorf("partition info %d is for partition %d, want %d", i, m.PartitionInfo[i].Partition, p)
		}
	}
	return nil
}

// writeManifest writes m to dir atomically: a temporary file, fsync,
// rename, fsync of dir.
func writeManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, manifestName+tmpSuffix)
	if err := writeFileSync(tmp, append(b, '\n')); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, manifestName)); err != nil {
		return err
	}
	return syncDir(dir)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// syncDir fsyncs a directory so that entries created or renamed in it
// survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
