package blocks

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compression is how a version's values are stored.
type Compression string

const (
	// CompressionNone stores values as they are. The zero value ("") means
	// the same.
	CompressionNone Compression = "none"
	// CompressionS2 compresses each value with S2 and a dictionary trained
	// per partition from a sample of its values; without enough values to
	// train, with plain S2. A value that does not shrink is stored raw.
	CompressionS2 Compression = "s2"
	// CompressionZstd compresses each value with zstd and a dictionary
	// trained per partition from a sample of its values (plain zstd makes
	// small values bigger). A partition with too few values to train is
	// stored raw, and so is a value that does not shrink.
	CompressionZstd Compression = "zstd"
	// CompressionS2Blocks stores a partition's records in blocks of about
	// BlockSize bytes, in key order, each compressed with S2, keyed by its
	// first key: as sequins' sparkey files do. Text-like values of ~100
	// bytes shrink about twice as much as per value (keys and bbolt's
	// per-entry overhead are compressed away too), at the cost of
	// decompressing a block per lookup.
	CompressionS2Blocks Compression = "s2-blocks"
)

// BlockSize is the uncompressed size a block of CompressionS2Blocks grows
// to before the next record starts another (a larger record makes a block
// of its own).
const BlockSize = 4 << 10

// ParseCompression parses a configuration value: "none" (or ""), "s2",
// "zstd", "s2-blocks"; "snappy", as in sequins configs, means s2-blocks
// (sequins' sparkey files compress blocks of 4 KiB with snappy, whose
// successor S2 is). Case does not matter.
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return CompressionNone, nil
	case "s2":
		return CompressionS2, nil
	case "zstd":
		return CompressionZstd, nil
	case "s2-blocks", "snappy":
		return CompressionS2Blocks, nil
	}
	return "", fmt.Errorf("%w: unknown compression %q (want none, s2, zstd or s2-blocks)", ErrInvalidSpec, s)
}

// normalize maps "" to CompressionNone and rejects unknown values.
func (c Compression) normalize() (Compression, error) {
	switch c {
	case "", CompressionNone:
		return CompressionNone, nil
	case CompressionS2, CompressionZstd, CompressionS2Blocks:
		return c, nil
	}
	return ParseCompression(string(c))
}

// Every stored value starts with a tag byte saying how the rest is stored.
// Readers understand every tag whatever the manifest's Compression says, so
// the encoding can change without a flag day.
const (
	tagRaw    byte = 0 // the value as it is
	tagS2     byte = 1 // an S2 block
	tagZstd   byte = 2 // a zstd frame using the partition's zstd dictionary
	tagS2Dict byte = 3 // an S2 block using the partition's S2 dictionary
	// tagRecords: an S2 block of records, each uvarint(len(key)) key
	// uvarint(len(value)) value, in key order (CompressionS2Blocks in
	// partition format 2; read, no longer written).
	tagRecords byte = 4
	// tagPrefixRecords: the CRC-32C of the S2 data that follows (4 bytes,
	// little endian), then an S2 block of the records, in key order, each
	// uvarint(shared) uvarint(len(rest)) rest uvarint(len(value)) value,
	// where the key is the previous record's first shared bytes then rest
	// (the first record's shared is 0): CompressionS2Blocks. A Get checks
	// the CRC of a block before decoding it on the block's first read
	// after the version opened (blockIndex.get), a scan on every read, so
	// that damage inside a block's bytes is ErrCorrupt, never a wrong value.
	// (The stored bytes are about half the records' size: a CRC of the
	// records took 2 % of the CPU in a profile of GETs at 50 connections,
	// and BenchmarkGet fell from 3.07 to 2.88 µs with this one.)
	tagPrefixRecords byte = 5
)

