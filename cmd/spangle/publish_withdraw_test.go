package main

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/advert"
)

// writeAfterRead is the versions bucket with a write slipped in right
// after the first read of an entry: the announcement another publisher
// makes between spangle publish --delete's read and its purge.
type writeAfterRead struct {
	jetstream.KeyValue
	once    sync.Once
	between func()
}

func (k *writeAfterRead) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := k.KeyValue.Get(ctx, key)
	k.once.Do(k.between)
	return e, err
}

// TestWithdrawAnnouncementRace: the withdrawal of d/v1's announcement
// keeps an announcement of v2 written between its read and its purge,
// and still withdraws one of v1 written again in between. Without the
// compare-and-set on the revision read, the purge removed v2's.
func TestWithdrawAnnouncementRace(t *testing.T) {
	js := natstest.JetStream(t, natstest.RunServer(t, nil).ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	kv, err := kvwatch.OpenVersions(ctx, js, kvwatch.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	announce := func(version string) {
		t.Helper()
		b, err := advert.Encode(advert.Version{DB: "d", Version: version})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, advert.VersionKey("d"), b); err != nil {
			t.Fatal(err)
		}
	}
	announced := func() string {
		t.Helper()
		e, err := kv.Get(ctx, advert.VersionKey("d"))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		v, err := advert.DecodeVersion("d", e.Value())
		if err != nil {
			t.Fatal(err)
		}
		return v.Version
	}

	announce("v1")
	racing := &writeAfterRead{KeyValue: kv, between: func() { announce("v2") }}
	if err := withdrawAnnouncement(ctx, racing, "d", "v1", testTimeout/4); err != nil {
		t.Fatal(err)
	}
	if got := announced(); got != "v2" {
		t.Fatalf("announced %q after withdrawing v1 while v2 was announced: want v2 kept", got)
	}

	announce("v1")
	racing = &writeAfterRead{KeyValue: kv, between: func() { announce("v1") }}
	if err := withdrawAnnouncement(ctx, racing, "d", "v1", testTimeout/4); err != nil {
		t.Fatal(err)
	}
	if got := announced(); got != "" {
		t.Fatalf("announced %q after withdrawing v1 (written again meanwhile): want none", got)
	}
}
