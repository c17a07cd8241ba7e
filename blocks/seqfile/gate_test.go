package seqfile

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// countGate is a Gate of one holder that counts entries and the most
// holders seen at once.
type countGate struct {
	sem     chan struct{}
	in      atomic.Int32
	most    atomic.Int32
	entered atomic.Int32
	err     error // returned by Enter when set
}

func newCountGate() *countGate { return &countGate{sem: make(chan struct{}, 1)} }

func (g *countGate) Enter() error {
	if g.err != nil {
		return g.err
	}
	g.sem <- struct{}{}
	n := g.in.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	g.entered.Add(1)
	return nil
}

func (g *countGate) Leave() {
	g.in.Add(-1)
	<-g.sem
}

// bigFile writes a file of records, every fourth holding a value of
// 64 KiB (compressible), the others small.
func bigFile(t testing.TB, comp Compression, codec string, n int) ([]byte, [][2][]byte) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{Compression: comp, Codec: codec, BlockSize: 100 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var recs [][2][]byte
	for i := range n {
		k := fmt.Appendf(nil, "key-%d", i)
		v := fmt.Appendf(nil, "value-%d", i)
		if i%4 == 1 {
			v = bytes.Repeat(v, (64<<10)/len(v))
		}
		if err := w.Append(k, v); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, [2][]byte{k, v})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), recs
}

// TestGate: with a Gate, buffers beyond Share are decompressed, and
// records beyond it read, in it, one Reader at a time, for every codec,
// record and block compressed, and uncompressed;
// every record reads as written; a value over MaxSize is ErrTooLarge
// naming the file; a Gate that fails stops the Reader.
func TestGate(t *testing.T) {
	type mode struct {
		comp  Compression
		codec string
	}
	modes := []mode{{None, ""}}
	for _, comp := range []Compression{RecordCompressed, BlockCompressed} {
		for _, codec := range []string{DefaultCodec, GzipCodec, SnappyCodec, ZStandardCodec, BZip2Codec} {
			modes = append(modes, mode{comp, codec})
		}
	}
	for _, m := range modes {
		comp, codec := m.comp, m.codec
		{
			t.Run(fmt.Sprintf("%v/%s", comp, codec), func(t *testing.T) {
				file, want := bigFile(t, comp, codec, 40)
				g := newCountGate()
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						r, err := NewReaderOptions(bytes.NewReader(file), "part-0", ReaderOptions{BufferSize: 8 << 10, MaxSize: 1 << 20, Share: 16 << 10, Gate: g})
						if err != nil {
							t.Error(err)
							return
						}
						defer r.Release()
						i := 0
						for ; r.Next(); i++ {
							if !bytes.Equal(r.Key(), want[i][0]) || !bytes.Equal(r.Value(), want[i][1]) {
								t.Errorf("record %d differs", i)
								return
							}
						}
						if err := r.Err(); err != nil || i != len(want) {
							t.Errorf("%d records, %v", i, err)
						}
					})
				}
				wg.Wait()
				if g.entered.Load() == 0 || g.most.Load() != 1 || g.in.Load() != 0 {
					t.Errorf("gate entered %d times, by %d at most at once, %d in it at the end; want some, 1, 0",
						g.entered.Load(), g.most.Load(), g.in.Load())
				}

				r, err := NewReaderOptions(bytes.NewReader(file), "part-0", ReaderOptions{BufferSize: 8 << 10, MaxSize: 32 << 10, Share: 16 << 10, Gate: newCountGate()})
				if err != nil {
					t.Fatal(err)
				}
				for r.Next() {
				}
				var e *Error
				if err := r.Err(); !errors.Is(err, ErrTooLarge) || !errors.As(err, &e) || e.File != "part-0" {
					t.Errorf("a value over MaxSize: %v", err)
				}

				stop := errors.New("cancelled")
				r, err = NewReaderOptions(bytes.NewReader(file), "part-0", ReaderOptions{BufferSize: 8 << 10, MaxSize: 1 << 20, Share: 16 << 10, Gate: &countGate{err: stop}})
				if err != nil {
					t.Fatal(err)
				}
				for r.Next() {
				}
				if err := r.Err(); !errors.Is(err, stop) {
					t.Errorf("a failing gate: %v", err)
				}
			})
		}
	}
}
