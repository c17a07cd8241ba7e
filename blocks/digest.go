package blocks

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Digest is an order-independent digest of a set of records: their count
// and, in two lanes, the sums modulo 2^64 of a hash of each record. A
// record's hash in lane i (1 or 2) is XXH64 (seed 0) of the byte i, then
// uvarint(len(key)), the key and the value (uncompressed, as served).
// The digest of a union of disjoint sets is the sum of theirs, so that a
// version's digest is the sum of its partitions', and a delta's is its
// base's minus the records it replaces or deletes plus those it writes.
// It detects a lost, added or altered record; it is not meant to resist
// someone forging records (a keyed MAC would be).
type Digest struct {
	Records    int64
	Sum1, Sum2 uint64
}

// digestBufMax is the largest record hashed through a copy in one buffer;
// larger ones are streamed.
const digestBufMax = 64 << 10

// Digester adds records to (and removes them from) its Digest, reusing
// a buffer. The zero value is an empty digest. Not safe for concurrent use.
type Digester struct {
	Digest
	buf []byte
}

// recordHash returns a record's two hashes.
func (dg *Digester) recordHash(k, v []byte) (uint64, uint64) {
	if len(k)+len(v) > digestBufMax {
		var pre [1 + binary.MaxVarintLen64]byte
		n := binary.PutUvarint(pre[1:], uint64(len(k)))
		var h [2]uint64
		for i := range h {
			pre[0] = byte(i + 1)
			d := xxhash.New()
			_, _ = d.Write(pre[:1+n])
			_, _ = d.Write(k)
			_, _ = d.Write(v)
			h[i] = d.Sum64()
		}
		return h[0], h[1]
	}
	b := append(dg.buf[:0], 1)
	b = binary.AppendUvarint(b, uint64(len(k)))
	b = append(append(b, k...), v...)
	dg.buf = b
	return sum64Lanes(b, 2)
}

// Add adds a record.
func (dg *Digester) Add(k, v []byte) { dg.AddHash(k, v) }

// AddHash adds a record and returns its hash in lane 1: a 64-bit hash
// of the key and the value together, which tells a record from another
// (publish's delta index keeps it per key).
func (dg *Digester) AddHash(k, v []byte) uint64 {
	h1, h2 := dg.recordHash(k, v)
	dg.Records++
	dg.Sum1 += h1
	dg.Sum2 += h2
	return h1
}

// Remove takes a record out.
func (dg *Digester) Remove(k, v []byte) {
	h1, h2 := dg.recordHash(k, v)
	dg.Records--
	dg.Sum1 -= h1
	dg.Sum2 -= h2
}

// Add returns the digest of the union of d's and o's (disjoint) records.
func (d Digest) Add(o Digest) Digest {
	return Digest{Records: d.Records + o.Records, Sum1: d.Sum1 + o.Sum1, Sum2: d.Sum2 + o.Sum2}
}

// Sub returns the digest of d's records less o's (a subset of them).
func (d Digest) Sub(o Digest) Digest {
	return Digest{Records: d.Records - o.Records, Sum1: d.Sum1 - o.Sum1, Sum2: d.Sum2 - o.Sum2}
}

// String is "ms2:<records>:<sum1 hex><sum2 hex>" (16 hex digits each).
func (d Digest) String() string {
	return fmt.Sprintf("ms2:%d:%016x%016x", d.Records, d.Sum1, d.Sum2)
}

// ParseDigest parses Digest.String's form.
func ParseDigest(s string) (Digest, error) {
	rest, ok := strings.CutPrefix(s, "ms2:")
	count, sums, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || len(sums) != 32 {
		return Digest{}, fmt.Errorf("digest %q: want ms2:<records>:<32 hex digits>", s)
	}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil || n < 0 {
		return Digest{}, fmt.Errorf("digest %q: bad record count", s)
	}
	s1, err1 := strconv.ParseUint(sums[:16], 16, 64)
	s2, err2 := strconv.ParseUint(sums[16:], 16, 64)
	if err1 != nil || err2 != nil {
		return Digest{}, fmt.Errorf("digest %q: bad sums", s)
	}
	return Digest{Records: n, Sum1: s1, Sum2: s2}, nil
}

// DigestFileName is the file of a version that holds its VersionDigest.
const DigestFileName = "_DIGEST"

// DigestFormat is the VersionDigest format this release writes and reads.
const DigestFormat = 1

// maxDigestFile bounds the bytes read of a _DIGEST file: about 60 per
// partition.
const maxDigestFile = 64 << 20