// blockPacker groups a partition's records, in key order, into S2
// blocks of about BlockSize bytes (CompressionS2Blocks), each key stored
// as what it shares with the previous one and the rest. Against whole keys
// and S2's fastest encoding, the shared prefixes and S2's better encoding
// make the partitions of spangle-bench's dataset about 7 % smaller (the
// page cache they fill while serving: 136 -> 126 MiB), at the same lookup
// time (BenchmarkGet), for about 16 % more build CPU (BenchmarkBuild).
type blockPacker struct {
	max   int    // the largest block's uncompressed size, for readers' bound
	first []byte // the block's first key
	prev  []byte // the first key of the block add returned last
	last  []byte // the block's last key so far
	raw   []byte // its records
	out   []byte // the stored block: tagPrefixRecords and S2
	// fast: S2's default encoding instead of its better one (a delta's
	// blocks packed again: see delta_blocks.go).
	fast bool
}

// add appends a record. When the block is full before it, add returns the
// full block to store under its first key (valid until the next call)
// and starts the next with the record.
func (b *blockPacker) add(k, v []byte) (key, block []byte) {
	if len(b.raw) > 0 && len(b.raw)+len(k)+len(v)+3*binary.MaxVarintLen64 > BlockSize {
		_, block = b.flush()
		// The block's first key stays in prev while first takes the next.
		b.first, b.prev = b.prev, b.first
		key = b.prev
	}
	shared := 0
	if len(b.raw) == 0 {
		b.first = append(b.first[:0], k...)
	} else {
		for shared < len(k) && shared < len(b.last) && k[shared] == b.last[shared] {
			shared++
		}
	}
	b.raw = binary.AppendUvarint(b.raw, uint64(shared))
	b.raw = binary.AppendUvarint(b.raw, uint64(len(k)-shared))
	b.raw = append(b.raw, k[shared:]...)
	b.raw = binary.AppendUvarint(b.raw, uint64(len(v)))
	b.raw = append(b.raw, v...)
	b.last = append(b.last[:0], k...)
	return key, block
}

// flush returns the block under way, if any (nil if none), and empties it.
func (b *blockPacker) flush() (key, block []byte) {
	if len(b.raw) == 0 {
		return nil, nil
	}
	b.max = max(b.max, len(b.raw))
	n := s2.MaxEncodedLen(len(b.raw))
	if cap(b.out) < blockHeader+n {
		b.out = make([]byte, blockHeader+n)
	}
	b.out = b.out[:blockHeader+n]
	b.out[0] = tagPrefixRecords
	encode := blockEncode
	if b.fast {
		encode = s2.Encode
	}
	enc := encode(b.out[blockHeader:], b.raw) // fits: n bytes were set aside
	binary.LittleEndian.PutUint32(b.out[1:], crc32.Checksum(enc, castagnoli))
	b.raw = b.raw[:0]
	return b.first, b.out[:blockHeader+len(enc)]
}

// blockEncode compresses a block: S2's better encoding (blockPacker says
// why). The fast-encoding cases of BenchmarkBuild and
// BenchmarkBuildFormats measure s2.Encode in its place.
var blockEncode = s2.EncodeBetter

// blockHeader is the size of a tagPrefixRecords block's tag and CRC.
const blockHeader = 1 + 4

// castagnoli is the CRC-32C table (computed by the CPU where it can).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// blockScratch is a lookup's decoded block and the key it rebuilds.
type blockScratch struct{ raw, key []byte }

// blockScratches holds lookups' scratch buffers, of scratchSize bytes:
// room for any block but a large record's.
var blockScratches = sync.Pool{New: func() any { return &blockScratch{raw: make([]byte, 0, scratchSize)} }}

const scratchSize = 2 * BlockSize

// findInBlock appends to dst the value of key in the stored block v,
// stored under first (its first key), or returns ErrNotFound. blockMax
// bounds the block's uncompressed size (the partition's largest, recorded
// at build): a damaged size allocates nothing. A limit of 0 or more bounds
// the value's size: a larger one is ErrTooLarge, known before anything is
// allocated for it.
func findInBlock(dst, v, first, key []byte, blockMax, limit int) ([]byte, error) {
	return findInBlockCRC(dst, v, first, key, blockMax, limit, true)
}

