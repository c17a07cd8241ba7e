package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"os"
	"sync"
	"testing"

	"github.com/spangledb/spangle/examples/plugins/internal/wasmbuild"
	"github.com/spangledb/spangle/plugins"
)

// guest is this package built for wasip1, once per test binary.
var guest wasmbuild.Guest

func TestMain(m *testing.M) {
	code := m.Run()
	guest.Cleanup()
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
		code = 1
	}
	os.Exit(code)
}

func open(tb testing.TB) *plugins.WasmDecoder { return guest.OpenDecoder(tb) }

func TestDecode(t *testing.T) {
	d := open(t)
	if ct := d.ContentType(); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{in: "Mary,F,1880,7065", want: `{"name":"Mary","sex":"F","year":1880,"count":7065}`},
		{in: "John,M,1881,9655\n", want: `{"name":"John","sex":"M","year":1881,"count":9655}`},
		{in: "John,M,1881,9655\r\n", want: `{"name":"John","sex":"M","year":1881,"count":9655}`},
		{in: `"Smith, ""Jr."" 🎉",M,+1990,007`, want: `{"name":"Smith, \"Jr.\" 🎉","sex":"M","year":1990,"count":7}`},
		{in: "<b>&</b>,F,2000,1", want: `{"name":"<b>&</b>","sex":"F","year":2000,"count":1}`},
		{in: `a\b,,1,2`, want: `{"name":"a\\b","sex":"","year":1,"count":2}`},
		{in: `"",",",1,2`, want: `{"name":"","sex":",","year":1,"count":2}`},
		{in: `"a"b,F,1,2`, err: plugins.ErrPluginError},
		{in: `a"b,F,1,2`, err: plugins.ErrPluginError},
		{in: "a\rb,F,1,2", err: plugins.ErrPluginError},
		{in: "Ann\x01\xff,F,2000,1", want: `{"name":"Ann\u0001\ufffd","sex":"F","year":2000,"count":1}`},
		{in: "", err: plugins.ErrPluginError},
		{in: "Mary,F,1880", err: plugins.ErrPluginError},
		{in: "Mary,F,1880,7065,extra", err: plugins.ErrPluginError},
		{in: "Mary,F,1880,7065\nJohn,M,1881,9655", err: plugins.ErrPluginError},
		{in: `"Mary,F,1880,7065`, err: plugins.ErrPluginError},
		{in: "Mary,F,eighteen-eighty,7065", err: plugins.ErrPluginError},
		{in: "Mary,F,-,7065", err: plugins.ErrPluginError},
		{in: "Mary,F,1880,1234567890123456789", err: plugins.ErrPluginError},
		{in: "Mary,F,-1880,0", want: `{"name":"Mary","sex":"F","year":-1880,"count":0}`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := d.Decode(ctx, []byte(tc.in))
			if !errors.Is(err, tc.err) {
				t.Fatalf("Decode(%q) = %s, %v; want %v", tc.in, got, err, tc.err)
			}
			if err != nil {
				return
			}
			if string(got) != tc.want {
				t.Fatalf("Decode(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON %s", got)
			}
		})
	}
}

func TestConcurrentDecode(t *testing.T) {
	d := open(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				in := fmt.Sprintf("name%d-%d,F,%d,%d", g, i, 1880+i, i*g)
				got, err := d.Decode(context.Background(), []byte(in))
				var rec struct {
					Name        string
					Year, Count int
				}
				if err == nil {
					err = json.Unmarshal(got, &rec)
				}
				if err != nil || rec.Name != fmt.Sprintf("name%d-%d", g, i) || rec.Year != 1880+i || rec.Count != i*g {
					errs <- fmt.Errorf("%s: %s, %v", in, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

var sink int

// BenchmarkDecode measures a Go decoder per value.
func BenchmarkDecode(b *testing.B) {
	d := open(b)
	val := []byte(`"Smith, Jr.",M,1990,7065`)
	for b.Loop() {
		out, err := d.Decode(context.Background(), val)
		if err != nil {
			b.Fatal(err)
		}
		sink += len(out)
	}
}
