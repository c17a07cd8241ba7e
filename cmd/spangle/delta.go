package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/blocks/seqfile"
	"github.com/spangledb/spangle/node/source"
	"github.com/spangledb/spangle/node/source/objstore"
	"github.com/spangledb/spangle/plugins"
)

// datasetFlags say how to read a dataset as the db's nodes do: the
// digest and the delta depend on the partitioner and on which records a
// build keeps.
type datasetFlags struct {
	partitioner, format, keyField, valueField *string
	presharded                                *bool
}

func addDatasetFlags(fs interface {
	String(name, value, usage string) *string
	Bool(name string, value bool, usage string) *bool
}) datasetFlags {
	return datasetFlags{
		partitioner: fs.String("partitioner", "sequins", `the db's partitioner: sequins, hadoop, murmur3 or wasm:<path> (as [dbs.<name>] partitioner)`),
		format:      fs.String("format", "auto", "the files' format, as the db's format key"),
		keyField:    fs.String("key-field", "", "the key column or field (Parquet, Avro); default key"),
		valueField:  fs.String("value-field", "", "the value column or field (Parquet, Avro); default value"),
		presharded:  fs.Bool("presharded", false, "the files are presharded, as the db's presharded key says"),
	}
}

// localStore is a blocks.Store in a temporary directory, with the
// dataset's partitioner, to build versions in to digest or compare them.
type localStore struct {
	*blocks.Store
	dir  string
	keep bool // a cache: versions stay
	part plugins.Partitioner
	df   datasetFlags
}

