package blocks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Partitioner is what blocks needs from a partitioner.
type Partitioner interface {
	// Partition returns the key's partition in [0,n) and its alternate
	// partition (equal to p except for sequins' pathological keys). An
	// error (a plugin failure) fails the build. Build calls it from several
	// goroutines at once; it must not retain key.
	Partition(key []byte, n int) (p, alt int, err error)
}

// SourceFile is one data file of a version.
type SourceFile struct {
	Name    string    // file name, for errors and the manifest
	Size    int64     // -1 if unknown
	ModTime time.Time // zero if unknown; dates the version (Manifest.SourceModified)
	// Open opens the file for reading from its start. A build may call it
	// more than once (presharded input), from several goroutines, and
	// closes what it returns.
	Open func(ctx context.Context) (io.ReadCloser, error)
	// OpenAt, if not nil, opens the file for reading from offset. Parquet
	// files, read from their end, use it: one it opens as an *os.File is
	// read in place; any other file has its last bytes checked before it
	// is copied into a spool file to be read.
	OpenAt func(ctx context.Context, offset int64) (io.ReadCloser, error)
}

// BuildSpec says what to build.
type BuildSpec struct {
	DB, Version string
	// Fetch, when set, makes AddPartitions copy the partitions' files
	// through it, as Import does (ImportSpec.Fetch), instead of reading
	// Files: a heal from peers that hold them. Build ignores it.
	Fetch func(ctx context.Context, p int, f *os.File) (PartitionInfo, error)
	// FetchParallel is how many files Fetch copies at once; below 1: one.
	FetchParallel int
	// FetchPartial adds the partitions Fetch could copy and leaves out
	// the others (ImportSpec.Partial): the version's manifest says which
	// were added. AddPartitions fails only when none could be.
	FetchPartial bool
	// Files are the version's data files in name order: N = len(Files)
	// partitions. Build uses the order given; it decides which of duplicate
	// keys wins (the last).
	Files []SourceFile
	// Partitioner maps keys to partitions. Required unless Files is empty.
	Partitioner Partitioner
	// PartitionerID identifies the partitioner in the manifest
	// ("sequins", "murmur3", "wasm:sha256:…").
	PartitionerID string
	// Partitions lists the partitions to hold, in any order. nil means all;
	// an empty slice none (the version then holds no partition file).
	Partitions []int
	// Compression of stored values. "" means none.
	Compression Compression
	// Presharded input: each file holds exactly one partition, that of its
	// first record, not necessarily the file's index. Only the files of
	// held partitions are read beyond their first records, and every key
	// is verified.
	Presharded bool
	// Format of the files: FormatAuto (default) detects each file's from
	// its first bytes.
	Format Format
	// KeyField and ValueField name the key and value columns of Parquet
	// files and fields of Avro files. "" means "key" and "value".
	KeyField, ValueField string
	// Base, when not nil, makes the build a delta over that version
	// (delta.go): Files hold the records upserted and Deletes the deleted
	// keys (_DELETES files), and each held partition is the base's
	// merged with them, without sorting the base again. The version has
	// the base's number of partitions, partitioner and presharding; Base
	// must hold every partition to build (nil Partitions: the base's)
	// and stay open until Build returns.
	Base *Version
	// Deletes are a delta's _DELETES files; only with Base.
	Deletes []SourceFile
	// Progress, if not nil, is called from one goroutine of the build at
	// most every 250 ms while it runs and once when it ends. It must not
	// block for long.
	Progress func(BuildProgress)
}

// BuildProgress reports how far a build got.
type BuildProgress struct {
	FilesDone, FilesTotal int // files read in full, of those to read
	// BytesRead and BytesTotal count source bytes; BytesTotal is -1 when a
	// size is unknown.
	BytesRead, BytesTotal int64
	Records               int64 // records read
	// StreamedPartitions counts the partitions written straight from
	// their Sparkey logs, in the logs' key order (no load, no sort).
	StreamedPartitions int
}

// Limits on records, as bbolt enforces them.
const (
	maxKeySize   = 32768
	maxValueSize = (1 << 31) - 2
)

const progressInterval = 250 * time.Millisecond

