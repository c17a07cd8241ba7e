package blocks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// AddPartitions builds more partitions of v, a complete version opened
// from s, and adds them to it while it serves: the way a node takes over
// partitions whose other replicas were lost (healing).
//
// spec describes v's version exactly as the spec it was built from did —
// same DB, Version, Files (names, in order, and sizes where both are
// known), PartitionerID, Presharded and Compression — or AddPartitions
// fails with ErrInvalidSpec, naming the difference. spec.Partitions lists
// the partitions to add, nil meaning every partition v does not hold;
// those v holds already are skipped, and with none left AddPartitions
// returns nil at once. The source files are read again, as Build reads
// them.
//
// The new partition files are written into v's directory and fsynced,
// opened, and then committed by replacing the manifest atomically (the
// commit point); only then do v.Holds, v.Get and v.Manifest see them, all
// at once. Gets under way are never blocked nor disturbed: they finish on
// the partitions they started with. A crash before the commit leaves the
// previous manifest, which does not list the new files: OpenStore deletes
// them. On any error (cancelled ctx, Store.Close, v closed meanwhile, bad
// input, a disk error) the new files are removed and v is unchanged.
//
// It blocks until the partitions are added or it fails. Only one build or
// AddPartitions of a version runs at a time (ErrBuilding); Remove of the
// version fails with ErrBuilding meanwhile.
func (s *Store) AddPartitions(ctx context.Context, v *Version, spec BuildSpec) error {
	start := time.Now()
	if v == nil {
		return fmt.Errorf("%w: no version", ErrInvalidSpec)
	}
	old := v.contents.Load()
	m := old.manifest
	if err := compatible(m, spec); err != nil {
		return err
	}
	if v.dir != s.versionDir(spec.DB, spec.Version) {
		return fmt.Errorf("%w: %s/%s was not opened from this store", ErrInvalidSpec, spec.DB, spec.Version)
	}
	var add []int
	if spec.Partitions == nil {
		for p := range m.NumPartitions {
			if !old.holds(p) {
				add = append(add, p)
			}
		}
	} else {
		for _, p := range spec.Partitions {
			if p < 0 || p >= m.NumPartitions {
				return fmt.Errorf("%w: partition %d not in [0,%d)", ErrInvalidSpec, p, m.NumPartitions)
			}
			if !old.holds(p) {
				add = append(add, p)
			}
		}
	}
	slices.Sort(add)
	add = slices.Compact(add)
	if len(add) == 0 {
		return nil
	}
	spec.Partitions = add
	b, err := s.newBuilder(spec)
	if err != nil {
		return err
	}
	ctx, release, err := s.beginBuild(ctx, spec.DB, spec.Version) // Store.Close cancels ctx
	if err != nil {
		return err
	}
	defer release()

	var opened []*partition
	var dec *valueDecoder // a new decoder, when new dictionaries need one
	fail := func(err error) error {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		_ = closeAll(opened)
		if dec != nil && dec != old.dec {
			dec.close()
		}
		removeFiles(b.dir, add)
		s.log.Warn("blocks: adding partitions failed", "db", spec.DB, "version", spec.Version, "partitions", add, "err", err)
		return fmt.Errorf("blocks: add partitions %v to %s/%s: %w", add, spec.DB, spec.Version, err)
	}
	if v.isClosed() {
		return fail(ErrClosed)
	}
	if err := sameOnDisk(b.dir, m); err != nil {
		return fail(err)
	}
	// What an earlier attempt may have left (OpenStore removes it too).
	removeFiles(b.dir, add)

	var added *Manifest
	if spec.Fetch != nil {
		added, err = fetchFiles(ctx, b.dir, add, spec.Fetch, spec.FetchParallel, spec.FetchPartial) // import.go
	} else {
		stopProgress := b.reportProgress()
		added, err = b.run(ctx)
		b.cleanup()
		stopProgress()
	}
	if err != nil {
		return fail(err)
	}
	if spec.Fetch != nil {
		add = added.Partitions // FetchPartial: the others were left out
	}
	parts := slices.Clone(old.parts)
	newDict := false
	for _, p := range add {
		part, err := openPartition(filepath.Join(b.dir, partitionFile(p)), p)
		if err != nil {
			return fail(fmt.Errorf("open partition %d: %w", p, err))
		}
		opened = append(opened, part)
		parts[p] = part
		newDict = newDict || part.zdict != nil
	}
	dec = old.dec
	if newDict {
		if dec, err = decoderFor(parts); err != nil {
			return fail(err)
		}
	}
	merged := mergeManifests(m, added, time.Now())

	// Commit: the manifest, then what Gets see.
	v.extendMu.Lock()
	defer v.extendMu.Unlock()
	if v.isClosed() {
		return fail(ErrClosed)
	}
	if err := sameOnDisk(b.dir, m); err != nil {
		return fail(err)
	}
	if err := writeManifest(b.dir, merged); err != nil {
		// The rename may have happened: put the previous manifest back
		// before removing files a manifest might list.
		if rerr := writeManifest(b.dir, m); rerr != nil {
			s.log.Error("blocks: cannot restore the manifest after a failed commit; keeping the new files",
				"db", spec.DB, "version", spec.Version, "err", rerr)
			_ = closeAll(opened)
			return fmt.Errorf("blocks: add partitions %v to %s/%s: %w", add, spec.DB, spec.Version, err)
		}
		return fail(err)
	}
	v.contents.Store(&contents{manifest: merged, parts: parts, dec: dec})
	if dec != old.dec {
		v.oldDecs = append(v.oldDecs, old.dec) // a Get may still hold the previous contents
	}
	s.log.Info("blocks: partitions added", "db", spec.DB, "version", spec.Version, "partitions", add,
		"records", added.Records, "bytes", added.Bytes, "seconds", time.Since(start).Seconds())
	return nil
}

