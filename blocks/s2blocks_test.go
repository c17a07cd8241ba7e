package blocks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"
)

// TestS2Blocks: with CompressionS2Blocks every key reads back — the first
// and last of a block, a value larger than a block, an empty value — and
// keys before the first, between two and after the last are not found.
// Text-like values take less than half the room they take stored one by
// one.
func TestS2Blocks(t *testing.T) {
	dir := t.TempDir()
	var recs []record
	want := map[string][]byte{}
	for i := range 30000 {
		k := []byte(fmt.Sprintf("key-%06d", 2*i)) // odd numbers are missing
		v := []byte(fmt.Sprintf(`{"id":%d,"name":"user %d","tags":["alpha","bravo"],"active":true}`, i, i%97))
		switch i {
		case 10:
			v = bytes.Repeat([]byte("large "), 2*BlockSize) // a block of its own
		case 11:
			v = []byte{}
		}
		recs = append(recs, record{k, v})
		want[string(k)] = v
	}
	writeSeqFile(t, filepath.Join(dir, "part-00000"), recs)
	sizes := map[Compression]int64{}
	for _, comp := range []Compression{CompressionNone, CompressionS2Blocks} {
		s := openTestStore(t, t.TempDir(), Options{})
		v := build(t, s, BuildSpec{DB: "db", Version: string(comp), Files: sourceFiles(t, dir, []string{"part-00000"}),
			Compression: comp})
		for k, w := range want {
			got, err := v.Get(0, []byte(k))
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("%s: Get(%s) = %.20q, %v; want %.20q", comp, k, got, err, w)
			}
		}
		for _, k := range []string{"", "a", "key-", "key-000001", "key-001001", "key-003999", "key-059999", "key-060000", "zzz"} {
			if got, err := v.Get(0, []byte(k)); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: Get(%q) of a missing key = %.20q, %v; want ErrNotFound", comp, k, got, err)
			}
		}
		fi, err := os.Stat(filepath.Join(s.dir, "dbs", "db", string(comp), partitionFile(0)))
		if err != nil {
			t.Fatal(err)
		}
		sizes[comp] = fi.Size()
	}
	if sizes[CompressionS2Blocks]*2 > sizes[CompressionNone] {
		t.Errorf("s2-blocks file %d bytes, none %d: want less than half", sizes[CompressionS2Blocks], sizes[CompressionNone])
	}
	t.Logf("partition file: none %d bytes, s2-blocks %d bytes", sizes[CompressionNone], sizes[CompressionS2Blocks])
}

// TestFindInBlockCorrupt: a damaged block is ErrCorrupt, never a panic or
// a wrong value.
func TestFindInBlockCorrupt(t *testing.T) {
	var p blockPacker
	for i := range 50 {
		p.add([]byte(fmt.Sprintf("k%03d", i)), []byte("value"))
	}
	_, block := p.flush()
	// The first record claims a prefix shared with a key before it.
	badShared := prefixBlock([]byte("\x03\x01k\x01v"))
	for _, bad := range [][]byte{nil, {tagRaw, 1, 2}, append([]byte{tagPrefixRecords}, block[1:len(block)/2]...),
		{tagPrefixRecords, 0xff, 0xff, 0xff}, {tagRecords, 0xff, 0xff, 0xff}, badShared} {
		if _, err := findInBlock(nil, bad, []byte("k000"), []byte("k010"), p.max, -1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("findInBlock(%.10x…) = %v, want ErrCorrupt", bad, err)
		}
	}
	if got, err := findInBlock(nil, block, []byte("k000"), []byte("k049"), p.max, -1); err != nil || string(got) != "value" {
		t.Errorf("findInBlock(k049) = %q, %v", got, err)
	}
	// A block larger than the partition says its largest is: refused
	// before anything is allocated for it.
	if _, err := findInBlock(nil, block, []byte("k000"), []byte("k049"), p.max-1, -1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("findInBlock over the limit = %v, want ErrCorrupt", err)
	}
}

// TestFindInBlockFormat2: blocks of partition format 2 (tagRecords, whole
// keys, S2's fastest encoding) still read.
func TestFindInBlockFormat2(t *testing.T) {
	var raw []byte
	for i := range 50 {
		k, v := fmt.Sprintf("k%03d", 2*i), fmt.Sprintf("value %d", i)
		raw = binary.AppendUvarint(raw, uint64(len(k)))
		raw = append(raw, k...)
		raw = binary.AppendUvarint(raw, uint64(len(v)))
		raw = append(raw, v...)
	}
	block := append([]byte{tagRecords}, s2.Encode(nil, raw)...)
	for _, tc := range []struct {
		key, want string
		err       error
	}{{"k000", "value 0", nil}, {"k050", "value 25", nil}, {"k098", "value 49", nil}, {"k001", "", ErrNotFound}, {"k099", "", ErrNotFound}} {
		got, err := findInBlock(nil, block, []byte("k000"), []byte(tc.key), len(raw), -1)
		if string(got) != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("findInBlock(%s) = %q, %v; want %q, %v", tc.key, got, err, tc.want, tc.err)
		}
	}
}

