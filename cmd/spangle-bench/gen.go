package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// genFormat names the way gen.go lays out keys and values. Bump it when
// that changes, so cached datasets are regenerated.
const genFormat = 1

// paramsFile, at the top of a generated source root, records the
// parameters of a complete dataset. It is written last, so a root without
// it is incomplete. The leading dot keeps it out of spangle's way.
const paramsFile = ".spangle-bench.json"

// genParams describe a generated dataset. Record i has the key
// key(i, KeySize) and the value appendValue(nil, Seed, i, ValueSize); records are
// shuffled, then dealt round-robin to Files files, so no file is sorted
// or holds a key range.
type genParams struct {
	Format    int    `json:"format"`
	DB        string `json:"db"`         // default "bench"
	Version   string `json:"version"`    // default "1"
	Records   int64  `json:"records"`    // default 2,000,000
	Files     int    `json:"files"`      // default 16
	KeySize   int    `json:"key_size"`   // hex digits; default 16
	ValueSize int    `json:"value_size"` // bytes; default 100
	Seed      uint64 `json:"seed"`       // fixed; not a flag
}

func defaultGenParams() genParams {
	return genParams{Format: genFormat, DB: "bench", Version: "1", Records: 2_000_000,
		Files: 16, KeySize: 16, ValueSize: 100, Seed: 1}
}

// register adds the dataset flags to flags, with p's values as defaults.
func (p *genParams) register(flags *flag.FlagSet) {
	flags.StringVar(&p.DB, "db", p.DB, "db `name`")
	flags.StringVar(&p.Version, "version", p.Version, "version `name`")
	flags.Int64Var(&p.Records, "records", p.Records, "number of records")
	flags.IntVar(&p.Files, "files", p.Files, "number of SequenceFiles")
	flags.IntVar(&p.KeySize, "key-size", p.KeySize, "key size in bytes (lower-case hex digits of the record number)")
	flags.IntVar(&p.ValueSize, "value-size", p.ValueSize, "value size in bytes")
}

// Validate reports parameters that cannot make a dataset.
func (p genParams) Validate() error {
	switch {
	case !plainName(p.DB) || !plainName(p.Version):
		return errors.New("gen: db and version must be plain names, not starting with . or _")
	case p.Records < 1 || p.Files < 1 || p.ValueSize < 0:
		return errors.New("gen: records and files must be positive, value size not negative")
	case p.KeySize < len(strconv.FormatInt(p.Records-1, 16)):
		return fmt.Errorf("gen: key size %d is too small for %d records", p.KeySize, p.Records)
	}
	return nil
}

// plainName reports whether s names a directory that is neither hidden
// nor a path.
func plainName(s string) bool {
	return s != "" && s[0] != '.' && s[0] != '_' && filepath.Base(s) == s
}

// keyFormat is the fmt (and Lua string.format) verb for keys of size
// hex digits; wrk.go's script uses it too.
func keyFormat(size int) string { return "%0" + strconv.Itoa(size) + "x" }

// key is record i's key.
func key(i int64, size int) string { return fmt.Sprintf(keyFormat(size), i) }

// words make values read like text: compressible, but not trivially.
var words = []string{
	"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
	"india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
	"quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xray",
	"yankee", "zulu", "user", "account", "session", "order", "item", "price",
	"region", "country", "city", "street", "device", "mobile", "desktop", "tablet",
	"click", "view", "search", "cart", "checkout", "refund", "status", "active",
}

// appendValue appends record i's value, exactly size bytes of printable
// text determined by seed and i alone, to b.
func appendValue(b []byte, seed uint64, i int64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	end := len(b) + size
	for len(b) < end {
		if r.IntN(4) == 0 {
			b = strconv.AppendUint(b, uint64(r.IntN(1_000_000)), 10)
		} else {
			b = append(b, words[r.IntN(len(words))]...)
		}
		b = append(b, ' ')
	}
	return b[:end]
}

// readParams returns the parameters recorded in root, or an error if root
// holds no complete generated dataset.
func readParams(root string) (genParams, error) {
	b, err := os.ReadFile(filepath.Join(root, paramsFile))
	if err != nil {
		return genParams{}, err
	}
	var p genParams
	if err := json.Unmarshal(b, &p); err != nil {
		return genParams{}, fmt.Errorf("gen: %s: %w", paramsFile, err)
	}
	return p, nil
}

// generate makes root a source root holding exactly the dataset p:
// root/<db>/<version>/part-NNNNN and _SUCCESS. If root already holds it,
// generate does nothing and reports cached. Otherwise it writes the
// dataset next to root and renames it into place, replacing root only if
// root was written by generate (or does not exist).
func generate(root string, p genParams) (cached bool, err error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	old, err := readParams(root)
	if err == nil && old == p {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if entries, _ := os.ReadDir(root); len(entries) > 0 {
			return false, fmt.Errorf("gen: %s is not empty and was not written by spangle-bench; not replacing it", root)
		}
	}
	tmp := root + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return false, err
	}
	if err := writeDataset(tmp, p); err != nil {
		_ = os.RemoveAll(tmp)
		return false, err
	}
	if err := os.RemoveAll(root); err != nil {
		return false, err
	}
	return false, os.Rename(tmp, root)
}

// writeDataset writes p under root, which must not exist, params file last.
func writeDataset(root string, p genParams) error {
	dir := filepath.Join(root, p.DB, p.Version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	order := rand.New(rand.NewPCG(p.Seed, 0)).Perm(int(p.Records))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for f := range p.Files {
		g.Go(func() error {
			return writePart(dir, f, p, order)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, paramsFile), append(b, '\n'), 0o644)
}

// writePart writes file number n of the dataset, part-<n> in dir: the
// records order[n], order[n+p.Files], order[n+2*p.Files], … as an
// uncompressed SequenceFile of BytesWritables. Its sync marker is derived
// from the seed and n, so that the same parameters make the same bytes.
func writePart(dir string, n int, p genParams, order []int) (err error) {
	path := filepath.Join(dir, fmt.Sprintf("part-%05d", n))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	var sync [16]byte
	r := rand.New(rand.NewPCG(p.Seed, uint64(n)+1))
	for i := range sync {
		sync[i] = byte(r.Uint32())
	}
	w, err := seqfile.NewWriter(f, seqfile.WriterOptions{Sync: sync})
	if err != nil {
		return fmt.Errorf("gen: %s: %w", path, err)
	}
	var k, v []byte
	for j := n; j < len(order); j += p.Files {
		i := int64(order[j])
		k = fmt.Appendf(k[:0], keyFormat(p.KeySize), i)
		v = appendValue(v[:0], p.Seed, i, p.ValueSize)
		if err := w.Append(k, v); err != nil {
			return fmt.Errorf("gen: %s: %w", path, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("gen: %s: %w", path, err)
	}
	return nil
}