// builder is the state of one Build.
type builder struct {
	spec       BuildSpec
	modified   time.Time     // the newest file's ModTime, whole seconds
	loadSlots  chan struct{} // the store's, shared by all builds
	bigRecords chan struct{} // the store's: see seqfileOptions
	opts       Options
	log        *slog.Logger
	dir        string
	n          int            // partitions
	comp       Compression    // normalized
	held       []int          // partitions held, increasing
	slot       []int32        // by partition: index into held and parts, -1 if not held
	sparkey    *sparkeyLayout // Sparkey input, nil for other formats
	// delFrom is the index of the first file of deletions (a delta's
	// _DELETES, appended to spec.Files); maxFiles when there is none.
	delFrom     uint32
	delta       *DeltaInfo // a delta build's counts, nil for a full build
	deltaCounts deltaCounts

	parts     []*partBuf
	mem       *memory
	chunkSize int
	spills    []*os.File // written by the spiller (one at a time), closed by cleanup

	// Sampling for dictionaries: values and bytes kept per partition.
	sampleWant, sampleBytes int

	files []FileInfo // by file; each written by the goroutine reading it

	loadTime, writeTime, syncTime time.Duration // for the log

	totalsSet bool         // the progress totals are set (setTotals)
	streamed  atomic.Int64 // partitions written straight from Sparkey logs

	// Progress counters.
	filesDone  atomic.Int64
	filesTotal atomic.Int64
	bytesRead  atomic.Int64
	bytesTotal atomic.Int64
	records    atomic.Int64
}

// Build reads spec.Files, keeps the records of the partitions held, writes
// p-%05d.bolt per held partition with keys sorted, then manifest.json, last
// and atomically, and returns the version opened.
//
// Duplicate keys: the last one read wins, files in name order (spec.Files
// order), records in file order. Corrupt input fails the build with the
// seqfile error naming file and offset (errors.As *seqfile.Error);
// unstorable or misplaced records with ErrBadInput; a partitioner error,
// a cancelled ctx, a closed Store or a disk error fail it too. On failure
// the partial version directory is removed; other versions are not
// touched. A version already complete on disk is ErrExists (Open it), one
// being built ErrBuilding.
func (s *Store) Build(ctx context.Context, spec BuildSpec) (*Version, error) {
	start := time.Now()
	b, err := s.newBuilder(spec)
	if err != nil {
		return nil, err
	}
	ctx, release, err := s.beginBuild(ctx, spec.DB, spec.Version) // Store.Close cancels ctx
	if err != nil {
		return nil, err
	}
	defer release()

	wrap := func(err error) error { return fmt.Errorf("blocks: build %s/%s: %w", spec.DB, spec.Version, err) }
	switch _, err := readManifest(b.dir, spec.DB, spec.Version); {
	case err == nil || errors.Is(err, errFutureFormat):
		return nil, fmt.Errorf("%w: %s/%s", ErrExists, spec.DB, spec.Version)
	case !errors.Is(err, fs.ErrNotExist):
		s.log.Info("blocks: replacing incomplete version", "db", spec.DB, "version", spec.Version, "reason", err)
	}
	if err := os.RemoveAll(b.dir); err != nil { // what a failed build left
		return nil, wrap(err)
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, wrap(err)
	}

	defer b.reportProgress()()

	m, err := b.run(ctx)
	b.cleanup()
	if err == nil {
		m.BuiltAt = time.Now().UTC()
		m.SourceModified = b.modified
		m.BuildSeconds = time.Since(start).Seconds()
		err = writeManifest(b.dir, m)
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		if errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrNoSpace) {
			err = fmt.Errorf("%w: %w", ErrNoSpace, err)
		}
		if rerr := removeVersionDir(b.dir); rerr != nil {
			s.log.Error("blocks: removing failed build", "db", spec.DB, "version", spec.Version, "err", rerr)
		}
		s.log.Warn("blocks: build failed", "db", spec.DB, "version", spec.Version, "err", err)
		return nil, wrap(err)
	}
	s.log.Info("blocks: built", "db", spec.DB, "version", spec.Version,
		"partitions", len(m.Partitions), "records", m.Records, "bytes", m.Bytes,
		"stored_bytes", m.StoredBytes, "spills", len(b.spills), "streamed_partitions", b.streamed.Load(), "seconds", m.BuildSeconds,
		"load_seconds", b.loadTime.Seconds(), "write_seconds", b.writeTime.Seconds(), "sync_wait_seconds", b.syncTime.Seconds())
	v, err := openVersion(b.dir, m)
	if err != nil {
		return nil, err
	}
	if b.delta != nil {
		v.deltaKeys = b.deltaCounts.result(int64(b.opts.DeltaKeys), b.held) // delta.go
	}
	return v, nil
}