// openLocalStore opens the store in cache (kept: publish --cache), or in
// a temporary directory removed by close when cache is "".
func openLocalStore(ctx context.Context, df datasetFlags, cache string) (*localStore, error) {
	part, err := plugins.Open(ctx, *df.partitioner, plugins.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("--partitioner: %w", err)
	}
	if _, err := blocks.ParseFormat(*df.format); err != nil {
		return nil, fmt.Errorf("--format: %w", err)
	}
	dir, keep := cache, cache != ""
	if keep {
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "spangle-delta-")
	}
	if err != nil {
		return nil, err
	}
	st, err := blocks.OpenStore(dir, blocks.Options{})
	if err != nil {
		if !keep {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	return &localStore{Store: st, dir: dir, keep: keep, part: part, df: df}, nil
}

// cached returns version of db kept in the cache, built as the dataset
// flags say; nil if there is none such.
func (ls *localStore) cached(db, version string) *blocks.Version {
	if !ls.keep {
		return nil
	}
	v, err := ls.Open(db, version)
	if err != nil {
		return nil
	}
	if m := v.Manifest(); m.Partitioner != ls.part.Identity() || m.Presharded != *ls.df.presharded || len(m.Partitions) != m.NumPartitions {
		v.Close()
		return nil
	}
	return v
}

// keepOnly removes from the cache every version of db but version.
func (ls *localStore) keepOnly(db, version string) {
	ms, err := ls.Versions()
	if err != nil {
		return
	}
	for _, m := range ms {
		if m.DB == db && m.Version != version {
			ls.Remove(db, m.Version) //nolint:errcheck // the cache only
		}
	}
}

func (ls *localStore) close() {
	ls.Store.Close()
	if !ls.keep {
		os.RemoveAll(ls.dir)
	}
	if c, ok := ls.part.(interface{ Close(context.Context) error }); ok {
		c.Close(context.Background()) //nolint:errcheck // nothing left to do
	}
}

func (ls *localStore) spec(db, version string, files []blocks.SourceFile) blocks.BuildSpec {
	f, _ := blocks.ParseFormat(*ls.df.format)
	return blocks.BuildSpec{DB: db, Version: version, Files: files, Partitioner: ls.part,
		PartitionerID: ls.part.Identity(), Presharded: *ls.df.presharded, Format: f,
		KeyField: *ls.df.keyField, ValueField: *ls.df.valueField}
}

// dirFiles lists DIR's data files as a build reads them; total is their
// size.
func dirFiles(dir string) (files []blocks.SourceFile, total int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	for _, e := range entries {
		if !source.IsDataFile(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, 0, err
		}
		path := filepath.Join(dir, e.Name())
		total += fi.Size()
		files = append(files, blocks.SourceFile{Name: e.Name(), Size: fi.Size(), ModTime: fi.ModTime(),
			Open: func(context.Context) (io.ReadCloser, error) { return os.Open(path) }})
	}
	return files, total, nil
}

// buildDir builds the dataset in dir, every partition (again, if the
// cache holds a version of that name).
func (ls *localStore) buildDir(ctx context.Context, db, version, dir string) (*blocks.Version, int64, error) {
	files, total, err := dirFiles(dir)
	if err != nil {
		return nil, 0, err
	}
	if ls.keep {
		if err := ls.Remove(db, version); err != nil {
			return nil, 0, err
		}
	}
	v, err := ls.Build(ctx, ls.spec(db, version, files))
	return v, total, err
}

// digestDir writes dir's _DIGEST: the digest of its records as the db's
// nodes build them.
func digestDir(ctx context.Context, ls *localStore, db, version, dir string) (*blocks.VersionDigest, error) {
	v, _, err := ls.buildDir(ctx, db, version, dir)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	return blocks.DigestOf(v.Manifest())
}

// bucketVersion reads versions of a db from the Object Store bucket.
type bucketVersion struct {
	obs jetstream.ObjectStore
	db  string
}

func (bv bucketVersion) open(version, file string) func(context.Context) (io.ReadCloser, error) {
	return func(ctx context.Context) (io.ReadCloser, error) {
		r, err := bv.obs.Get(ctx, objstore.ObjectName(bv.db, version, file))
		if err != nil {
			return nil, fmt.Errorf("%s/%s/%s: %w", bv.db, version, file, err)
		}
		return r, nil
	}
}

// read returns a small file of a version; ok false if it has none.
func (bv bucketVersion) read(ctx context.Context, version, file string) ([]byte, bool, error) {
	b, err := bv.obs.GetBytes(ctx, objstore.ObjectName(bv.db, version, file))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// deltasOver lists the versions of the db in the bucket whose _BASE
// names version.
func (bv bucketVersion) deltasOver(ctx context.Context, version string) ([]string, error) {
	infos, err := bv.obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, err
	}
	var out []string
	for _, info := range infos {
		rest, ok := strings.CutPrefix(info.Name, bv.db+"/")
		v, file, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || file != blocks.BaseFileName || v == version || info.Size > 1024 {
			continue
		}
		b, ok, err := bv.read(ctx, v, blocks.BaseFileName)
		if err != nil {
			return nil, err
		}
		if ok && strings.TrimSpace(string(b)) == version {
			out = append(out, v)
		}
	}
	return out, nil
}

// files lists a version's data files in the bucket, and whether it is
// complete (_SUCCESS).
func (bv bucketVersion) files(ctx context.Context, version string) ([]blocks.SourceFile, bool, error) {
	infos, err := bv.obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, false, err
	}
	prefix := bv.db + "/" + version + "/"
	var files []blocks.SourceFile
	complete := false
	for _, info := range infos {
		name, ok := strings.CutPrefix(info.Name, prefix)
		if !ok || strings.Contains(name, "/") {
			continue
		}
		if name == "_SUCCESS" {
			complete = true
		}
		if source.IsDataFile(name) {
			files = append(files, blocks.SourceFile{Name: name, Size: int64(info.Size), ModTime: info.ModTime, Open: bv.open(version, name)})
		}
	}
	slices.SortFunc(files, func(a, b blocks.SourceFile) int { return strings.Compare(a.Name, b.Name) })
	return files, complete, nil
}