// findInBlockCRC is findInBlock checking the block's CRC (format 3) only
// if checkCRC (blockIndex.get: once per block).
func findInBlockCRC(dst, v, first, key []byte, blockMax, limit int, checkCRC bool) ([]byte, error) {
	v, n, prefixed, err := blockBody(v, blockMax, checkCRC)
	if err != nil {
		return dst, err
	}
	// A block larger than a scratch buffer (a large record's, in a block
	// of its own) is decoded in dst's room and its value moved to where it
	// belongs: one allocation, the value's, as for a record stored alone.
	large := n > scratchSize
	switch {
	case !large:
	case !bytes.Equal(first, key):
		// A large record is alone in its block, under its own key.
		return dst, ErrNotFound
	case limit >= 0 && n-len(key)-3*binary.MaxVarintLen64 > limit:
		// Its value is the block but for its key and three lengths.
		return dst, fmt.Errorf("%w: a value of about %d bytes", ErrTooLarge, n)
	}
	sc := blockScratches.Get().(*blockScratch)
	defer func() {
		if cap(sc.key) <= 4*BlockSize { // a large record's key is not kept
			blockScratches.Put(sc)
		}
	}()
	orig, buf := len(dst), sc.raw
	if large {
		dst = slices.Grow(dst, n)
		buf = dst[orig : orig+n]
	}
	raw, err := s2.Decode(buf[:n], v)
	if err != nil {
		return dst[:orig], fmt.Errorf("%w: %w: s2: %v", ErrCorrupt, errBadValue, err)
	}
	val, found, err := scanBlock(raw, key, prefixed, sc)
	switch {
	case err != nil || !found:
		return dst[:orig], cmp.Or(err, ErrNotFound)
	case limit >= 0 && len(val) > limit:
		return dst[:orig], fmt.Errorf("%w: a value of %d bytes", ErrTooLarge, len(val))
	case large:
		return dst[:orig+copy(dst[orig:orig+len(val)], val)], nil
	}
	return append(dst, val...), nil
}

// scanBlock returns the value of key among the decoded records raw
// (prefix-coded keys if prefixed), rebuilding keys in sc.key.
func scanBlock(raw, key []byte, prefixed bool, sc *blockScratch) (val []byte, found bool, err error) {
	k := sc.key[:0]
	defer func() { sc.key = k }()
	for len(raw) > 0 {
		var shared uint64
		if prefixed {
			var m int
			if shared, m = binary.Uvarint(raw); m <= 0 || shared > uint64(len(k)) {
				break
			}
			raw = raw[m:]
		}
		klen, m := binary.Uvarint(raw)
		if m <= 0 || klen > uint64(len(raw)-m) {
			break
		}
		k = append(k[:shared], raw[m:m+int(klen)]...)
		raw = raw[m+int(klen):]
		vlen, m := binary.Uvarint(raw)
		if m <= 0 || vlen > uint64(len(raw)-m) {
			break
		}
		val := raw[m : m+int(vlen)]
		raw = raw[m+int(vlen):]
		switch c := bytes.Compare(k, key); {
		case c == 0:
			return val, true, nil
		case c > 0:
			return nil, false, nil
		}
	}
	if len(raw) > 0 {
		return nil, false, fmt.Errorf("%w: %w: truncated block", ErrCorrupt, errBadValue)
	}
	return nil, false, nil
}

// Keys of a partition file's meta bucket holding dictionaries.
const (
	metaZstdDict = "zstd-dict"
	metaS2Dict   = "s2-dict"
)

