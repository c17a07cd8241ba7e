// Package seqfile reads and writes Hadoop SequenceFiles, the key/value files
// that Hadoop, Cascading/Scalding and Spark jobs write and that spangle
// serves, as sequins did.
//
// # Model
//
// A Reader parses the header in NewReader and then returns one record per
// call to Next, in file order, streaming: memory use is bounded by the
// largest record or block, not by the file. Key and Value return the
// payload of the record's Writables (see Unwrapping); RawKey and RawValue
// the serialized bytes. All four slices belong to the Reader and are valid
// only until the next call to Next. Err tells, after Next returns false,
// whether the file ended cleanly (nil) or not (an *Error).
//
//	r, err := seqfile.NewReader(f, "part-00003")
//	if err != nil {
//		return err
//	}
//	for r.Next() {
//		use(r.Key(), r.Value())
//	}
//	return r.Err()
//
// A Writer writes version 6 files, uncompressed, record- or
// block-compressed, wrapping keys and values as BytesWritable or Text. It is
// used by tests and by dataset generators.
//
// Neither Reader nor Writer is safe for concurrent use; use one per
// goroutine. Neither closes the io.Reader or io.Writer it is given.
//
// # Format
//
// A file starts with a header:
//
//   - "SEQ" and a version byte: 5 or 6 are read (older versions used other
//     string encodings and are rejected);
//   - the key and value class names, as Hadoop Text strings (a VInt length
//     and UTF-8 bytes);
//   - two booleans: compressed, block-compressed;
//   - if compressed, the codec's class name, a Text string;
//   - in version 6, metadata: a big-endian int32 count and that many pairs
//     of Text strings;
//   - a 16-byte sync marker, random per file.
//
// Uncompressed and record-compressed files then hold records: a big-endian
// int32 record length (key plus value), an int32 key length, the key and
// the value; with record compression the value alone is compressed, each one
// as a separate stream. A record length of -1 is instead an escape followed
// by the 16-byte sync marker, written every 2000 bytes or so so that a split
// can find a record boundary.
//
// Block-compressed files hold blocks: the escape and the sync marker, a VInt
// record count, then four buffers, each a VInt length and compressed bytes:
// the keys' lengths (VInts), the keys, the values' lengths (VInts), the
// values.
//
// VInts are Hadoop's WritableUtils variable-length integers. Every sync
// marker must equal the header's.
//
// # Codecs
//
// Codecs are named by their Java class: DefaultCodec (zlib) and
// DeflateCodec (the same format), GzipCodec (gzip, members may be
// concatenated), SnappyCodec (raw snappy blocks in Hadoop's block framing:
// a big-endian uint32 uncompressed length, then chunks each prefixed by a
// big-endian uint32 compressed length), ZStandardCodec (zstd frames) and
// BZip2Codec ("BZh" streams). Lz4Codec, LZO and any other class fail with
// ErrUnsupportedCodec, naming the class. Decoders are created once per
// Reader, when first needed, and reused across records and blocks.
//
// # Unwrapping
//
// BytesWritable is serialized as a big-endian int32 length and the bytes;
// Text as a VInt length and UTF-8 bytes. Key and Value strip the prefix and
// check that it equals the length of what follows; a mismatch is a corrupt
// record. Any other class (IntWritable, LongWritable, NullWritable, ...) is
// returned as its serialized bytes, so Key equals RawKey.
//
// # Errors
//
// Every error from a Reader is an *Error naming the file, the offset of the
// structure that failed (the record, block, or header field) and what was
// wrong; its cause is one of the sentinels (ErrNotSequenceFile,
// ErrUnsupportedVersion, ErrUnsupportedCodec, ErrTooLarge, ErrCorrupt),
// io.ErrUnexpectedEOF for a truncated file, a codec's error, or the
// underlying reader's error. Test with errors.Is and errors.As.
//
// # Caveats
//
//   - Hostile input is bounded, not free: every length and every
//     decompressed size is capped by ReaderOptions.MaxSize (256 MiB by
//     default), so one record or block can make the Reader hold that much.
//     Lengths beyond the read buffer are read in growing steps, so a lying
//     length in a short file does not allocate what it claims.
//   - Records are checked more strictly than Hadoop does: a block whose
//     buffers hold more data than its record count, or a block escape other
//     than -1, is an error, where Hadoop ignores it.
//   - Text is not checked to be valid UTF-8, by the Reader or the Writer.
//   - The bzip2 decoder (github.com/dsnet/compress) signals errors with
//     panics that it recovers itself; should one escape on hostile input,
//     the Reader turns it into an error rather than crash.
//   - Reading is strictly sequential: there is no seeking to a sync marker
//     and no splitting of a file between readers.
//   - The Writer's sync interval (2000 bytes) is that of older Hadoop
//     releases; newer ones write sync markers every 100 KB. Both read the
//     same. Its Text class does not check UTF-8 either.
package seqfile
