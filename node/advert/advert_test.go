package advert

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	started := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	pins := map[string]PinState{"d": {Pin: "newest before v3", Target: "v2"}, "e": {Pin: "v9", Error: "not in the source"}}
	failed := map[string]BuildFailure{"d": {Version: "v4", Reason: "source: unexpected EOF"}}
	b, err := Encode(Node{ID: "n1", ShardID: "s", State: StateServing, Started: started, Pins: pins, BuildFailed: failed})
	if err != nil {
		t.Fatal(err)
	}
	n, err := DecodeNode("n1", b)
	if err != nil || n.ID != "n1" || !n.Started.Equal(started) || !maps.Equal(n.Pins, pins) || !maps.Equal(n.BuildFailed, failed) {
		t.Fatalf("%+v %v", n, err)
	}
	b, _ = Encode(Partitions{Partitions: []int{0, 2}, NumPartitions: 3, Partitioner: "sequins"})
	p, err := DecodePartitions(PartitionsKey("db", "v1", "n1"), b)
	if err != nil || p.DB != "db" || p.Version != "v1" || p.NodeID != "n1" {
		t.Fatalf("%+v %v", p, err)
	}
	b, _ = Encode(Version{Version: "v1", NumPartitions: 3, Partitioner: "sequins"})
	v, err := DecodeVersion("db", b)
	if err != nil || v.DB != "db" || v.Version != "v1" {
		t.Fatalf("%+v %v", v, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode func() error
		text   string
	}{
		{"node not JSON", func() error { _, err := DecodeNode("n", []byte("{")); return err }, "unexpected end"},
		{"node null", func() error { _, err := DecodeNode("n", []byte("null")); return err }, "unknown state"},
		{"node other ID", func() error { _, err := DecodeNode("n", []byte(`{"id":"m","state":"SERVING"}`)); return err }, "names node"},
		{"node bad key", func() error { _, err := DecodeNode("a.b", []byte(`{"state":"SERVING"}`)); return err }, "node key"},
		{"node state", func() error { _, err := DecodeNode("n", []byte(`{"state":"ASLEEP"}`)); return err }, "unknown state"},
		{"node pin of a bad db", func() error {
			_, err := DecodeNode("n", []byte(`{"state":"SERVING","pins":{"a b":{"pin":"1"}}}`))
			return err
		}, "bad pin"},
		{"node pin target", func() error {
			_, err := DecodeNode("n", []byte(`{"state":"SERVING","pins":{"d":{"pin":"1","target":"x.y"}}}`))
			return err
		}, "bad pin"},
		{"node pin error too long", func() error {
			_, err := DecodeNode("n", []byte(`{"state":"SERVING","pins":{"d":{"pin":"1","error":"`+strings.Repeat("x", 600)+`"}}}`))
			return err
		}, "pin of d"},
		{"node failed build of a bad version", func() error {
			_, err := DecodeNode("n", []byte(`{"state":"SERVING","build_failed":{"d":{"version":"a b"}}}`))
			return err
		}, "bad failed build"},
		{"node failed build reason too long", func() error {
			_, err := DecodeNode("n", []byte(`{"state":"SERVING","build_failed":{"d":{"version":"v","reason":"`+strings.Repeat("x", 600)+`"}}}`))
			return err
		}, "failed build of d"},
		{"partitions key", func() error { _, err := DecodePartitions("db.v1", []byte(`{}`)); return err }, "partitions key"},
		{"partitions other db", func() error {
			_, err := DecodePartitions("db.v1.n", []byte(`{"db":"x","num_partitions":1}`))
			return err
		}, "entry names"},
		{"partition range", func() error {
			_, err := DecodePartitions("db.v1.n", []byte(`{"partitions":[0,3],"num_partitions":3}`))
			return err
		}, "out of [0, 3)"},
		{"partition order", func() error {
			_, err := DecodePartitions("db.v1.n", []byte(`{"partitions":[1,0],"num_partitions":3}`))
			return err
		}, "increasing"},
		{"partition twice", func() error {
			_, err := DecodePartitions("db.v1.n", []byte(`{"partitions":[1,1],"num_partitions":3}`))
			return err
		}, "twice"},
		{"version name", func() error { _, err := DecodeVersion("db", []byte(`{"version":"a b"}`)); return err }, "bad version name"},
		{"version N", func() error { _, err := DecodeVersion("db", []byte(`{"version":"v","num_partitions":-1}`)); return err }, "num_partitions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.text)
			}
		})
	}
}

func TestParsePartitionsKey(t *testing.T) {
	for key, ok := range map[string]bool{"a.b.c": true, "a.b": false, "a.b.c.d": false, "a..c": false, "a.b c.d": false} {
		if _, _, _, got := ParsePartitionsKey(key); got != ok {
			t.Errorf("ParsePartitionsKey(%q) ok = %v", key, got)
		}
	}
}