// Dictionary training parameters. Measured on ~100-byte JSON-like values:
// 500 samples give zstd 1.8×, 2000 samples 1.95×; S2 with a dictionary
// 1.85× (plain S2: 0.96×, bigger).
const (
	dictMaxSize      = 16 << 10
	dictMinSamples   = 16
	dictMaxSamples   = 1000
	dictSampleMaxLen = 4 << 10 // only a value's beginning matters to the trainer
)

// zstdDictID is the zstd dictionary ID of partition p: unique within a
// version so that one decoder holds every partition's dictionary, and above
// 32767 (lower IDs are reserved by the zstd format).
func zstdDictID(p int) uint32 { return 32768 + uint32(p) }

// valueEncoder turns values into stored values. Not safe for concurrent use.
type valueEncoder struct {
	comp  Compression
	zenc  *zstd.Encoder // zstd with the partition's dictionary
	sdict *s2.Dict      // S2 with the partition's dictionary
	buf   []byte
}

// newValueEncoder trains the partition's dictionary, if the compression
// uses one, from samples. It returns the encoder and the meta entries to
// store (the dictionary).
func newValueEncoder(c Compression, p int, samples [][]byte) (*valueEncoder, map[string][]byte, error) {
	var d []byte
	switch c {
	case CompressionZstd:
		d = trainDict(samples, func(s [][]byte) ([]byte, error) {
			return dict.BuildZstdDict(s, dict.Options{
				MaxDictSize: dictMaxSize, HashBytes: 6,
				ZstdDictID: zstdDictID(p), ZstdLevel: zstd.SpeedFastest,
			})
		})
	case CompressionS2:
		d = trainDict(samples, func(s [][]byte) ([]byte, error) {
			return dict.BuildS2Dict(s, dict.Options{MaxDictSize: dictMaxSize, HashBytes: 6})
		})
	}
	return encoderWithDict(c, p, d)
}

// encoderWithDict returns partition p's encoder with dictionary d (nil:
// none; a delta build reuses its base partition's), and the meta entries
// to store.
func encoderWithDict(c Compression, p int, d []byte) (*valueEncoder, map[string][]byte, error) {
	e := &valueEncoder{comp: c}
	meta := map[string][]byte{}
	switch c {
	case CompressionZstd:
		if d == nil {
			e.comp = CompressionNone // FACTS: zstd without a dictionary grows small values
			break
		}
		zenc, err := zstd.NewWriter(nil,
			zstd.WithEncoderDict(d),
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderCRC(false), // the partition checksum covers values
			zstd.WithEncoderConcurrency(1),
			zstd.WithSingleSegment(true))
		if err != nil {
			return nil, nil, fmt.Errorf("blocks: zstd encoder for partition %d: %w", p, err)
		}
		e.zenc = zenc
		meta[metaZstdDict] = d
	case CompressionS2:
		if d != nil {
			if sd := s2.NewDict(d); sd != nil {
				e.sdict = sd
				meta[metaS2Dict] = d
			}
		}
	}
	return e, meta, nil
}

// trainDict runs build on samples and returns nil when there are too few
// samples or training fails (or panics: the trainer is experimental and its
// input comes from source files).
func trainDict(samples [][]byte, build func([][]byte) ([]byte, error)) (d []byte) {
	if len(samples) < dictMinSamples {
		return nil
	}
	defer func() {
		if recover() != nil {
			d = nil
		}
	}()
	d, err := build(samples)
	if err != nil {
		return nil
	}
	return d
}

// encode returns v as stored: a tag byte and the payload. The result is
// valid until the next call.
func (e *valueEncoder) encode(v []byte) []byte {
	if len(v) > 0 {
		switch {
		case e.zenc != nil:
			out := e.zenc.EncodeAll(v, append(e.buf[:0], tagZstd))
			e.buf = out
			if len(out)-1 < len(v) {
				return out
			}
		case e.comp == CompressionS2:
			n := s2.MaxEncodedLen(len(v))
			if n > 0 {
				if cap(e.buf) < n+1 {
					e.buf = make([]byte, n+1)
				}
				e.buf = e.buf[:n+1]
				var out []byte
				if e.sdict != nil {
					e.buf[0] = tagS2Dict
					out = e.sdict.Encode(e.buf[1:], v)
				} else {
					e.buf[0] = tagS2
					out = s2.Encode(e.buf[1:], v)
				}
				if len(out) < len(v) && len(out) > 0 && &out[0] == &e.buf[1] {
					return e.buf[:1+len(out)]
				}
			}
		}
	}
	e.buf = append(append(e.buf[:0], tagRaw), v...)
	return e.buf
}

