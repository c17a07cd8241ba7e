package blocks

import (
	"fmt"
	"log/slog"
	"runtime"
)

// Options configure a Store. The zero value of every field means its
// default; DefaultOptions returns them filled in.
type Options struct {
	// Logger receives build and clean-up events. Default (nil): discard.
	Logger *slog.Logger

	// MemoryBudget is how many bytes a build keeps in memory for records
	// (keys, values and a few bytes of framing each, in chunks, those
	// being filled included) and for sorting them (48 bytes a record of
	// the partitions sorted at once: one while spilling, MaxParallelWrites
	// when writing) before it spills sorted runs to temporary files in the
	// version directory and merges them at the end. Default 256 MiB.
	// Beyond it a build takes a few MiB of buffers (readers, writers,
	// spills), and the process the GC's slack: its heap follows the
	// budget under a runtime memory limit (GOMEMLIMIT) above it. It also
	// bounds the bytes SequenceFile loads decompress (or read as one long
	// record) at once, over all builds:
	// each load up to its share of half of it (half over
	// MaxParallelLoads), one load at a time up to the other half; a
	// record (or block buffer) that decompresses to more fails the build
	// with seqfile.ErrTooLarge, naming its file. A Parquet file's pages
	// may take a quarter of a load's share each (at least 1 MiB: 8 MiB
	// with the defaults); a larger one fails the build, naming the file.
	MemoryBudget int64

	// MaxParallelLoads is how many source files are read at once, over all
	// the builds of the store (a build also reads no more files at once).
	// Default 4: enough to keep two cores busy parsing local files, and to
	// overlap latency on remote ones.
	MaxParallelLoads int

	// MaxParallelWrites is how many partitions a build sorts and writes at
	// once. Default GOMAXPROCS, at most 4.
	MaxParallelWrites int

	// TxWrites writes partitions through bbolt transactions of BatchSize
	// keys (FillPercent 1.0, NoSync, one fsync at the end) instead of
	// laying out the pages directly. Both give the same bbolt files
	// logically; transactions cost about 0.9 µs per key, the direct writer
	// about 0.25 µs. Default false.
	TxWrites bool

	// BatchSize is the number of keys per bbolt transaction when TxWrites
	// is set. Default 10000 (measured: 5k–10k is the optimum; larger
	// transactions get slower).
	BatchSize int

	// SkipVerify makes Open trust the files on disk. By default Open
	// checks each held partition file's size and checksum against the
	// manifest (in parallel; see BenchmarkVerify for the cost) and
	// refuses a version whose files differ with ErrCorrupt.
	SkipVerify bool

	// DeltaKeys is the most changed keys (added, changed or deleted, not
	// upserted with the value they had) a delta build keeps in memory,
	// over its partitions, for Version.DeltaKeys: the keys a switch to
	// it purges from caches, known without a diff. Default 0: none.
	DeltaKeys int
}

// Defaults, see Options.
const (
	DefaultMemoryBudget     = 256 << 20
	DefaultMaxParallelLoads = 4
	DefaultBatchSize        = 10000
)

// DefaultOptions returns the defaults, with a discarding logger.
func DefaultOptions() Options {
	return Options{}.withDefaults()
}

// Validate reports fields out of range. Zero values are valid (defaults).
func (o Options) Validate() error {
	switch {
	case o.MemoryBudget < 0:
		return fmt.Errorf("%w: negative MemoryBudget %d", ErrInvalidSpec, o.MemoryBudget)
	case o.MaxParallelLoads < 0:
		return fmt.Errorf("%w: negative MaxParallelLoads %d", ErrInvalidSpec, o.MaxParallelLoads)
	case o.MaxParallelWrites < 0:
		return fmt.Errorf("%w: negative MaxParallelWrites %d", ErrInvalidSpec, o.MaxParallelWrites)
	case o.DeltaKeys < 0:
		return fmt.Errorf("%w: negative DeltaKeys %d", ErrInvalidSpec, o.DeltaKeys)
	case o.BatchSize < 0:
		return fmt.Errorf("%w: negative BatchSize %d", ErrInvalidSpec, o.BatchSize)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MemoryBudget == 0 {
		o.MemoryBudget = DefaultMemoryBudget
	}
	if o.MaxParallelLoads == 0 {
		o.MaxParallelLoads = DefaultMaxParallelLoads
	}
	if o.MaxParallelWrites == 0 {
		o.MaxParallelWrites = min(runtime.GOMAXPROCS(0), 4)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	return o
}