// buildBucket builds version from the bucket, following its chain of
// bases (depth bounds it).
func (ls *localStore) buildBucket(ctx context.Context, bv bucketVersion, version string, depth int) (*blocks.Version, error) {
	if depth > 64 {
		return nil, fmt.Errorf("%s/%s: a chain of more than 64 deltas", bv.db, version)
	}
	files, complete, err := bv.files(ctx, version)
	if err != nil {
		return nil, err
	}
	if !complete {
		return nil, fmt.Errorf("%s/%s is not in the bucket (no _SUCCESS)", bv.db, version)
	}
	spec := ls.spec(bv.db, version, files)
	base, ok, err := bv.read(ctx, version, blocks.BaseFileName)
	if err != nil {
		return nil, err
	}
	if ok {
		bname := strings.TrimSpace(string(base))
		if !source.ValidName(bname) || bname >= version {
			return nil, fmt.Errorf("%s/%s/%s names %q: want an older version", bv.db, version, blocks.BaseFileName, bname)
		}
		b, err := ls.buildBucket(ctx, bv, bname, depth+1)
		if err != nil {
			return nil, err
		}
		defer func() {
			b.Close()
			ls.Remove(bv.db, bname) //nolint:errcheck // the temporary store goes
		}()
		spec.Base = b
		if _, ok, err := bv.read(ctx, version, blocks.DeletesFileName); err != nil {
			return nil, err
		} else if ok {
			spec.Deletes = []blocks.SourceFile{{Name: blocks.DeletesFileName, Size: -1, Open: bv.open(version, blocks.DeletesFileName)}}
		}
	}
	return ls.Build(ctx, spec)
}

// deltaReport is what a delta holds.
type deltaReport struct {
	Upserts, Deletes int64
	Bytes            int64 // of the delta's files
	FullBytes        int64 // of the full dataset's data files
}

// writeDelta writes into out the delta that makes version over base:
// part-00000 (a SequenceFile of the records added or changed), _DELETES,
// _BASE and _DIGEST.
func writeDelta(ctx context.Context, out string, version, base *blocks.Version) (deltaReport, error) {
	var rep deltaReport
	vm, bm := version.Manifest(), base.Manifest()
	if vm.NumPartitions != bm.NumPartitions {
		return rep, fmt.Errorf("the dataset has %d partitions (files), the base %s %d: a delta keeps its base's partitions", vm.NumPartitions, bm.Version, bm.NumPartitions)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return rep, err
	}
	uf, err := os.Create(filepath.Join(out, "part-00000"))
	if err != nil {
		return rep, err
	}
	defer uf.Close()
	ubw := bufio.NewWriterSize(uf, 1<<20)
	sw, err := seqfile.NewWriter(ubw, seqfile.WriterOptions{})
	if err != nil {
		return rep, err
	}
	df, err := os.Create(filepath.Join(out, blocks.DeletesFileName))
	if err != nil {
		return rep, err
	}
	defer df.Close()
	dw := blocks.NewDeletesWriter(df)
	for p := range vm.NumPartitions {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		err := version.View(func(vr *blocks.Reader) error {
			return base.View(func(br *blocks.Reader) error {
				vi, err := vr.Iter(p, blocks.Range{})
				if err != nil {
					return err
				}
				bi, err := br.Iter(p, blocks.Range{})
				if err != nil {
					return err
				}
				vok, bok := vi.Next(), bi.Next()
				for vok || bok {
					c := 0
					switch {
					case !bok:
						c = -1
					case !vok:
						c = 1
					default:
						c = bytes.Compare(vi.Key(), bi.Key())
					}
					if c > 0 { // gone from the dataset
						if err := dw.Add(bi.Key()); err != nil {
							return err
						}
						rep.Deletes++
						bok = bi.Next()
						continue
					}
					v, err := vi.Value()
					if err != nil {
						return err
					}
					same := false
					if c == 0 {
						bv, err := bi.Value()
						if err != nil {
							return err
						}
						same = bytes.Equal(v, bv)
						bok = bi.Next()
					}
					if !same {
						if err := sw.Append(vi.Key(), v); err != nil {
							return err
						}
						rep.Upserts++
					}
					vok = vi.Next()
				}
				if err := vi.Err(); err != nil {
					return err
				}
				return bi.Err()
			})
		})
		if err != nil {
			return rep, fmt.Errorf("partition %d: %w", p, err)
		}
	}
	if err := sw.Close(); err != nil {
		return rep, err
	}
	if err := ubw.Flush(); err != nil {
		return rep, err
	}
	if err := dw.Close(); err != nil {
		return rep, err
	}
	vd, err := blocks.DigestOf(vm)
	if err != nil {
		return rep, err
	}
	return rep, finishDelta(out, bm.Version, vd, &rep)
}