// newBuilder validates spec.
func (s *Store) newBuilder(spec BuildSpec) (*builder, error) {
	if err := checkNames(spec.DB, spec.Version); err != nil {
		return nil, err
	}
	n := len(spec.Files)
	delFrom := uint32(maxFiles)
	if spec.Base != nil || len(spec.Deletes) > 0 {
		var err error
		if spec, n, err = deltaSpec(spec); err != nil {
			return nil, err
		}
		delFrom = uint32(len(spec.Files) - len(spec.Deletes))
	}
	var spk *sparkeyLayout
	if spec.Base == nil && isSparkey(spec) {
		var err error
		if spk, err = layoutSparkey(spec.Files); err != nil {
			return nil, err
		}
		n = spk.n
	}
	if len(spec.Files) >= maxFiles {
		return nil, fmt.Errorf("%w: %d files, at most %d", ErrInvalidSpec, len(spec.Files), maxFiles-1)
	}
	if n > 0 && spec.Partitioner == nil {
		return nil, fmt.Errorf("%w: no partitioner", ErrInvalidSpec)
	}
	for i, f := range spec.Files {
		if f.Open == nil {
			return nil, fmt.Errorf("%w: file %d (%q) has no Open", ErrInvalidSpec, i, f.Name)
		}
	}
	if _, err := ParseFormat(string(spec.Format)); err != nil {
		return nil, err
	}
	comp, err := spec.Compression.normalize()
	if err != nil {
		return nil, err
	}
	var held []int
	if spec.Partitions == nil {
		held = make([]int, n)
		for i := range held {
			held[i] = i
		}
	} else {
		held = slices.Clone(spec.Partitions)
		slices.Sort(held)
		held = slices.Compact(held)
		for _, p := range held {
			if p < 0 || p >= n {
				return nil, fmt.Errorf("%w: partition %d not in [0,%d)", ErrInvalidSpec, p, n)
			}
		}
	}
	b := &builder{
		spec:       spec,
		loadSlots:  s.loadSlots,
		bigRecords: s.bigRecords,
		opts:       s.opts,
		log:        s.log,
		dir:        s.versionDir(spec.DB, spec.Version),
		n:          n,
		comp:       comp,
		held:       held,
		slot:       make([]int32, n),
		sparkey:    spk,
		delFrom:    delFrom,
	}
	if spec.Base != nil {
		b.delta = &DeltaInfo{Base: spec.Base.Manifest().Version}
	}
	b.setParts(held)
	// Chunks being filled (loaders × partitions) take at most an eighth of
	// the budget, within [4 KiB, 1 MiB]: the budget counts them whole, and
	// what they do not hold yet makes spills come early (a quarter made
	// half the builds of BenchmarkBuildFormats, 90 % of the budget, spill).
	loads := max(min(s.opts.MaxParallelLoads, n), 1)
	b.chunkSize = int(min(max(s.opts.MemoryBudget/int64(8*loads*max(len(held), 1)), 4<<10), 1<<20))
	if comp == CompressionS2 || comp == CompressionZstd { // they train a dictionary
		b.sampleWant = dictMaxSamples
		b.sampleBytes = int(min(max(s.opts.MemoryBudget/int64(16*max(len(held), 1)), 16<<10), 256<<10))
	}
	b.files = make([]FileInfo, len(spec.Files))
	for i, f := range spec.Files {
		b.files[i] = FileInfo{Name: f.Name, Size: f.Size, Records: -1, Partition: -1}
		if f.ModTime.After(b.modified) {
			b.modified = f.ModTime
		}
	}
	b.modified = b.modified.UTC().Truncate(time.Second)
	return b, nil
}

