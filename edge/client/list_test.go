package client_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/spangledb/spangle/edge/client"
)

// TestList: over NATS and HTTP, List and ListEntries follow the cursors
// to the complete sorted listing, the binary key included; over NATS the
// 1 MiB value cannot fit a page (ErrTooLarge), over HTTP it comes.
func TestList(t *testing.T) {
	e := startOneNode(t)
	ctx := context.Background()
	var all []string
	for _, r := range testRecords("v1") {
		all = append(all, string(r.Key))
	}
	sort.Strings(all)
	for _, transport := range []struct {
		name string
		c    *client.Client
	}{{"nats", e.nats}, {"http", e.http}} {
		t.Run(transport.name, func(t *testing.T) {
			var got []string
			for k, err := range transport.c.List(ctx, "d", nil) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(k))
			}
			if !slices.Equal(got, all) {
				t.Fatalf("List: %d keys, want %d", len(got), len(all))
			}
			var prefixed []string
			for e, err := range transport.c.ListEntries(ctx, "d", client.ListOptions{Prefix: []byte("key-1"), PageSize: 7, Values: true}) {
				if err != nil {
					t.Fatal(err)
				}
				if want := "v1:" + string(e.Key[len("key-"):]); string(e.Value) != want {
					t.Fatalf("%s = %q, want %q", e.Key, e.Value, want)
				}
				prefixed = append(prefixed, string(e.Key))
			}
			if len(prefixed) != 111 { // key-1, key-10..19, key-100..199
				t.Errorf("prefix key-1: %d keys, want 111", len(prefixed))
			}
			// Stopping early stops asking.
			n := 0
			for range transport.c.List(ctx, "d", []byte("key-")) {
				if n++; n == 3 {
					break
				}
			}
			var huge []byte
			var err error
			for e, lerr := range transport.c.ListEntries(ctx, "d", client.ListOptions{Start: []byte("huge"), End: []byte("huge\x00"), Values: true}) {
				if huge, err = e.Value, lerr; lerr != nil {
					break
				}
			}
			if transport.name == "nats" {
				if !errors.Is(err, client.ErrTooLarge) {
					t.Errorf("a 1 MiB value over NATS: %v, want ErrTooLarge", err)
				}
			} else if err != nil || !bytes.Equal(huge, hugeValue) {
				t.Errorf("a 1 MiB value over HTTP: %d bytes, %v", len(huge), err)
			}
			for _, lerr := range transport.c.List(ctx, "nope", nil) {
				if !errors.Is(lerr, client.ErrUnknownDB) {
					t.Errorf("unknown db: %v", lerr)
				}
			}
		})
	}
}