// prepareDelta writes dir's _DIGEST (base ""), or the delta of dir over
// base into a temporary directory, and returns the directory to publish.
// keep, called once the version is announced, keeps in the cache the
// index of the version a delta's fast path read (the next --base's: a
// publish that fails leaves the base's); cleanup removes what is
// temporary, and must be called last.
func prepareDelta(ctx context.Context, stderr io.Writer, obs jetstream.ObjectStore, dir, db, version, base, cache string, df datasetFlags) (_ string, cleanup func(), keep func() error, rerr error) {
	start := time.Now()
	cleanup, keep = func() {}, func() error { return nil }
	if base != "" && (!source.ValidName(base) || base >= version) {
		return "", cleanup, keep, usagef("--base %q: want the name of an older version", base)
	}
	ls, err := openLocalStore(ctx, df, cache)
	if err != nil {
		return "", cleanup, keep, err
	}
	defer ls.close()
	if base == "" {
		defer func() {
			if rerr == nil {
				fmt.Fprintf(stderr, "digest of %s/%s computed in %s\n", db, version, time.Since(start).Round(time.Millisecond))
			}
		}()
		if ls.keep {
			vd, x, _, _, err := ls.scanDir(ctx, db, version, dir)
			if err == nil {
				if err := ls.keepIndex(db, x); err != nil {
					return "", cleanup, keep, err
				}
				return dir, cleanup, keep, os.WriteFile(filepath.Join(dir, blocks.DigestFileName), vd.Marshal(), 0o644)
			}
			if !errors.Is(err, errSlowPath) {
				return "", cleanup, keep, err
			}
		}
		v, _, err := ls.buildDir(ctx, db, version, dir)
		if err != nil {
			return "", cleanup, keep, err
		}
		defer v.Close()
		vd, err := blocks.DigestOf(v.Manifest())
		if err != nil {
			return "", cleanup, keep, err
		}
		ls.keepSlow(db, version, v)
		return dir, cleanup, keep, os.WriteFile(filepath.Join(dir, blocks.DigestFileName), vd.Marshal(), 0o644)
	}
	// The base is refused at once if it is not in the bucket; then both
	// are built at once (the base's download beside the dataset's build).
	bucket := bucketVersion{obs: obs, db: db}
	if _, complete, err := bucket.files(ctx, base); err != nil || !complete {
		if err == nil {
			err = fmt.Errorf("%s/%s is not in the bucket (no _SUCCESS)", db, base)
		}
		return "", cleanup, keep, fmt.Errorf("base %s refused: %w", base, err)
	}
	out, err := os.MkdirTemp("", "spangle-delta-out-")
	if err != nil {
		return "", cleanup, keep, err
	}
	cleanup = func() { os.RemoveAll(out) }
	if rep, full, k, err := ls.fastDelta(ctx, out, db, version, base, dir); !errors.Is(err, errSlowPath) {
		if err == nil {
			fmt.Fprintf(stderr, "base %s/%s read from the cache %s (its index: the dataset read once, not built)\n", db, base, cache)
			printDelta(stderr, db, version, base, rep, full, time.Since(start))
			idx := deltaIndexPath(ls.dir, db)
			cleanup = func() {
				os.RemoveAll(out)
				os.Remove(idx + ".tmp") // not kept: the publish failed
			}
			keep = k
		}
		return out, cleanup, keep, err
	}
	var (
		bv, v *blocks.Version
		full  int64
	)
	g, gctx := errgroup.WithContext(ctx)
	if bv = ls.cached(db, base); bv != nil {
		fmt.Fprintf(stderr, "base %s/%s read from the cache %s\n", db, base, cache)
	} else {
		g.Go(func() (err error) {
			if bv, err = ls.buildBucket(gctx, bucket, base, 0); err != nil {
				err = fmt.Errorf("base %s refused: %w", base, err)
			}
			return err
		})
	}
	g.Go(func() (err error) {
		v, full, err = ls.buildDir(gctx, db, version, dir)
		return err
	})
	err = g.Wait()
	for _, x := range []*blocks.Version{bv, v} {
		if x != nil {
			defer x.Close()
		}
	}
	if err != nil {
		return "", cleanup, keep, err
	}
	rep, err := writeDelta(ctx, out, v, bv)
	if err != nil {
		return "", cleanup, keep, err
	}
	ls.keepSlow(db, version, v) // the next --base
	printDelta(stderr, db, version, base, rep, full, time.Since(start))
	return out, cleanup, keep, nil
}

