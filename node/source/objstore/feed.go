package objstore

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/node/source"
)

// Announcer is told of the versions a Feed sees complete; *node.Node
// implements it. Announce must not block.
type Announcer interface {
	Announce(db, version string)
}

// Feed is the change feed of a bucket itself: it watches the bucket's
// objects and announces each version whose _SUCCESS object it sees, the
// existing ones when it starts and new ones as they arrive. A region
// reads the hub's bucket through a mirror, and the versions
// announcements through another (the versions bucket's): the two fill
// independently, and an announcement may arrive before the version's
// objects. The _SUCCESS object comes after the version's files in the
// bucket's own order, which a mirror keeps, so this feed announces a
// version only once the region has it whole.
//
// One goroutine, started by Start and joined by Stop, runs the watcher;
// it retries every retry while the bucket cannot be watched.
type Feed struct {
	src   *Source
	to    Announcer
	log   *slog.Logger
	retry time.Duration

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
}

// NewFeed returns a feed of src's versions to to; it starts nothing. A
// nil log discards; retry is the pause after a failed watch (at least
// 100ms).
func NewFeed(src *Source, to Announcer, log *slog.Logger, retry time.Duration) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed{src: src, to: to, log: log.With("component", "object_feed", "source", src.String()),
		retry: max(retry, 100*time.Millisecond), done: make(chan struct{})}
}

// Start starts the watcher goroutine. It is idempotent.
func (f *Feed) Start() {
	f.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		f.cancel = cancel
		go func() { // owned: Stop cancels and waits for it
			defer close(f.done)
			f.run(ctx)
		}()
	})
}

// Stop stops the watcher and waits for its goroutine. It is idempotent;
// without Start it does nothing.
func (f *Feed) Stop() {
	f.stopOnce.Do(func() {
		f.startOnce.Do(func() { close(f.done) })
		if f.cancel != nil {
			f.cancel()
		}
		<-f.done
	})
}

func (f *Feed) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := f.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		f.log.Debug("object watcher ended; watching again", "err", err)
		t := time.NewTimer(f.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watch watches the bucket until ctx ends or the watcher does.
func (f *Feed) watch(ctx context.Context) error {
	obs, ok, err := f.src.store(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return jetstream.ErrBucketNotFound
	}
	w, err := obs.Watch(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() {
		// nats.go's watcher sends from the subscription's callback into a
		// channel of 32: empty it after unsubscribing, so that a callback
		// blocked on a full channel returns.
		_ = w.Stop()
		for {
			select {
			case _, ok := <-w.Updates():
				if !ok {
					return
				}
			default:
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case info, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if info == nil {
				continue // the end of the existing objects
			}
			if db, version, ok := successObject(info.Name); ok {
				f.to.Announce(db, version)
			}
		}
	}
}

// successObject reports whether name is <db>/<version>/_SUCCESS with
// valid names.
func successObject(name string) (db, version string, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) != 3 || parts[2] != successFile || !source.ValidName(parts[0]) || !source.ValidName(parts[1]) {
		return "", "", false
	}
	return parts[0], parts[1], true
}