// VersionDigest is a version's _DIGEST file (JSON): the digest of each
// partition under the db's partitioner, and of the whole version. A node
// holding some partitions checks theirs.
type VersionDigest struct {
	Format int `json:"format"`
	// Partitioner is the partitioner's identity (Manifest.Partitioner).
	Partitioner   string `json:"partitioner"`
	NumPartitions int    `json:"num_partitions"`
	Total         string `json:"total"`
	// Partitions are the partitions' digests, by partition.
	Partitions []string `json:"partitions"`
}

// NewVersionDigest returns the digest of a version whose partitions'
// digests are parts, under the partitioner of that identity.
func NewVersionDigest(partitioner string, parts []Digest) *VersionDigest {
	vd := &VersionDigest{Format: DigestFormat, Partitioner: partitioner, NumPartitions: len(parts), Partitions: make([]string, len(parts))}
	var total Digest
	for p, d := range parts {
		vd.Partitions[p] = d.String()
		total = total.Add(d)
	}
	vd.Total = total.String()
	return vd
}

// DigestOf returns the digest of a version whose manifest holds every
// partition.
func DigestOf(m *Manifest) (*VersionDigest, error) {
	if len(m.Partitions) != m.NumPartitions {
		return nil, fmt.Errorf("blocks: digest of %s/%s: %d of %d partitions held", m.DB, m.Version, len(m.Partitions), m.NumPartitions)
	}
	parts := make([]Digest, m.NumPartitions)
	for i, pi := range m.PartitionInfo {
		d, err := ParseDigest(pi.Digest)
		if err != nil {
			return nil, fmt.Errorf("blocks: digest of %s/%s partition %d: %w", m.DB, m.Version, pi.Partition, err)
		}
		parts[i] = d
	}
	return NewVersionDigest(m.Partitioner, parts), nil
}

// ReadVersionDigest reads and validates a _DIGEST file.
func ReadVersionDigest(r io.Reader) (*VersionDigest, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDigestFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DigestFileName, err)
	}
	if len(b) > maxDigestFile {
		return nil, fmt.Errorf("%w: %s: more than %d bytes", ErrBadInput, DigestFileName, maxDigestFile)
	}
	var vd VersionDigest
	if err := json.Unmarshal(b, &vd); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadInput, DigestFileName, err)
	}
	if err := vd.validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadInput, DigestFileName, err)
	}
	return &vd, nil
}

func (vd *VersionDigest) validate() error {
	if vd.Format != DigestFormat {
		return fmt.Errorf("format %d, want %d", vd.Format, DigestFormat)
	}
	if vd.NumPartitions < 0 || len(vd.Partitions) != vd.NumPartitions {
		return fmt.Errorf("%d partition digests for %d partitions", len(vd.Partitions), vd.NumPartitions)
	}
	var total Digest
	for p, s := range vd.Partitions {
		d, err := ParseDigest(s)
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		total = total.Add(d)
	}
	if t, err := ParseDigest(vd.Total); err != nil || t != total {
		return fmt.Errorf("total %q is not the sum of the partitions' (%s)", vd.Total, total)
	}
	return nil
}

// Marshal returns the file's bytes.
func (vd *VersionDigest) Marshal() []byte {
	b, _ := json.MarshalIndent(vd, "", " ")
	return append(b, '\n')
}

// ErrDigestMismatch: a version's records are not those its _DIGEST
// describes.
var ErrDigestMismatch = errors.New("digest mismatch")

// Check compares the partitions m holds with the digest: an error
// wrapping ErrDigestMismatch names the first partition that differs.
func (vd *VersionDigest) Check(m *Manifest) error {
	if vd.NumPartitions != m.NumPartitions {
		return fmt.Errorf("%w: %s has %d partitions, the version %d", ErrDigestMismatch, DigestFileName, vd.NumPartitions, m.NumPartitions)
	}
	if vd.Partitioner != "" && m.Partitioner != "" && vd.Partitioner != m.Partitioner {
		return fmt.Errorf("%w: %s was computed with partitioner %s, the db uses %s", ErrDigestMismatch, DigestFileName, vd.Partitioner, m.Partitioner)
	}
	for _, pi := range m.PartitionInfo {
		if want := vd.Partitions[pi.Partition]; pi.Digest != want {
			got := pi.Digest
			if got == "" {
				got = "none (built before digests)"
			}
			return fmt.Errorf("%w: partition %d: built %s, %s says %s", ErrDigestMismatch, pi.Partition, got, DigestFileName, want)
		}
	}
	return nil
}