// The decoders read what other processes wrote: whatever the bytes, they
// return a valid entry or ErrInvalid, and never panic.
func FuzzDecode(f *testing.F) {
	f.Add("n1", []byte(`{"id":"n1","shard_id":"s","state":"SERVING","started":"2026-11-01T12:00:00Z"}`))
	f.Add("db.v1.n1", []byte(`{"partitions":[0,1,2],"num_partitions":3,"partitioner":"sequins","active":true}`))
	f.Add("db", []byte(`{"version":"v1","num_partitions":3,"partitioner":"murmur3"}`))
	f.Add("db.v1.n1", []byte(`{"partitions":[9999999999999],"num_partitions":-5}`))
	f.Add("x", []byte(`null`))
	f.Add("db.v1.n1", []byte(`{"bitmap":"BQ==","num_partitions":8}`))
	f.Add("db.v1.n1", []byte(`{"partitions":[0],"num_partitions":100000000}`))
	f.Add("db", []byte(`{"version":"v1","num_partitions":1000000000000000000}`))
	f.Fuzz(func(t *testing.T, key string, b []byte) {
		if n, err := DecodeNode(key, b); err == nil {
			if n.ID != key || !ValidName(key) {
				t.Fatalf("node %+v under %q", n, key)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
		if p, err := DecodePartitions(key, b); err == nil {
			if PartitionsKey(p.DB, p.Version, p.NodeID) != key {
				t.Fatalf("partitions %+v under %q", p, key)
			}
			if p.NumPartitions > MaxPartitions || p.Bitmap != "" {
				t.Fatalf("partitions %+v", p)
			}
			for _, x := range p.Partitions {
				if x < 0 || x >= p.NumPartitions {
					t.Fatalf("partition %d of %d", x, p.NumPartitions)
				}
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
		if v, err := DecodeVersion(key, b); err == nil {
			if v.DB != key || !ValidName(v.Version) || v.NumPartitions < 0 || v.NumPartitions > MaxPartitions {
				t.Fatalf("version %+v under %q", v, key)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
	})
}

// TestForgedEntries: entries a hostile client could put in the buckets
// are refused before anything is allocated from them.
func TestForgedEntries(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen+1)
	for _, tc := range []struct {
		name, key, entry string
		decode           func(key string, b []byte) error
	}{
		{"huge partition count", "d.v1.n1", `{"partitions":[0],"num_partitions":100000000}`, decP},
		{"1e18 partitions", "d.v1.n1", `{"partitions":[],"num_partitions":1000000000000000000}`, decP},
		{"1e18 in versions", "d", `{"version":"v1","num_partitions":1000000000000000000}`, decV},
		{"partition out of range", "d.v1.n1", `{"partitions":[3],"num_partitions":3}`, decP},
		{"unsorted", "d.v1.n1", `{"partitions":[2,1],"num_partitions":3}`, decP},
		{"long name", "d." + long + ".n1", `{"partitions":[],"num_partitions":1}`, decP},
		{"long version", "d", `{"version":"` + long + `","num_partitions":1}`, decV},
		{"long address", "n1", `{"state":"SERVING","address":"` + strings.Repeat("a", 600) + `"}`, decN},
		{"bad shard", "n1", `{"state":"SERVING","shard_id":"a b"}`, decN},
		{"bitmap and list", "d.v1.n1", `{"partitions":[1],"bitmap":"Ag==","num_partitions":8}`, decP},
		{"bitmap too long", "d.v1.n1", `{"bitmap":"AAAAAAAA","num_partitions":8}`, decP},
		{"bitmap bits past n", "d.v1.n1", `{"bitmap":"gA==","num_partitions":7}`, decP},
		{"oversized entry", "d.v1.n1", `{"partitioner":"` + strings.Repeat("p", MaxEntryBytes) + `"}`, decP},
	} {
		if err := tc.decode(tc.key, []byte(tc.entry)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
}

func decP(k string, b []byte) error { _, err := DecodePartitions(k, b); return err }
func decV(k string, b []byte) error { _, err := DecodeVersion(k, b); return err }
func decN(k string, b []byte) error { _, err := DecodeNode(k, b); return err }

// TestPartitionsBitmap: a large strided set (sequential assignment) is
// written as a bitmap well under NATS's max_payload and reads back the
// same; a short list stays a list.
func TestPartitionsBitmap(t *testing.T) {
	var ps []int
	for p := 0; p < MaxPartitions; p += 3 {
		ps = append(ps, p)
	}
	in := Partitions{DB: "d", Version: "v1", NodeID: "n1", Partitions: ps, NumPartitions: MaxPartitions, Partitioner: "sequins"}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 12<<10 || !strings.Contains(string(b), `"bitmap"`) {
		t.Fatalf("%d-byte entry for %d partitions", len(b), len(ps))
	}
	out, err := DecodePartitions("d.v1.n1", b)
	if err != nil || !slices.Equal(out.Partitions, ps) || out.Bitmap != "" {
		t.Fatalf("round trip: %d partitions, bitmap %q, %v", len(out.Partitions), out.Bitmap, err)
	}
	b, _ = Encode(Partitions{Partitions: []int{5}, NumPartitions: 40000})
	if !strings.Contains(string(b), `"partitions":[5]`) {
		t.Fatalf("short list: %s", b)
	}
}
