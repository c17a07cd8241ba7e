package blocks

import (
	"errors"
	"sync"
	"testing"
)

// Gets racing with Close return values or ErrClosed, never crash, and
// Close waits for them.
func TestConcurrentGetAndClose(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 500, repetitive: true, seed: 20})
	var keys [][]byte
	for k := range d.want {
		keys = append(keys, []byte(k))
	}
	for _, comp := range []Compression{CompressionNone, CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{})
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: comp})
			var wg sync.WaitGroup
			firstRound := make(chan struct{})
			var once sync.Once
			for g := range 8 {
				wg.Go(func() {
					var buf []byte
					for i := 0; ; i++ {
						k := keys[(g*7919+i)%len(keys)]
						p, _, _ := (sequinsPartitioner{}).Partition(k, d.n)
						var err error
						buf, err = v.GetAppend(buf[:0], p, k)
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil || string(buf) != string(d.want[string(k)]) {
							t.Errorf("Get: %q, %v", buf, err)
							return
						}
						if i == 100 {
							once.Do(func() { close(firstRound) })
						}
					}
				})
			}
			<-firstRound
			if err := v.Close(); err != nil {
				t.Error(err)
			}
			wg.Wait()
			if _, err := v.Get(0, keys[0]); !errors.Is(err, ErrClosed) {
				t.Errorf("Get after Close: %v", err)
			}
			if err := v.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

func TestGetEmptyValue(t *testing.T) {
	dir := t.TempDir()
	writeSeqFile(t, dir+"/a", []record{{[]byte("empty"), nil}, {[]byte("full"), []byte("x")}})
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		s := openTestStore(t, t.TempDir(), Options{})
		v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, dir, []string{"a"}), Compression: comp})
		got, err := v.Get(0, []byte("empty"))
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("%s: Get(empty) = %#v, %v", comp, got, err)
		}
		if got, err := v.GetAppend([]byte("pre-"), 0, []byte("full")); err != nil || string(got) != "pre-x" {
			t.Errorf("%s: GetAppend = %q, %v", comp, got, err)
		}
		if got, err := v.GetAppend([]byte("pre-"), 0, []byte("none")); !errors.Is(err, ErrNotFound) || string(got) != "pre-" {
			t.Errorf("%s: GetAppend(missing) = %q, %v", comp, got, err)
		}
	}
}
