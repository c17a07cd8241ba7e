package objstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/node/source/objstore"
)

// announced records what a Feed announces.
type announced struct {
	mu   sync.Mutex
	seen []string
}

func (a *announced) Announce(db, version string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, db+"/"+version)
}

func (a *announced) get() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// TestFeed: a version is announced once its _SUCCESS object is there, the
// existing ones at start and new ones as they come; data files, other
// names and a version without _SUCCESS are not.
func TestFeed(t *testing.T) {
	js, obs := startBucket(t)
	put := func(name string) {
		t.Helper()
		if _, err := obs.PutBytes(ctx(t), name, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	put("d/v1/part-00000")
	put("d/v1/_SUCCESS")
	put("d/v2/part-00000") // incomplete
	src, err := objstore.New("data", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if err != nil {
		t.Fatal(err)
	}
	var a announced
	f := objstore.NewFeed(src, &a, nodetest.Logger(), 100*time.Millisecond)
	f.Start()
	defer f.Stop()
	want := func(w ...string) {
		t.Helper()
		nodetest.WaitFor(t, 10*time.Second, fmt.Sprint(w), func() error {
			if got := a.get(); !slices.Equal(got, w) {
				return fmt.Errorf("announced %v", got)
			}
			return nil
		})
	}
	want("d/v1")
	put("d/v2/_SUCCESS")
	put("e/v1/_SUCCESS/extra")
	put("bad name/v1/_SUCCESS")
	put("e/v9/part-00000")
	put("e/v9/_SUCCESS")
	want("d/v1", "d/v2", "e/v9")
	f.Stop()
	f.Stop() // idempotent
}

// TestFeedWaitsForBucket: a feed started before its bucket exists
// announces once it does.
func TestFeedWaitsForBucket(t *testing.T) {
	js := startJS(t)
	src, err := objstore.New("later", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if err != nil {
		t.Fatal(err)
	}
	var a announced
	f := objstore.NewFeed(src, &a, nil, 100*time.Millisecond)
	f.Start()
	defer f.Stop()
	obs, err := objstore.CreateBucket(ctx(t), js, "later", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx(t), "d/v1/_SUCCESS", nil); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, 10*time.Second, "d/v1 announced", func() error {
		if got := a.get(); !slices.Equal(got, []string{"d/v1"}) {
			return fmt.Errorf("announced %v", got)
		}
		return nil
	})
}
