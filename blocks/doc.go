// Package blocks stores the partitions of db versions on local disk, in
// bbolt files, and looks keys up in them. It builds a version from its
// source SequenceFiles, keeping only the partitions this node holds; it knows
// nothing of clusters, NATS or HTTP.
//
// # Model
//
// A Store is a data dir, locked by one process at a time:
//
//	<dir>/spangle.lock
//	<dir>/dbs/<db>/<version>/p-00007.bolt    one bbolt file per held partition
//	<dir>/dbs/<db>/<version>/manifest.json   written last, atomically
//
// A version directory without a valid manifest is incomplete: OpenStore
// deletes it, so that a build interrupted by a crash is simply built again.
// A complete version's files are never modified: Store.AddPartitions only
// adds partition files and replaces the manifest (see below); Remove
// deletes the manifest first.
//
// Store.Build turns a BuildSpec (the version's source files, in name order,
// and a Partitioner) into a Version:
//
//  1. Load. MaxParallelLoads goroutines read files with the seqfile reader.
//     Each record's partition comes from the Partitioner; the records of
//     held partitions are copied into chunks, slabs of memory owned by one
//     reading goroutine, one partition and one file, so that loading
//     allocates nothing per record and takes no lock per record.
//  2. Spill. When the chunks, with the sort index of the largest
//     partition's records (48 bytes a record), reach Options.MemoryBudget,
//     every full chunk is sorted and written as one sorted run per
//     partition to a temporary spill file in the version directory. Once
//     loaded, the records spill again if they and the index of the
//     MaxParallelWrites largest partitions do not fit.
//  3. Sort and write. MaxParallelWrites partitions at a time, largest
//     first: the in-memory records are indexed, sorted (one radix pass on
//     the key's first bits, then pdqsort) and merged with the partition's
//     runs (container/heap). Of equal keys the last one read wins: files in
//     spec order, records in file order; every record carries its (file,
//     record) position so that this holds however files were read in
//     parallel. Values are encoded (compressed) and the partition's bbolt
//     file is written in key order, then fsynced in the background while
//     the next partitions are written.
//  4. Commit. The spill files are deleted and manifest.json is written to a
//     temporary file, fsynced, renamed and the directory fsynced.
//
// Any error (corrupt input, a partitioner failure, a misplaced presharded
// key, a cancelled context, a disk error) removes the partial version
// directory; other versions are not touched.
//
// Presharded input (BuildSpec.Presharded) has each file hold exactly one
// partition, that of its first record (Cascading writes file i with
// partition (i+k) mod N). Build reads the first records of every file, then
// reads in full only the files of held partitions and checks every key of
// them: a key of another partition fails the build with a
// *MisplacedKeyError, two files claiming one partition fail it too.
//
// # Adding partitions
//
// Store.AddPartitions gives a complete version, open and serving, more
// partitions: a cluster node uses it to take over partitions whose other
// replicas were lost (healing). It runs the same builder as Build, with
// BuildSpec.Partitions set to the missing partitions (the source files are
// read again), into the version's own directory, under the partitions'
// final names (p-%05d.bolt: no name is held by another partition, since
// only partitions not held are built). Then:
//
//  1. the new files are fsynced, opened read-only and checked;
//  2. the commit: a manifest listing old and new partitions replaces the
//     old one atomically (temporary file, fsync, rename, directory fsync);
//  3. the Version's contents — manifest, open partitions by number, value
//     decoder — are replaced by one atomic pointer store. The new contents
//     share the already open partitions with the old ones; only the zstd
//     decoder is rebuilt when new partitions bring dictionaries, and the
//     old one is kept until Close for Gets that still hold the old
//     contents.
//
// A Get loads the contents once, under the Version's read lock, so it sees
// a partition either absent (ErrPartitionNotHeld) or complete, never a
// half-written one, and it is never blocked by an add. The same *Version
// stays valid throughout: callers that hold it in an atomic pointer
// change nothing, and Close closes every partition, old and new.
//
// Crash safety follows from the manifest being the commit point: a crash
// before step 2 leaves the previous manifest, which does not list the new
// files; OpenStore deletes partition files a complete version's manifest
// does not list, as it deletes stray temporary files. A failure before
// the commit (cancellation, Store.Close, bad input, a disk error) removes
// the new files and leaves the Version unchanged. One build or add of a
// version runs at a time, and Remove refuses the version meanwhile
// (ErrBuilding).
//
// The alternative, a new *Version sharing the open files with the old
// one, would need a reference count per partition file so that closing
// the old Version did not close the new one's files, and every holder of
// the old pointer to switch; growing the one Version needs neither.
//
// # Partition files
//
// A partition file is an ordinary bbolt database with two buckets:
//
//	data   key → stored value
//	meta   "format" (1; 3 for blocks), "partition", "records", "checksum",
//	       "zstd-dict" or "s2-dict" (the partition's trained dictionary)
//
// A stored value is a tag byte and a payload, so that encodings can change
// without rebuilding: 0 raw, 1 S2 block, 2 zstd frame with the partition's
// dictionary, 3 S2 block with the partition's dictionary. Compressing ~100
// byte values one by one makes them bigger, so CompressionZstd and
// CompressionS2 train a dictionary per partition from up to 1000 of its
// values (about 2× on JSON-like values), and a value that does not shrink
// is stored raw.
//
// CompressionS2Blocks (spangle's default) lays a partition out as
// sequins' sparkey files do: its records, in key order, go in blocks of
// about BlockSize (4 KiB) uncompressed, each stored under its first key as
// tag 5, the CRC-32C of the S2 data, and the S2 ("better" encoding) of
// uvarint(shared) uvarint(len(rest)) rest uvarint(len(value)) value…,
// each key being the first shared bytes of the one before it then rest;
// meta says "format" (3), "layout" ("blocks") and "block-max" (the
// largest block, which bounds what a reader decodes). A lookup seeks the
// last block whose first key is not after the key, decodes it, checks its
// CRC and scans it: damage inside a block is ErrCorrupt, never a wrong
// value. Its pages are 32 KiB: a leaf page holds whole entries only, and a
// compressed block takes over half of a 4 KiB page. On the bench's text
// values the files are less than half as large (keys and bbolt's
// per-entry overhead shrink too), for a block's decoding per lookup.
// Format 2 files (tag 4: whole keys, no CRC) are still read.
//
// The files are written by laying out the pages of the finished B+tree
// directly (package blocks/internal/boltpack): leaves filled completely in
// key order, then branch levels. bbolt's own Put path costs about 0.9 µs
// per key even with sorted keys, FillPercent 1.0 and 10k-key transactions
// (2 CPU-seconds for 2M keys: more than the whole budget of a 2M-record
// build at 1.5M records/s on two cores); the direct writer about 0.25 µs,
// most of it the write to the page cache. Options.TxWrites
// writes through bbolt transactions instead (FillPercent 1.0 in every
// transaction, NoSync/NoFreelistSync/NoGrowSync, one fsync at the end), with
// the same content.
//
// PartitionInfo.Checksum is XXH64 over the partition's records in key
// order, uncompressed: it identifies the logical content, whatever the
// compression or writer.
//
// # Reading
//
// Store.Open opens a complete version; Version.Get(p, key) looks a key up
// in partition p and returns a copy of its value. Version.View hands a
// Reader whose Iter walks a partition's records in key order, from a
// start key to an end key (the blocks layout: each block decoded once and
// its records read in sequence, checked as a lookup checks it);
// Version.Scan is one bounded Iter. Iter.Suspend returns where an
// iterator stands (a Position: in the blocks layout its decoded block and
// the record in it), and Reader.Resume continues from it in a later View
// without reading that block again: a listing's next page. Read
// transactions are
// kept and reused across Gets (a partition file never changes). A Version
// is safe for concurrent use; Close waits for Gets under way (and for an
// AddPartitions commit), and later Gets return ErrClosed.
//
// # Caveats
//
//   - The direct page writer depends on bbolt's on-disk format (version 2,
//     unchanged since 2014). Tests check its files with bbolt's Tx.Check and
//     modify them with bbolt; Options.TxWrites avoids it altogether.
//   - Memory: MemoryBudget holds the chunks (those being filled counted
//     whole) and the sort index of the partitions sorted at once; a build
//     takes a few MiB more of buffers (2–8 MiB with four loads, Parquet's
//     the most: TestBuildWithinBudget), and the process the GC's slack
//     unless a memory limit (GOMEMLIMIT; spangle's [runtime] memory_limit)
//     keeps its heap near the live bytes. 2M records of ~120 bytes (90 % of
//     the default budget) peak at 263–275 MiB of heap in use under
//     GOMEMLIMIT=288MiB with GOGC off, 300–440 MiB under the default GC
//     (docs/PERFORMANCE.md).
//   - Records whose sort index just passes the budget spill all of them
//     once: a build's cost jumps (about +20 % CPU
//     on the bench's 2M records) as its input grows past the budget.
//   - Runs are merged in one pass: a tiny budget over a huge input makes
//     many runs (one open spill file per spill).
//   - Keys must be 1 to 32768 bytes (bbolt's limits): an empty or longer key
//     fails the build rather than being dropped.
//   - Pathological keys (alternate partition ≠ partition) are stored under
//     their partition, except in presharded input, where they are stored in
//     their file's partition, which may be the alternate: look a key up in
//     its partition, then in its alternate, as sequins does.
//   - Presharded files of partitions not held are read only up to their
//     first record(s): a misplaced key in them is found by the nodes that
//     hold that partition, not here.
//   - zstd encoding with a dictionary costs 2–3 µs per value (builds of
//     ~100-byte values run at 0.3–0.5M records/s on two cores); S2 with a
//     dictionary about 1 µs, for nearly the same ratio.
//   - The data dir lock is a flock: none on platforms without flock, and it
//     may not hold on network file systems. bbolt also takes a shared flock
//     on every partition file it opens read-only (it has no lock-free mode).
//   - Remove closes nothing: close Versions first. On Unix a Version still
//     open keeps working on the deleted files until closed.
//   - A version whose manifest has a newer format is neither listed nor
//     deleted.
//   - AddPartitions checks that the source files have the names (and,
//     where known, the sizes) the version was built from, not their
//     content: a source rewritten in place with files of equal sizes would
//     give partitions of other content.
//   - Two Versions opened on one directory do not see each other's added
//     partitions: AddPartitions through the one that is behind fails
//     (ErrInvalidSpec) rather than write a manifest forgetting some.
//   - Each AddPartitions that brings zstd dictionaries keeps the version's
//     previous decoder until Close.
package blocks