// FuzzFindInBlock: whatever the stored block holds, a lookup returns a
// value, ErrNotFound or ErrCorrupt, and never panics or allocates past
// the partition's bound.
func FuzzFindInBlock(f *testing.F) {
	var p blockPacker
	for i := range 20 {
		p.add([]byte(fmt.Sprintf("key-%03d", i)), bytes.Repeat([]byte{byte(i)}, i))
	}
	_, block := p.flush()
	f.Add(block, []byte("key-000"), []byte("key-007"))
	f.Add([]byte{tagRecords, 0x10, 0x00}, []byte("k"), []byte("k"))
	f.Fuzz(func(t *testing.T, block, first, key []byte) {
		got, err := findInBlock(nil, block, first, key, 4*BlockSize, -1)
		switch {
		case err == nil:
			if len(got) > 4*BlockSize {
				t.Fatalf("a value of %d bytes from a block of at most %d", len(got), 4*BlockSize)
			}
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt):
		default:
			t.Fatalf("findInBlock = %v, want ErrNotFound or ErrCorrupt", err)
		}
	})
}

// prefixBlock stores raw records as a tagPrefixRecords block.
func prefixBlock(raw []byte) []byte {
	enc := s2.Encode(nil, raw)
	b := binary.LittleEndian.AppendUint32([]byte{tagPrefixRecords}, crc32.Checksum(enc, castagnoli))
	return append(b, enc...)
}

// TestFindInBlockCRC: a byte changed inside a block's S2 data where it
// still decodes (in a literal: values S2 cannot shrink) is ErrCorrupt, not
// a wrong value: every lookup checks the CRC of the block it decodes.
func TestFindInBlockCRC(t *testing.T) {
	var p blockPacker
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		v := make([]byte, 100)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		p.add([]byte(fmt.Sprintf("k%03d", i)), v)
	}
	_, stored := p.flush()
	block := bytes.Clone(stored)
	if _, err := findInBlock(nil, block, []byte("k000"), []byte("k019"), p.max, -1); err != nil {
		t.Fatal(err)
	}
	block[len(block)-50] ^= 0x01 // inside k019's value, stored as a literal
	raw, err := s2.Decode(nil, block[blockHeader:])
	if err != nil {
		t.Fatalf("the changed block no longer decodes (%v): the test needs a byte in a literal", err)
	}
	if got, err := findInBlock(nil, block, []byte("k000"), []byte("k019"), p.max, -1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("findInBlock of a changed block = %x…, %v; want ErrCorrupt (it decodes to %d bytes)", got[:min(8, len(got))], err, len(raw))
	}
}

// TestOpenBlocksFormats: a blocks partition that says format 2 (written
// before format 3) still opens and reads; one that says a format this
// reader does not know is refused as ErrCorrupt when the version opens.
func TestOpenBlocksFormats(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 1, perFile: 500, seed: 7})
	for _, tc := range []struct {
		format string
		ok     bool
	}{{"2", true}, {"3", true}, {"4", false}, {"1", false}} {
		t.Run("format="+tc.format, func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStore(t, dir, Options{SkipVerify: true}) // the file changes below
			build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks}).Close()
			path := filepath.Join(dir, "dbs", "db", "v1", partitionFile(0))
			db, err := bolt.Open(path, 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(metaBucket).Put([]byte(metaFormat), []byte(tc.format))
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			v, err := s.Open("db", "v1")
			if !tc.ok {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open of format %s = %v, want ErrCorrupt", tc.format, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open of format %s: %v", tc.format, err)
			}
			defer v.Close()
			for k, want := range d.want {
				if got, err := v.Get(0, []byte(k)); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("Get(%s) = %q, %v; want %q", k, got, err, want)
				}
			}
		})
	}
}

