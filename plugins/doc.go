// Package plugins holds the ways spangle can be customised per db: the
// Partitioner interface and the built-in partitioners (sequins, hadoop,
// murmur3). The WebAssembly host for partitioner and decoder modules (ABI
// spangle/v1, DESIGN §5) will live here too.
//
// The hash functions themselves are in the leaf package plugins/partition.
//
// # Caveats
//
//   - "sequins" hashes the unwrapped key bytes, not Java's UTF-16 string: it
//     matches Java's String.hashCode only for ASCII keys.
//   - "hadoop" matches Hadoop's default HashPartitioner for Text and
//     BytesWritable keys only (WritableComparator.hashBytes).
//   - Wasm partitioners ("wasm:...") are not implemented yet: naming one is an
//     error at configuration time.
package plugins