// setParts makes the partitions of held (increasing) those the build
// loads and writes: their partBufs and the memory that accounts for them.
func (b *builder) setParts(held []int) {
	for i := range b.slot {
		b.slot[i] = -1
	}
	b.parts = make([]*partBuf, len(held))
	for i, p := range held {
		b.slot[p] = int32(i)
		b.parts[i] = &partBuf{p: p}
	}
	b.mem = newMemory(b.opts.MemoryBudget, b.parts, b.spill)
}

// run loads and writes; it returns the manifest, without build times.
func (b *builder) run(ctx context.Context) (*Manifest, error) {
	var infos []PartitionInfo
	var err error
	if b.streamsSparkey() {
		infos, err = b.streamSparkey(ctx) // input_sparkey_stream.go
	} else {
		infos, err = b.loadAndWrite(ctx)
	}
	if err != nil {
		return nil, err
	}
	if b.delta != nil {
		c := &b.deltaCounts
		b.delta.Added, b.delta.Changed, b.delta.Unchanged, b.delta.Deleted = c.added.Load(), c.changed.Load(), c.unchanged.Load(), c.deleted.Load()
	}
	if err := syncDir(b.dir); err != nil {
		return nil, err
	}
	m := &Manifest{
		Format:        ManifestFormat,
		DB:            b.spec.DB,
		Version:       b.spec.Version,
		NumPartitions: b.n,
		Partitioner:   b.spec.PartitionerID,
		Presharded:    b.spec.Presharded,
		Partitions:    b.held,
		PartitionInfo: infos,
		Compression:   b.comp,
		Files:         b.files,
		Delta:         b.delta,
	}
	if b.spec.Base != nil {
		m.Presharded = b.spec.Base.Manifest().Presharded
	}
	if m.Partitions == nil {
		m.Partitions = []int{}
	}
	for _, pi := range infos {
		m.Records += pi.Records
		m.Bytes += pi.Bytes
		m.StoredBytes += pi.StoredBytes
	}
	return m, nil
}

// loadAndWrite loads the records of the partitions of b.parts, sorts and
// writes them.
func (b *builder) loadAndWrite(ctx context.Context) ([]PartitionInfo, error) {
	var err error
	start := time.Now()
	switch {
	case b.sparkey != nil:
		err = b.loadSparkey(ctx)
	case b.spec.Presharded && b.spec.Base == nil:
		err = b.loadPresharded(ctx)
	default:
		err = b.load(ctx)
	}
	if err == nil {
		err = b.mem.fit(b.opts.MaxParallelWrites)
	}
	if err != nil {
		return nil, err
	}
	loaded := time.Now()
	b.loadTime += loaded.Sub(start)
	infos, err := b.write(ctx)
	b.writeTime += time.Since(loaded)
	return infos, err
}

// cleanup closes and removes the spill files.
func (b *builder) cleanup() {
	for _, f := range b.spills {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
}

// reportProgress calls spec.Progress every progressInterval until the
// returned func is called, which reports once more and returns once the
// reporting goroutine has stopped. Without spec.Progress it does nothing.
func (b *builder) reportProgress() (stop func()) {
	if b.spec.Progress == nil {
		return func() {}
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				b.spec.Progress(b.progress())
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		b.spec.Progress(b.progress())
	}
}

func (b *builder) progress() BuildProgress {
	return BuildProgress{
		FilesDone:          int(b.filesDone.Load()),
		FilesTotal:         int(b.filesTotal.Load()),
		BytesRead:          b.bytesRead.Load(),
		BytesTotal:         b.bytesTotal.Load(),
		Records:            b.records.Load(),
		StreamedPartitions: int(b.streamed.Load()),
	}
}

// sample keeps values of s to train pb's dictionary, if the compression
// needs one.
func (b *builder) sample(pb *partBuf, s *sortedRecs) {
	if b.sampleWant == 0 {
		return
	}
	pb.samples = s.sample(pb.samples, &pb.sampleSize, b.sampleWant-len(pb.samples), b.sampleBytes)
}
