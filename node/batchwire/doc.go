// Package batchwire encodes and decodes spangle's batch lookups: one
// request naming many keys, one reply answering each of them from a single
// version. The same bytes travel over HTTP (POST /<db>/_batch) and NATS
// (spangle.<cluster>.mget.<db>); edge/BATCH.md specifies them, with a
// worked example that Example_workedExample checks byte for byte.
//
// # Format
//
//	request = "SBQ" 0x01 uvarint(count) { uvarint(len) key }
//	reply   = "SBR" 0x01 uvarint(len) version uvarint(len) content-type
//	          uvarint(count) { status [uvarint(len) bytes] }
//	status  = 0x00 missing | 0x01 found, bytes = value | 0x02 failed, bytes = message
//
// Keys and values are arbitrary bytes; an empty value (found, length 0) and
// a missing key are distinct. The decoders never allocate more than the
// input justifies (a count larger than the remaining bytes is malformed),
// and the slices they return alias the input.
//
// # Caveats
//
//   - The whole request and reply are in memory on both sides; limits on
//     keys and bytes are the callers' (edge's MaxBatchKeys, MaxBatchBytes
//     and NATS max_payload).
//   - Status 0x02 is defined for per-key failures (a proxied key whose
//     peers failed) but spangle does not produce it yet: today a failure
//     fails the whole batch.
package batchwire