// printDelta says what the delta holds and how long it took to compute.
func printDelta(w io.Writer, db, version, base string, rep deltaReport, full int64, took time.Duration) {
	fmt.Fprintf(w, "delta of %s/%s over %s: %d records added or changed, %d deleted: %d bytes, against %d bytes full (%.2f %%), computed in %s\n",
		db, version, base, rep.Upserts, rep.Deletes, rep.Bytes, full, 100*float64(rep.Bytes)/float64(max(full, 1)), took.Round(time.Millisecond))
}

// keepSlow keeps in the cache version v of db, built, and its index
// (when it has one: no key hash shared), as the next --base.
func (ls *localStore) keepSlow(db, version string, v *blocks.Version) {
	ls.keepOnly(db, version)
	if !ls.keep {
		return
	}
	os.Remove(deltaIndexPath(ls.dir, db)) //nolint:errcheck // replaced below, or the bbolt version serves
	if x, ok, err := indexOf(v); err == nil && ok {
		x.write(deltaIndexPath(ls.dir, db)) //nolint:errcheck // the cache only: the next publish builds
	}
}

const digestUsage = `usage: spangle digest [flags] DIR`

// digestCmd writes DIR/_DIGEST: the digest of the dataset in DIR, per
// partition under the db's partitioner, as nodes check it before a
// version goes live. A batch job that writes versions itself runs it
// before writing _SUCCESS.
func digestCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("digest", digestUsage, stderr)
	df := addDatasetFlags(fs)
	if err := parseFlags(fs, reorder(fs, args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("digest takes DIR (spangle digest -h)")
	}
	dir := fs.Arg(0)
	ctx := context.Background()
	ls, err := openLocalStore(ctx, df, "")
	if err != nil {
		return err
	}
	defer ls.close()
	vd, err := digestDir(ctx, ls, "digest", "dataset", dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, blocks.DigestFileName), vd.Marshal(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d partitions, %s\n", filepath.Join(dir, blocks.DigestFileName), vd.NumPartitions, vd.Total)
	return nil
}

const deltaUsage = `usage: spangle delta [flags] NEW OLD --base-name B --out OUT`

// deltaCmd writes into OUT the delta that makes the dataset in NEW from
// the one in OLD, published as version B: part-00000, _DELETES, _BASE
// (B) and _DIGEST. A batch job that keeps its previous output writes a
// delta this way, then publishes OUT (or copies it to S3) as a version
// of its own.
func deltaCmd(args []string, stderr io.Writer) error {
	fs := newFlagSet("delta", deltaUsage, stderr)
	baseName := fs.String("base-name", "", "the version name OLD is published under (required): the delta's _BASE")
	out := fs.String("out", "", "directory to write the delta into (required; created)")
	df := addDatasetFlags(fs)
	if err := parseFlags(fs, reorder(fs, args)); err != nil {
		return err
	}
	if fs.NArg() != 2 || *out == "" || !source.ValidName(*baseName) {
		return usagef("delta takes NEW and OLD, --base-name and --out (spangle delta -h)")
	}
	ctx := context.Background()
	ls, err := openLocalStore(ctx, df, "")
	if err != nil {
		return err
	}
	defer ls.close()
	old, _, err := ls.buildDir(ctx, "delta", *baseName, fs.Arg(1))
	if err != nil {
		return err
	}
	defer old.Close()
	next, full, err := ls.buildDir(ctx, "delta", "next", fs.Arg(0))
	if err != nil {
		return err
	}
	defer next.Close()
	rep, err := writeDelta(ctx, *out, next, old)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "delta over %s written to %s: %d records added or changed, %d deleted: %d bytes, against %d bytes full (%.2f %%)\n",
		*baseName, *out, rep.Upserts, rep.Deletes, rep.Bytes, full, 100*float64(rep.Bytes)/float64(max(full, 1)))
	return nil
}
