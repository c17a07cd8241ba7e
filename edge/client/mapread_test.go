package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
)

// TestReadBucketPages: a bucket of more keys than one batched direct get
// answers (1024) is read whole, page after page, each key once, its
// deletions marked.
func TestReadBucketPages(t *testing.T) {
	s := natstest.RunServer(t, nil)
	js := natstest.JetStream(t, s.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	const keys = 2500
	for i := range keys {
		if _, err := kv.Put(ctx, fmt.Sprintf("k%04d", i), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if err := kv.Delete(ctx, fmt.Sprintf("k%04d", i*100)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, "k0001", []byte("again")); err != nil { // a key written twice
		t.Fatal(err)
	}
	entries, err := readBucket(ctx, js.Conn(), names.APIPrefix(""), names.KVStream("b"), names.KVSubject("b", ""))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	deleted := 0
	for _, e := range entries {
		seen[e.key]++
		if e.del {
			deleted++
		}
		if e.key == "k0001" && string(e.value) != "again" {
			t.Errorf("k0001 = %q, want its last value", e.value)
		}
	}
	if len(seen) != keys || len(entries) != keys || deleted != 10 {
		t.Fatalf("%d entries of %d keys, %d deleted; want %d keys once each, 10 deleted", len(entries), len(seen), deleted, keys)
	}
}
