package blocks

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// deltaOf is a delta over a dataset: its files and the full dataset it
// makes, written as n files too (the full build to compare with).
type deltaOf struct {
	dir     string
	upserts []string // file names
	full    *dataset
}

// makeDelta changes 1 % of base's keys (half updated, half new) and
// deletes 0.1 %, at least one of each.
func makeDelta(t *testing.T, base *dataset, seed uint64) *deltaOf {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	keys := slices.Sorted(maps.Keys(base.want))
	want := maps.Clone(base.want)
	changed := max(len(keys)/100, 2)
	deleted := max(len(keys)/1000, 1)
	var ups []record
	perm := r.Perm(len(keys))
	for _, i := range perm[:changed/2] {
		k := []byte(keys[i])
		v := fmt.Appendf(nil, "updated %x %d", k, seed)
		ups = append(ups, record{k, v})
		want[keys[i]] = v
	}
	ups = append(ups, record{[]byte(keys[perm[changed/2]]), base.want[keys[perm[changed/2]]]}) // upserted unchanged
	for i := range changed - changed/2 {
		k := fmt.Appendf(nil, "new-%d-%d", seed, i)
		v := fmt.Appendf(nil, "new value %d", i)
		ups = append(ups, record{k, v})
		want[string(k)] = v
	}
	d := &deltaOf{dir: t.TempDir(), upserts: []string{"part-00000", "part-00001"}}
	writeSeqFile(t, filepath.Join(d.dir, "part-00000"), ups[:len(ups)/2])
	writeSeqFile(t, filepath.Join(d.dir, "part-00001"), ups[len(ups)/2:])
	var dels [][]byte
	for _, i := range perm[changed/2+1 : changed/2+1+deleted] {
		dels = append(dels, []byte(keys[i]))
		delete(want, keys[i])
	}
	dels = append(dels, []byte("never existed"))
	writeDeletes(t, filepath.Join(d.dir, DeletesFileName), dels)

	full := &dataset{dir: t.TempDir(), want: want, n: base.n}
	recs := make([][]record, base.n)
	for i, k := range slices.Sorted(maps.Keys(want)) {
		recs[i%base.n] = append(recs[i%base.n], record{[]byte(k), want[k]})
	}
	for f := range base.n {
		name := fmt.Sprintf("part-%05d", f)
		full.names = append(full.names, name)
		writeSeqFile(t, filepath.Join(full.dir, name), recs[f])
	}
	d.full = full
	return d
}

