package blocks

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

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
)

// ParseCompression parses a configuration value: "none" (or ""), "s2",
// "zstd"; "snappy", as in sequins configs, means s2. Case does not matter.
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return CompressionNone, nil
	case "s2", "snappy":
		return CompressionS2, nil
	case "zstd":
		return CompressionZstd, nil
	}
	return "", fmt.Errorf("%w: unknown compression %q (want none, s2 or zstd)", ErrInvalidSpec, s)
}

// normalize maps "" to CompressionNone and rejects unknown values.
func (c Compression) normalize() (Compression, error) {
	switch c {
	case "", CompressionNone:
		return CompressionNone, nil
	case CompressionS2, CompressionZstd:
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
)

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
	e := &valueEncoder{comp: c}
	meta := map[string][]byte{}
	switch c {
	case CompressionZstd:
		d := trainDict(samples, func(s [][]byte) ([]byte, error) {
			return dict.BuildZstdDict(s, dict.Options{
				MaxDictSize: dictMaxSize, HashBytes: 6,
				ZstdDictID: zstdDictID(p), ZstdLevel: zstd.SpeedFastest,
			})
		})
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
		d := trainDict(samples, func(s [][]byte) ([]byte, error) {
			return dict.BuildS2Dict(s, dict.Options{MaxDictSize: dictMaxSize, HashBytes: 6})
		})
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
func (d *valueDecoder) decode(dst, v []byte, sdict *s2.Dict) ([]byte, error) {
	if len(v) == 0 {
		return dst, fmt.Errorf("%w: %w: empty", ErrCorrupt, errBadValue)
	}
	src := v[1:]
	switch v[0] {
	case tagRaw:
		return append(dst, src...), nil
	case tagS2, tagS2Dict:
		n, err := s2.DecodedLen(src)
		if err != nil {
			return dst, fmt.Errorf("%w: %w: s2: %v", ErrCorrupt, errBadValue, err)
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
		return out, nil
	}
	return dst, fmt.Errorf("%w: %w: unknown tag %d", ErrCorrupt, errBadValue, v[0])
}

func (d *valueDecoder) close() {
	if d.zdec != nil {
		d.zdec.Close()
	}
}
