package advert

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	started := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	b, err := Encode(Node{ID: "n1", ShardID: "s", State: StateServing, Started: started})
	if err != nil {
		t.Fatal(err)
	}
	n, err := DecodeNode("n1", b)
	if err != nil || n.ID != "n1" || !n.Started.Equal(started) {
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
			for _, x := range p.Partitions {
				if x < 0 || x >= p.NumPartitions {
					t.Fatalf("partition %d of %d", x, p.NumPartitions)
				}
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
		if v, err := DecodeVersion(key, b); err == nil {
			if v.DB != key || !ValidName(v.Version) || v.NumPartitions < 0 {
				t.Fatalf("version %+v under %q", v, key)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
	})
}
