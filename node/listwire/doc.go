// Package listwire encodes and decodes spangle's key listings in binary,
// in the batch codec's style (node/batchwire): a NATS request on
// spangle.<cluster>.list.<db> and its reply, and the reply of a page a
// node asks of a peer. The peer's request is not listwire but an HTTP
// query, GET /<db>/?proxy=<version>&parts=… with Accept: ContentType,
// built by node/proxy (list.go) and parsed by edge (list.go); only the
// page that answers it is a listwire Reply. edge/LIST.md specifies the
// bytes.
//
// # Format
//
//	request = "SLQ" 0x01 flags uvarint(limit) bytes(prefix) bytes(start)
//	          bytes(end) bytes(cursor)
//	reply   = "SLR" 0x01 flags bytes(version) bytes(content-type)
//	          uvarint(count) count × ( bytes(key) [bytes(value)] ) bytes(cursor)
//	bytes   = uvarint(len) len bytes
//	flags   = bit 0: values; bit 1 (reply): more keys follow the last one
//
// Keys and values are arbitrary bytes. The decoders never allocate more
// than the input justifies (a count larger than the remaining bytes is
// malformed), and the slices they return alias the input.
//
// # Caveats
//
//   - A whole page is in memory on both sides; its bounds are the
//     callers' (edge's MaxListKeys, MaxBatchReplyBytes, NATS max_payload).
package listwire