func writeDeletes(t *testing.T, path string, keys [][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewDeletesWriter(f)
	for _, k := range keys {
		if err := w.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func (d *deltaOf) spec(t *testing.T, base *Version, version string) BuildSpec {
	m := base.Manifest()
	return BuildSpec{DB: m.DB, Version: version, Base: base, Compression: m.Compression,
		Files:   sourceFiles(t, d.dir, d.upserts),
		Deletes: sourceFiles(t, d.dir, []string{DeletesFileName})}
}

// specComp is spec with another compression than the base's.
func (d *deltaOf) specComp(t *testing.T, base *Version, version string, comp Compression) BuildSpec {
	m := base.Manifest()
	return BuildSpec{DB: m.DB, Version: version, Base: base, Compression: comp,
		Files:   sourceFiles(t, d.dir, d.upserts),
		Deletes: sourceFiles(t, d.dir, []string{DeletesFileName})}
}

// sameVersions checks that two versions hold the same partitions with the
// same records in the same order, and the same checksums and digests.
func sameVersions(t *testing.T, got, want *Version) {
	t.Helper()
	gm, wm := got.Manifest(), want.Manifest()
	if !slices.Equal(gm.Partitions, wm.Partitions) || gm.Records != wm.Records {
		t.Fatalf("partitions %v, %d records; want %v, %d", gm.Partitions, gm.Records, wm.Partitions, wm.Records)
	}
	for i, p := range gm.Partitions {
		g, w := gm.PartitionInfo[i], wm.PartitionInfo[i]
		if g.Digest != w.Digest || (g.Checksum != "" && g.Checksum != w.Checksum) || g.Records != w.Records || g.Bytes != w.Bytes {
			t.Errorf("partition %d: digest %s checksum %s records %d; full build %s %s %d", p, g.Digest, g.Checksum, g.Records, w.Digest, w.Checksum, w.Records)
		}
		grecs, _, err := got.Scan(p, ScanOptions{Limit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		wrecs, _, err := want.Scan(p, ScanOptions{Limit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		if len(grecs) != len(wrecs) {
			t.Fatalf("partition %d: %d records, want %d", p, len(grecs), len(wrecs))
		}
		for j := range grecs {
			if !bytes.Equal(grecs[j].Key, wrecs[j].Key) || !bytes.Equal(grecs[j].Value, wrecs[j].Value) {
				t.Fatalf("partition %d record %d: %q=%q, want %q=%q", p, j, grecs[j].Key, grecs[j].Value, wrecs[j].Key, wrecs[j].Value)
			}
		}
	}
}

func TestDeltaBuild(t *testing.T) {
	for _, tc := range []struct {
		name     string
		comp     Compression
		baseComp Compression // "": comp
		held     []int
		budget   int64
	}{
		{name: "none", comp: CompressionNone},
		{name: "s2", comp: CompressionS2},
		{name: "zstd", comp: CompressionZstd},
		{name: "s2-blocks", comp: CompressionS2Blocks},
		{name: "some-partitions", comp: CompressionZstd, held: []int{1, 3}},
		{name: "spilled", comp: CompressionS2, budget: 64 << 10},
		{name: "recompressed", comp: CompressionZstd, baseComp: CompressionS2}, // values decoded and encoded again
		{name: "blocks-to-zstd", comp: CompressionZstd, baseComp: CompressionS2Blocks},
		{name: "blocks-spilled", comp: CompressionS2Blocks, budget: 64 << 10},
		{name: "blocks-some", comp: CompressionS2Blocks, held: []int{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{}
			if tc.budget > 0 {
				opts.MemoryBudget = tc.budget
			}
			s := openTestStore(t, t.TempDir(), opts)
			base := makeDataset(t, datasetOpts{files: 4, perFile: 2000, repetitive: true, seed: 1})
			v1 := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: base.files(t), Compression: cmp.Or(tc.baseComp, tc.comp), Partitions: tc.held})
			d := makeDelta(t, base, 2)
			full := build(t, s, BuildSpec{DB: "db", Version: "v2full", Files: d.full.files(t), Compression: tc.comp, Partitions: tc.held})
			v2 := build(t, s, d.specComp(t, v1, "v2", tc.comp))
			sameVersions(t, v2, full)
			checkVersion(t, v2, d.full)
			di := v2.Manifest().Delta
			if di == nil || di.Base != "v1" || di.Deleted == 0 || di.Added == 0 || di.Changed == 0 {
				t.Errorf("delta info %+v", di)
			}
			// A chain: v3 over v2 (itself a delta).
			d3 := makeDelta(t, d.full, 3)
			full3 := build(t, s, BuildSpec{DB: "db", Version: "v3full", Files: d3.full.files(t), Compression: tc.comp, Partitions: tc.held})
			sameVersions(t, build(t, s, d3.spec(t, v2, "v3")), full3)
		})
	}
}

func TestDeltaPresharded(t *testing.T) {
	s := openTestStore(t, t.TempDir(), Options{})
	base := preshardedDataset(t, 20, 3, 100, nil)
	v1 := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: base.files(t), Presharded: true})
	d := makeDelta(t, base, 4)
	// The pathological key, kept by the presharded base in partition 11,
	// is updated: it must stay there.
	writeSeqFile(t, filepath.Join(d.dir, "part-00002"), []record{{pathological, []byte("changed")}})
	d.upserts = append(d.upserts, "part-00002")
	v2 := build(t, s, d.spec(t, v1, "v2"))
	if got, err := v2.Get(11, pathological); err != nil || string(got) != "changed" {
		t.Fatalf("pathological key in 11: %q, %v", got, err)
	}
	if _, err := v2.Get(19, pathological); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pathological key in 19: %v", err)
	}
	if !v2.Manifest().Presharded {
		t.Error("delta of a presharded base not presharded")
	}
}

func TestDeltaBatchedPartitioner(t *testing.T) {
	s := openTestStore(t, t.TempDir(), Options{})
	base := makeDataset(t, datasetOpts{files: 3, perFile: 1000, seed: 5})
	bp := &batchedPartitioner{}
	v1 := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: base.files(t), Partitioner: bp, PartitionerID: "batched"})
	d := makeDelta(t, base, 6)
	full := build(t, s, BuildSpec{DB: "db", Version: "v2full", Files: d.full.files(t), Partitioner: bp, PartitionerID: "batched"})
	spec := d.spec(t, v1, "v2")
	spec.Partitioner, spec.PartitionerID = bp, "batched"
	sameVersions(t, build(t, s, spec), full)
}