func (e *valueEncoder) close() {
	if e.zenc != nil {
		_ = e.zenc.Close()
	}
}

// errBadValue is wrapped by decode errors.
var errBadValue = errors.New("bad stored value")

// valueDecoder decodes stored values of one version. Safe for concurrent
// use.
type valueDecoder struct {
	zdec *zstd.Decoder // every partition's zstd dictionary; nil if none
}

func newValueDecoder(zstdDicts [][]byte) (*valueDecoder, error) {
	d := &valueDecoder{}
	if len(zstdDicts) > 0 {
		zdec, err := zstd.NewReader(nil,
			zstd.WithDecoderDicts(zstdDicts...),
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd dictionaries: %v", ErrCorrupt, err)
		}
		d.zdec = zdec
	}
	return d, nil
}

// decode appends the value stored as v to dst. sdict is the partition's S2
// dictionary, nil if it has none.
func (d *valueDecoder) decode(dst, v []byte, sdict *s2.Dict, limit int) ([]byte, error) {
	if len(v) == 0 {
		return dst, fmt.Errorf("%w: %w: empty", ErrCorrupt, errBadValue)
	}
	src := v[1:]
	switch v[0] {
	case tagRaw:
		if limit >= 0 && len(src) > limit {
			return dst, fmt.Errorf("%w: a value of %d bytes", ErrTooLarge, len(src))
		}
		return append(dst, src...), nil
	case tagS2, tagS2Dict:
		n, err := s2.DecodedLen(src)
		if err != nil {
			return dst, fmt.Errorf("%w: %w: s2: %v", ErrCorrupt, errBadValue, err)
		}
		if limit >= 0 && n > limit {
			return dst, fmt.Errorf("%w: a value of %d bytes", ErrTooLarge, n)
		}
		start := len(dst)
		if cap(dst)-start < n {
			grown := make([]byte, start, start+n)
			copy(grown, dst)
			dst = grown
		}
		buf := dst[start : start+n]
		var out []byte
		if v[0] == tagS2 {
			out, err = s2.Decode(buf, src)
		} else if sdict != nil {
			out, err = sdict.Decode(buf, src)
		} else {
			err = errors.New("no s2 dictionary")
		}
		if err != nil {
			return dst[:start], fmt.Errorf("%w: %w: s2: %v", ErrCorrupt, errBadValue, err)
		}
		if len(out) != n || (n > 0 && &out[0] != &buf[0]) {
			return append(dst[:start], out...), nil
		}
		return dst[:start+n], nil
	case tagZstd:
		if d.zdec == nil {
			return dst, fmt.Errorf("%w: %w: no zstd dictionary", ErrCorrupt, errBadValue)
		}
		out, err := d.zdec.DecodeAll(src, dst)
		if err != nil {
			return dst, fmt.Errorf("%w: %w: zstd: %v", ErrCorrupt, errBadValue, err)
		}
		if limit >= 0 && len(out)-len(dst) > limit {
			return dst, fmt.Errorf("%w: a value of %d bytes", ErrTooLarge, len(out)-len(dst))
		}
		return out, nil
	}
	return dst, fmt.Errorf("%w: %w: unknown tag %d", ErrCorrupt, errBadValue, v[0])
}

func (d *valueDecoder) close() {
	if d.zdec != nil {
		d.zdec.Close()
	}
}
