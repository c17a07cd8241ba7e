package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spangledb/spangle/plugins"
)

const pluginUsage = `usage: spangle plugin check [flags] MODULE.wasm

Loads a Wasm plugin (ABI spangle/v1) and checks it: its exports, and for a
partitioner its determinism, range, speed and balance over keys (read from
--keys, one per line, or generated); for a decoder (--decode) its output,
determinism and speed. Prints a report; exits non-zero on any failure.

flags:
`

// pluginCmd implements "spangle plugin check".
func pluginCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stderr, pluginUsage)
		return flag.ErrHelp
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(stderr, pluginUsage)
		return usagef("plugin: want the subcommand check")
	}
	fs := newFlagSet("plugin check", pluginUsage, stderr)
	partitions := fs.Int("partitions", 20, "partition count to check the partitioner with")
	keysFile := fs.String("keys", "", "file of keys, one per line (default: generated keys)")
	count := fs.Int("count", 10000, "number of generated keys")
	decode := fs.String("decode", "", "file holding one value to decode (checks the decoder)")
	maxSkew := fs.Float64("max-skew", 2, "fail when the fullest partition holds more than this times the mean (0: don't check)")
	timeout := fs.Duration("timeout", plugins.DefaultCallTimeout, "deadline of one call into the plugin")
	pages := fs.Uint("memory-pages", plugins.DefaultMemoryLimitPages, "memory limit of an instance, in 64 KiB pages")
	cacheDir := fs.String("cache-dir", plugins.DefaultConfig().CacheDir, "compilation cache directory (empty: none)")
	// Flags may come before or after the module.
	var positional []string
	for rest := args[1:]; ; {
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(positional) != 1 {
		fs.Usage()
		return usagef("plugin check takes one module, got %d arguments", len(positional))
	}
	if *partitions <= 0 {
		return usagef("plugin check: --partitions %d: want at least 1", *partitions)
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	cfg := plugins.DefaultConfig()
	cfg.CallTimeout = *timeout
	cfg.MemoryLimitPages = uint32(min(*pages, math.MaxUint32))
	cfg.CacheDir = *cacheDir
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	c := &checker{
		w:          bufio.NewWriter(stdout),
		path:       positional[0],
		cfg:        cfg,
		partitions: *partitions,
		maxSkew:    *maxSkew,
	}
	defer c.w.Flush()
	var err error
	if c.keys, c.keysFrom, err = loadKeys(*keysFile, *count); err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	if *decode != "" {
		if c.value, err = os.ReadFile(*decode); err != nil {
			return fmt.Errorf("plugin check: %w", err)
		}
		c.valueFrom = *decode
	}
	wantPartitioner := explicit["partitions"] || explicit["keys"] || explicit["count"] || explicit["max-skew"]
	c.run(wantPartitioner, *decode != "")
	if c.problems > 0 {
		fmt.Fprintf(c.w, "\nresult: FAIL (%d problem(s))\n", c.problems)
		return fmt.Errorf("plugin check: %s: %d problem(s)", c.path, c.problems)
	}
	fmt.Fprintln(c.w, "\nresult: ok")
	return nil
}

// checker runs the checks and writes the report.
type checker struct {
	w          *bufio.Writer
	path       string
	cfg        plugins.Config
	partitions int
	maxSkew    float64
	keys       [][]byte
	keysFrom   string
	value      []byte
	valueFrom  string
	problems   int
}

func (c *checker) fail(format string, args ...any) {
	c.problems++
	fmt.Fprintf(c.w, "  FAIL  "+format+"\n", args...)
}

func (c *checker) line(label, format string, args ...any) {
	fmt.Fprintf(c.w, "  %-12s %s\n", label, fmt.Sprintf(format, args...))
}

func (c *checker) run(wantPartitioner, wantDecoder bool) {
	ctx := context.Background()
	st, err := os.Stat(c.path)
	if err != nil {
		c.fail("%v", err)
		return
	}
	fmt.Fprintf(c.w, "module       %s (%d bytes)\n", c.path, st.Size())

	start := time.Now()
	p, perr := plugins.OpenPartitioner(ctx, c.path, c.cfg)
	ploaded := time.Since(start)
	start = time.Now()
	d, derr := plugins.OpenDecoder(ctx, c.path, c.cfg)
	dloaded := time.Since(start)
	switch {
	case p != nil:
		fmt.Fprintf(c.w, "identity     %s\nload         %v\n", p.Identity(), ploaded.Round(time.Microsecond))
	case d != nil:
		fmt.Fprintf(c.w, "identity     %s\nload         %v\n", d.Identity(), dloaded.Round(time.Microsecond))
	}

	fmt.Fprintln(c.w, "\npartitioner")
	switch {
	case p != nil:
		c.checkPartitioner(p)
		if err := p.Close(ctx); err != nil {
			c.fail("close: %v", err)
		}
	case wantPartitioner || d == nil || !errors.Is(perr, plugins.ErrMissingExport):
		c.fail("%v", perr)
	default:
		c.line("exports", "none (%v)", perr)
	}

	fmt.Fprintln(c.w, "\ndecoder")
	switch {
	case d != nil:
		c.checkDecoder(d)
		if err := d.Close(ctx); err != nil {
			c.fail("close: %v", err)
		}
	case wantDecoder || p == nil || !errors.Is(derr, plugins.ErrMissingExport):
		c.fail("%v", derr)
	default:
		c.line("exports", "none (%v)", derr)
	}
}

func (c *checker) checkPartitioner(p *plugins.WasmPartitioner) {
	n := c.partitions
	exports := "spangle_partition"
	if p.Batched() {
		exports += ", spangle_partition_batch"
	}
	c.line("exports", "%s", exports)
	c.line("keys", "%d %s", len(c.keys), c.keysFrom)
	c.line("partitions", "%d", n)
	if len(c.keys) == 0 {
		c.fail("no keys to check")
		return
	}

	// Each key twice, a call per key, then batched: the same partition
	// every time, in [0, n) (the host checks the range).
	first := make([]int, len(c.keys))
	failed := 0
	start := time.Now()
	for i, k := range c.keys {
		var err error
		if first[i], _, err = p.Partition(k, n); err != nil {
			if failed++; failed == 1 {
				c.fail("key %s: %v", quoteKey(k), err)
			}
			first[i] = -1
		}
	}
	perCall := time.Since(start) / time.Duration(len(c.keys))
	if failed > 0 {
		c.fail("%d of %d keys failed", failed, len(c.keys))
		return
	}
	c.line("range", "ok: every key in [0, %d)", n)
	differ := 0
	for i, k := range c.keys {
		if again, _, err := p.Partition(k, n); err != nil || again != first[i] {
			if differ++; differ == 1 {
				c.fail("key %s: partition %d, then %d (%v)", quoteKey(k), first[i], again, err)
			}
		}
	}
	batched := make([]int, len(c.keys))
	start = time.Now()
	err := p.PartitionBatch(c.keys, n, batched)
	perKey := time.Since(start) / time.Duration(len(c.keys))
	if err != nil {
		c.fail("batch: %v", err)
	} else {
		for i, k := range c.keys {
			if batched[i] != first[i] {
				if differ++; differ == 1 {
					c.fail("key %s: partition %d per call, %d batched", quoteKey(k), first[i], batched[i])
				}
			}
		}
	}
	if differ > 0 {
		c.fail("%d placements differ: the partitioner is not deterministic", differ)
	} else {
		c.line("determinism", "ok: every key placed alike twice per call and batched")
	}
	how := "batched"
	if !p.Batched() {
		how = "batched (no batch export: a call per key)"
	}
	c.line("speed", "%v/call, %v/key %s", perCall, perKey, how)
	c.balance(first, n)
}

// balance reports how the keys spread over the partitions, with a
// histogram, and fails past maxSkew.
func (c *checker) balance(parts []int, n int) {
	counts := make([]int, n)
	for _, p := range parts {
		counts[p]++
	}
	mean := float64(len(parts)) / float64(n)
	lo, hi := slices.Min(counts), slices.Max(counts)
	empty := 0
	for _, k := range counts {
		if k == 0 {
			empty++
		}
	}
	skew := float64(hi) / mean
	limit := "not checked"
	if c.maxSkew > 0 {
		limit = fmt.Sprintf("limit %.2f", c.maxSkew)
	}
	c.line("balance", "min %d, max %d, mean %.1f, max/mean %.2f (%s), %d empty", lo, hi, mean, skew, limit, empty)
	// One row per partition, or per group of partitions past 32.
	rows := min(n, 32)
	per := (n + rows - 1) / rows
	peak := 0
	sums := make([]int, 0, rows)
	for i := 0; i < n; i += per {
		s := 0
		for _, k := range counts[i:min(i+per, n)] {
			s += k
		}
		sums = append(sums, s)
		peak = max(peak, s)
	}
	for r, s := range sums {
		label := strconv.Itoa(r * per)
		if per > 1 {
			label += "-" + strconv.Itoa(min(r*per+per, n)-1)
		}
		bar := 0
		if peak > 0 {
			bar = (s*40 + peak - 1) / peak
		}
		fmt.Fprintf(c.w, "  %12s %-40s %d\n", label, strings.Repeat("#", bar), s)
	}
	if c.maxSkew > 0 && skew > c.maxSkew {
		c.fail("unbalanced: the fullest partition holds %.2f× the mean (--max-skew %.2f)", skew, c.maxSkew)
	}
}

func (c *checker) checkDecoder(d *plugins.WasmDecoder) {
	ctx := context.Background()
	exports := "spangle_decode"
	ct := d.ContentType()
	if ct != "" {
		exports += ", spangle_content_type"
	} else {
		ct = "none (the db's content type applies)"
	}
	c.line("exports", "%s", exports)
	c.line("content type", "%s", ct)
	if c.value == nil {
		c.line("value", "none (--decode FILE decodes one)")
		return
	}
	c.line("value", "%s (%d bytes)", c.valueFrom, len(c.value))
	out, err := d.Decode(ctx, c.value)
	if err != nil {
		c.fail("decode: %v", err)
		return
	}
	c.line("output", "%d bytes: %s", len(out), preview(out))
	again, err := d.Decode(ctx, c.value)
	if err != nil || !bytes.Equal(again, out) {
		c.fail("decoding twice gave another result (%v): the decoder is not deterministic", err)
	} else {
		c.line("determinism", "ok: the same output twice")
	}
	// Time calls for about 100 ms.
	calls, start := 0, time.Now()
	for time.Since(start) < 100*time.Millisecond {
		if _, err := d.Decode(ctx, c.value); err != nil {
			c.fail("decode: %v", err)
			return
		}
		calls++
	}
	c.line("speed", "%v/call", time.Since(start)/time.Duration(calls))
}

// loadKeys reads the keys of file, one per line, or generates count keys.
func loadKeys(file string, count int) ([][]byte, string, error) {
	if file == "" {
		if count <= 0 {
			return nil, "", fmt.Errorf("--count %d: want at least 1", count)
		}
		r := rand.New(rand.NewPCG(1, 1))
		keys := make([][]byte, count)
		for i := range keys {
			k := make([]byte, 1+r.IntN(32))
			for j := range k {
				k[j] = byte(r.Uint32())
			}
			keys[i] = k
		}
		return keys, "generated (random bytes, 1-32 long)", nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	var keys [][]byte
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 16<<20)
	for s.Scan() {
		keys = append(keys, bytes.Clone(bytes.TrimSuffix(s.Bytes(), []byte("\r"))))
	}
	if err := s.Err(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", file, err)
	}
	return keys, "from " + file, nil
}

func quoteKey(k []byte) string {
	if len(k) > 64 {
		return strconv.Quote(string(k[:64])) + "…"
	}
	return strconv.Quote(string(k))
}

// preview shows the start of a decoded value: as text when it is, quoted
// otherwise.
func preview(b []byte) string {
	const limit = 200
	cut := b
	if len(cut) > limit {
		cut = cut[:limit]
	}
	s := string(cut)
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' }) {
		s = strconv.Quote(s)
	}
	if len(b) > limit {
		s += "…"
	}
	return s
}
