package blocks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
)

// ImportSpec describes a version made of partition files copied from a
// peer that built them (Store.Import), instead of built from the source.
type ImportSpec struct {
	DB, Version string
	// From is the manifest of a node holding the version: its
	// version-wide fields (partition count, partitioner, compression,
	// source files and times) are the new version's.
	From *Manifest
	// Partitions are the partitions to copy, each in [0,
	// From.NumPartitions).
	Partitions []int
	// Fetch writes partition p's file into f (empty, at offset 0), checks
	// it against the manifest it copies from (FileSum) and returns that
	// manifest's entry for p. A copy that does not match must be an
	// error: Import trusts what Fetch returns. Fetch may write f again
	// from the start after a failed attempt (Truncate, Seek).
	Fetch func(ctx context.Context, p int, f *os.File) (PartitionInfo, error)
	// Parallel is how many files Fetch copies at once (each partition's
	// at most once at a time); below 1: one.
	Parallel int
	// Partial leaves out of the version a partition whose Fetch fails
	// (ctx not ended) instead of failing the import: the version's
	// manifest lists the partitions fetched, and the caller adds the
	// others (AddPartitions, from the source). Import still fails when
	// none could be fetched.
	Partial bool
}

// Import makes version spec.Version of spec.DB from partition files that
// spec.Fetch copies, fsyncs them and writes the manifest last, as Build
// does; nothing is read from the source or sorted. On failure nothing of
// the version is left. ErrExists if the version is complete here already.
func (s *Store) Import(ctx context.Context, spec ImportSpec) (*Version, error) {
	if err := checkNames(spec.DB, spec.Version); err != nil {
		return nil, err
	}
	from := spec.From
	if from == nil || spec.Fetch == nil {
		return nil, fmt.Errorf("%w: import needs From and Fetch", ErrInvalidSpec)
	}
	parts := slices.Clone(spec.Partitions)
	slices.Sort(parts)
	parts = slices.Compact(parts)
	for _, p := range parts {
		if p < 0 || p >= from.NumPartitions {
			return nil, fmt.Errorf("%w: partition %d of %d", ErrInvalidSpec, p, from.NumPartitions)
		}
	}
	ctx, release, err := s.beginBuild(ctx, spec.DB, spec.Version) // Store.Close cancels ctx
	if err != nil {
		return nil, err
	}
	defer release()

	start := time.Now()
	dir := s.versionDir(spec.DB, spec.Version)
	wrap := func(err error) error { return fmt.Errorf("blocks: import %s/%s: %w", spec.DB, spec.Version, err) }
	switch _, err := readManifest(dir, spec.DB, spec.Version); {
	case err == nil || errors.Is(err, errFutureFormat):
		return nil, fmt.Errorf("%w: %s/%s", ErrExists, spec.DB, spec.Version)
	case !errors.Is(err, fs.ErrNotExist):
		s.log.Info("blocks: replacing incomplete version", "db", spec.DB, "version", spec.Version, "reason", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, wrap(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, wrap(err)
	}
	m := &Manifest{
		Format: ManifestFormat, DB: spec.DB, Version: spec.Version,
		NumPartitions: from.NumPartitions, Partitioner: from.Partitioner, Presharded: from.Presharded,
		Partitions: parts, PartitionInfo: make([]PartitionInfo, 0, len(parts)),
		Compression: from.Compression, SourceModified: from.SourceModified, Files: from.Files,
	}
	err = func() error {
		got, err := fetchFiles(ctx, dir, parts, spec.Fetch, spec.Parallel, spec.Partial)
		if err != nil {
			return err
		}
		m.Partitions, m.PartitionInfo = got.Partitions, got.PartitionInfo
		m.Records, m.Bytes, m.StoredBytes = got.Records, got.Bytes, got.StoredBytes
		m.BuiltAt = time.Now().UTC()
		m.BuildSeconds = time.Since(start).Seconds()
		if err := m.validate(spec.DB, spec.Version); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return writeManifest(dir, m)
	}()
	if err != nil {
		if rerr := removeVersionDir(dir); rerr != nil {
			s.log.Error("blocks: removing failed import", "db", spec.DB, "version", spec.Version, "err", rerr)
		}
		return nil, wrap(err)
	}
	s.log.Info("blocks: imported", "db", spec.DB, "version", spec.Version, "partitions", len(m.Partitions),
		"stored_bytes", m.StoredBytes, "seconds", m.BuildSeconds)
	return openVersion(dir, m)
}

// importSyncs bounds the imported files being fsynced at once, beside the
// fetches: each is an open file. An fsync on a shared disk took from 5
// to 585 ms in the peercopy bench (load 20), far longer than the file's
// copy: bounded by the fetches' parallel, the copies waited for the
// disk (a wiped node's 10 files in 1.28 s, 0.4 s of them copying).
const importSyncs = 16

// fetchFiles has fetch write partitions parts' files into dir, parallel
// at once (at least one), fsyncs them and dir, and returns a manifest of
// what they hold (Partitions, PartitionInfo and the totals). A file's
// fsync runs beside the next fetches (up to importSyncs files at once)
// rather than holding its fetch's slot: the copy's network and the disk's
// flush overlap. With partial, a partition whose fetch fails (ctx not
// ended) is left out (its file removed), and fetchFiles fails only when
// every one did.
func fetchFiles(ctx context.Context, dir string, parts []int, fetch func(context.Context, int, *os.File) (PartitionInfo, error), parallel int, partial bool) (*Manifest, error) {
	infos := make([]PartitionInfo, len(parts))
	errs := make([]error, len(parts)) // of the partitions left out
	parallel = max(parallel, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	var syncs errgroup.Group // each fetched file's fsync and close
	syncs.SetLimit(max(importSyncs, parallel))
	for i, p := range parts {
		g.Go(func() error {
			path := filepath.Join(dir, partitionFile(p))
			f, pi, err := importFile(gctx, path, p, fetch)
			if err != nil {
				err = fmt.Errorf("partition %d: %w", p, err)
				if !partial || gctx.Err() != nil {
					return err
				}
				errs[i] = err
				return os.Remove(path)
			}
			infos[i] = pi
			syncs.Go(func() error {
				err := f.Sync()
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return fmt.Errorf("partition %d: %w", p, err)
				}
				return nil
			})
			return nil
		})
	}
	err := g.Wait()
	if serr := syncs.Wait(); err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	m := &Manifest{Partitions: make([]int, 0, len(parts)), PartitionInfo: make([]PartitionInfo, 0, len(parts))}
	for i, pi := range infos {
		if errs[i] != nil {
			continue
		}
		m.Partitions = append(m.Partitions, parts[i])
		m.PartitionInfo = append(m.PartitionInfo, pi)
		m.Records += pi.Records
		m.Bytes += pi.Bytes
		m.StoredBytes += pi.StoredBytes
	}
	if len(m.Partitions) == 0 && len(parts) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, syncDir(dir)
}

// importFile creates path and has fetch fill it; it returns the file,
// open, for the caller to fsync and close, or closes it on failure.
func importFile(ctx context.Context, path string, p int, fetch func(context.Context, int, *os.File) (PartitionInfo, error)) (*os.File, PartitionInfo, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, PartitionInfo{}, err
	}
	pi, err := fetch(ctx, p, f)
	if err == nil && pi.Partition != p {
		err = fmt.Errorf("%w: fetched the entry of partition %d", ErrCorrupt, pi.Partition)
	}
	if err != nil {
		_ = f.Close()
		return nil, pi, err
	}
	return f, pi, nil
}