// compatible checks that spec describes the version of manifest m.
func compatible(m *Manifest, spec BuildSpec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s/%s: %s", ErrInvalidSpec, m.DB, m.Version, fmt.Sprintf(format, args...))
	}
	comp, err := spec.Compression.normalize()
	if err != nil {
		return err
	}
	mcomp, _ := m.Compression.normalize() // validated when read
	switch {
	case spec.DB != m.DB || spec.Version != m.Version:
		return bad("the spec is for %s/%s", spec.DB, spec.Version)
	case m.Delta != nil && spec.Fetch == nil:
		return bad("a delta over %s: its partitions are added from peers (Fetch) only", m.Delta.Base)
	case len(spec.Files) != len(m.Files):
		return bad("%d source files, the version was built from %d", len(spec.Files), len(m.Files))
	case spec.PartitionerID != m.Partitioner:
		return bad("partitioner %q, the version was built with %q", spec.PartitionerID, m.Partitioner)
	case spec.Presharded != m.Presharded:
		return bad("presharded %v, the version was built with %v", spec.Presharded, m.Presharded)
	case comp != mcomp:
		return bad("compression %s, the version was built with %s", comp, mcomp)
	}
	for i, f := range spec.Files {
		was := m.Files[i]
		if f.Name != was.Name || (f.Size >= 0 && was.Size >= 0 && f.Size != was.Size) {
			return bad("source file %d is %q (%d bytes), the version was built from %q (%d bytes)",
				i, f.Name, f.Size, was.Name, was.Size)
		}
	}
	return nil
}

// sameOnDisk checks that dir's manifest still lists the partitions of m:
// another Version opened on the same directory may have added some.
func sameOnDisk(dir string, m *Manifest) error {
	disk, err := readManifest(dir, m.DB, m.Version)
	if err != nil {
		return err
	}
	if !slices.Equal(disk.Partitions, m.Partitions) {
		return fmt.Errorf("%w: the manifest on disk lists partitions %v, this Version %v (open it again)",
			ErrInvalidSpec, disk.Partitions, m.Partitions)
	}
	return nil
}

// mergeManifests returns old with the partitions of added, which it does
// not hold, merged in.
func mergeManifests(old, added *Manifest, at time.Time) *Manifest {
	m := *old
	m.Partitions = make([]int, 0, len(old.Partitions)+len(added.Partitions))
	m.PartitionInfo = make([]PartitionInfo, 0, len(m.Partitions))
	i, j := 0, 0
	for i < len(old.PartitionInfo) || j < len(added.PartitionInfo) {
		var pi PartitionInfo
		if j == len(added.PartitionInfo) || (i < len(old.PartitionInfo) && old.PartitionInfo[i].Partition < added.PartitionInfo[j].Partition) {
			pi, i = old.PartitionInfo[i], i+1
		} else {
			pi, j = added.PartitionInfo[j], j+1
		}
		m.Partitions = append(m.Partitions, pi.Partition)
		m.PartitionInfo = append(m.PartitionInfo, pi)
	}
	m.Records += added.Records
	m.Bytes += added.Bytes
	m.StoredBytes += added.StoredBytes
	m.Files = slices.Clone(old.Files)
	for i, f := range added.Files {
		if i < len(m.Files) {
			if m.Files[i].Records < 0 {
				m.Files[i].Records = f.Records // a presharded file read in full now
			}
			if m.Files[i].Size < 0 {
				m.Files[i].Size = f.Size
			}
		}
	}
	m.AddedAt = at.UTC()
	return &m
}

// removeFiles deletes the files of partitions ps in dir, if present. A
// file that cannot be deleted is left to OpenStore: no manifest lists it.
func removeFiles(dir string, ps []int) {
	for _, p := range ps {
		_ = os.Remove(filepath.Join(dir, partitionFile(p)))
	}
}