func TestDeltaBadInput(t *testing.T) {
	s := openTestStore(t, t.TempDir(), Options{})
	base := makeDataset(t, datasetOpts{files: 2, perFile: 500, seed: 7})
	v1 := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: base.files(t)})
	key := []byte(slices.Sorted(maps.Keys(base.want))[0])

	t.Run("upserted and deleted", func(t *testing.T) {
		d := makeDelta(t, base, 8)
		writeDeletes(t, filepath.Join(d.dir, DeletesFileName), [][]byte{key})
		writeSeqFile(t, filepath.Join(d.dir, "part-00001"), []record{{key, []byte("x")}})
		_, err := s.Build(context.Background(), d.specFor(t, v1, "bad1"))
		if !errors.Is(err, ErrBadInput) || !bytes.Contains([]byte(err.Error()), []byte("both upserted and deleted")) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("truncated deletions", func(t *testing.T) {
		d := makeDelta(t, base, 9)
		path := filepath.Join(d.dir, DeletesFileName)
		b, _ := os.ReadFile(path)
		for _, cut := range []int{len(b) - 1, len(b) - 16, len(b) - 17, 10} {
			if err := os.WriteFile(path, b[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := s.Build(context.Background(), d.specFor(t, v1, "bad2"))
			if !errors.Is(err, ErrTruncatedDeletes) || !bytes.Contains([]byte(err.Error()), []byte(DeletesFileName)) {
				t.Fatalf("cut at %d of %d: err = %v", cut, len(b), err)
			}
		}
	})
	t.Run("other partitioner", func(t *testing.T) {
		d := makeDelta(t, base, 10)
		spec := d.specFor(t, v1, "bad3")
		spec.PartitionerID = "murmur3"
		if _, err := s.Build(context.Background(), spec); !errors.Is(err, ErrInvalidSpec) {
			t.Fatalf("err = %v", err)
		}
	})
}

func (d *deltaOf) specFor(t *testing.T, base *Version, version string) BuildSpec {
	spec := d.spec(t, base, version)
	spec.Partitioner, spec.PartitionerID = sequinsPartitioner{}, "sequins"
	return spec
}

func TestVersionDigest(t *testing.T) {
	s := openTestStore(t, t.TempDir(), Options{})
	base := makeDataset(t, datasetOpts{files: 3, perFile: 300, seed: 11})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: base.files(t)})
	vd, err := DigestOf(v.Manifest())
	if err != nil {
		t.Fatal(err)
	}
	read, err := ReadVersionDigest(bytes.NewReader(vd.Marshal()))
	if err != nil {
		t.Fatal(err)
	}
	if err := read.Check(v.Manifest()); err != nil {
		t.Fatal(err)
	}
	total, _ := ParseDigest(read.Total)
	if total.Records != int64(len(base.want)) {
		t.Errorf("total %s, want %d records", read.Total, len(base.want))
	}
	// The digest of the records, computed from them in any order.
	var dg Digester
	for k, v := range base.want {
		dg.Add([]byte(k), v)
	}
	if dg.Digest != total {
		t.Errorf("digest of the records %s, total %s", dg.Digest, total)
	}
	read.Partitions[1] = Digest{Records: 1}.String()
	if err := read.Check(v.Manifest()); !errors.Is(err, ErrDigestMismatch) || !bytes.Contains([]byte(err.Error()), []byte("partition 1")) {
		t.Fatalf("Check = %v", err)
	}
	if _, err := ReadVersionDigest(bytes.NewReader(read.Marshal())); err == nil {
		t.Fatal("a total that is not the sum was read")
	}
}

// TestDeltaCopiesBlockCRC: a delta over a base in blocks copies the
// blocks no delta key falls in without checking their CRC (copiedLen):
// a damaged one is carried over as it is, its CRC with it, and a lookup
// in it is ErrCorrupt in the new version as in the base, never a wrong
// value; every other key reads as built. (Before, the build read every
// block's bytes for its CRC and failed on the damaged one.)
func TestDeltaCopiesBlockCRC(t *testing.T) {
	s := openTestStore(t, t.TempDir(), Options{})
	base := makeDataset(t, datasetOpts{files: 2, perFile: 3000, seed: 5})
	v1 := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: base.files(t), Compression: CompressionS2Blocks})
	// A delta touching partition 1 only: every block of 0 is copied.
	var newKey []byte
	for i := 0; ; i++ {
		newKey = fmt.Appendf(nil, "new-%d", i)
		if p, _, _ := (sequinsPartitioner{}).Partition(newKey, 2); p == 1 {
			break
		}
	}
	dir := t.TempDir()
	writeSeqFile(t, filepath.Join(dir, "part-00000"), []record{{newKey, []byte("v")}})
	writeDeletes(t, filepath.Join(dir, DeletesFileName), nil)
	// Damage the second block of partition 0, in its file.
	var first []byte
	var path string
	var stored []byte
	err := v1.View(func(r *Reader) error {
		part := r.c.parts[0]
		path = part.db.Path()
		return part.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(dataBucket).Cursor()
			c.First()
			k, v := c.Next()
			first, stored = bytes.Clone(k), bytes.Clone(v)
			return nil
		})
	})
	if err != nil || len(stored) < 64 {
		t.Fatalf("second block: %d bytes, %v", len(stored), err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(file, stored)
	if at < 0 || bytes.Contains(file[at+1:], stored) {
		t.Fatal("the block's bytes are not once in the file")
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^stored[len(stored)/2]}, int64(at+len(stored)/2)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := v1.Get(0, first); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("base, damaged block: %v, want ErrCorrupt", err)
	}
	v2 := build(t, s, BuildSpec{DB: "db", Version: "v2", Base: v1, Compression: CompressionS2Blocks,
		Files: sourceFiles(t, dir, []string{"part-00000"}), Deletes: sourceFiles(t, dir, []string{DeletesFileName})})
	if _, err := v2.Get(0, first); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("delta, damaged block: %v, want ErrCorrupt", err)
	}
	if got, err := v2.Get(1, newKey); err != nil || string(got) != "v" {
		t.Fatalf("new key: %q, %v", got, err)
	}
	bad := 0
	for k, want := range base.want {
		p, _, _ := (sequinsPartitioner{}).Partition([]byte(k), 2)
		got, err := v2.Get(p, []byte(k))
		switch {
		case errors.Is(err, ErrCorrupt) && p == 0:
			bad++ // in the damaged block
		case err != nil || !bytes.Equal(got, want):
			t.Fatalf("Get(%d, %x) = %x, %v; want %x", p, k, got, err, want)
		}
	}
	if bad == 0 || bad > 100 {
		t.Errorf("%d keys in the damaged block", bad)
	}
}