// TestFindInBlockLarge: a record larger than a block, in a block of its
// own, is decoded in the room of the buffer it is appended to, whose
// contents stay: with room enough, a lookup allocates nothing of the
// record's size.
func TestFindInBlockLarge(t *testing.T) {
	var p blockPacker
	r := rand.New(rand.NewPCG(3, 4))
	big := make([]byte, 100<<10)
	for i := range big {
		big[i] = byte('a' + r.IntN(4))
	}
	p.add([]byte("big"), big)
	_, block := p.flush()
	got, err := findInBlock([]byte("prefix:"), block, []byte("big"), []byte("big"), p.max, -1)
	if err != nil || string(got) != "prefix:"+string(big) {
		t.Fatalf("findInBlock(big) = %.20q… (%d bytes), %v", got, len(got), err)
	}
	if got, err := findInBlock([]byte("prefix:"), block, []byte("big"), []byte("bigger"), p.max, -1); !errors.Is(err, ErrNotFound) || string(got) != "prefix:" {
		t.Errorf("findInBlock(bigger) = %.20q, %v; want the prefix alone and ErrNotFound", got, err)
	}
	dst := make([]byte, 0, 2*len(big))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 20
	for range n {
		if _, err := findInBlock(dst, block, []byte("big"), []byte("big"), p.max, -1); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// At most a scratch buffer of the pool (which the race detector's
	// pool drops at random), never the record's size.
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > uint64(len(big))/8 {
		t.Errorf("a lookup of a 100 KiB record into a buffer with room allocates %d bytes", per)
	}
}

// TestGetLimit: in every layout, a value within the limit reads, and one
// over it is ErrTooLarge, found before the value is copied or decoded
// (zstd aside, whose values are decoded first): a lookup of a 256 KiB
// value with a 1 KiB limit allocates a few hundred bytes, not the value.
func TestGetLimit(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	big := make([]byte, 256<<10)
	for i := range big {
		big[i] = byte('a' + r.IntN(8))
	}
	var recs []record
	for i := range 2000 {
		recs = append(recs, record{[]byte(fmt.Sprintf("key-%05d", i)), []byte(fmt.Sprintf("value %d", i))})
	}
	recs[1000].v = big
	writeSeqFile(t, filepath.Join(dir, "part-00000"), recs)
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd, CompressionS2Blocks} {
		t.Run(string(comp), func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{})
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, dir, []string{"part-00000"}), Compression: comp})
			if got, err := v.GetLimit(0, []byte("key-00007"), 7); err != nil || string(got) != "value 7" {
				t.Errorf("GetLimit(small, its size) = %q, %v", got, err)
			}
			if _, err := v.GetLimit(0, []byte("key-00007"), 6); !errors.Is(err, ErrTooLarge) {
				t.Errorf("GetLimit(small, a byte short) = %v, want ErrTooLarge", err)
			}
			if got, err := v.GetLimit(0, []byte("key-01000"), len(big)); err != nil || !bytes.Equal(got, big) {
				t.Errorf("GetLimit(big, its size) = %d bytes, %v", len(got), err)
			}
			// Missing keys, one of them found where the large record is.
			for _, k := range []string{"key-99999", "key-01000a"} {
				if _, err := v.GetLimit(0, []byte(k), 0); !errors.Is(err, ErrNotFound) {
					t.Errorf("GetLimit(%s, missing) = %v, want ErrNotFound", k, err)
				}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const n = 20
			for range n {
				if _, err := v.GetLimit(0, []byte("key-01000"), 1<<10); !errors.Is(err, ErrTooLarge) {
					t.Fatalf("GetLimit(big, 1 KiB) = %v, want ErrTooLarge", err)
				}
			}
			runtime.ReadMemStats(&after)
			per := (after.TotalAlloc - before.TotalAlloc) / n
			if comp != CompressionZstd && per > 4<<10 {
				t.Errorf("a refused lookup of a 256 KiB value allocates %d bytes", per)
			}
			t.Logf("a refused lookup allocates %d bytes", per)
		})
	}
}

// TestSmallVersionSmallOnDisk: a small db is small on disk whatever its
// compression. The example data's 3.5 KB of records over 20 s2-blocks
// partitions took 3.9 MB (six 32 KiB pages each, issue 38); with the OS's
// pages for a small partition, a partition holding a few records takes a
// few pages.
func TestSmallVersionSmallOnDisk(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 20, perFile: 10, seed: 3})
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionS2Blocks} {
		s := openTestStore(t, t.TempDir(), Options{})
		v := build(t, s, BuildSpec{DB: "db", Version: string(comp), Files: d.files(t), Compression: comp})
		checkVersion(t, v, d)
		var total int64
		for p := range 20 {
			fi, err := os.Stat(filepath.Join(s.dir, "dbs", "db", string(comp), partitionFile(p)))
			if err != nil {
				t.Fatal(err)
			}
			total += fi.Size()
		}
		t.Logf("%s: 200 records in 20 partitions: %d bytes", comp, total)
		if limit := int64(20 * 8 * os.Getpagesize()); total > limit {
			t.Errorf("%s: 200 records in 20 partitions take %d bytes on disk, over %d", comp, total, limit)
		}
	}
}
