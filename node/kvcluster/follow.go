package kvcluster

import (
	"sync"

	"github.com/spangledb/spangle/kvwatch"
)

// follower runs a function on a KV's snapshots (Subscribe) in one
// goroutine, from start until stop: what View, VersionFeed and
// PinFeed share. start may come before the KV has started; both are
// idempotent, and stop without start does nothing (a later start then
// does nothing either).
type follower struct {
	kv        *kvwatch.KV
	startOnce sync.Once
	stopOnce  sync.Once
	cancel    func()        // cancels the subscription; set by start
	done      chan struct{} // closed when run returns
}

func newFollower(kv *kvwatch.KV) follower {
	return follower{kv: kv, done: make(chan struct{})}
}

// start subscribes and runs run on the snapshots until the subscription
// ends (stop, or the KV's Shutdown).
func (f *follower) start(run func(<-chan *kvwatch.Snapshot)) {
	f.startOnce.Do(func() {
		ch, cancel := f.kv.Subscribe()
		f.cancel = cancel
		go func() { // owned: stop waits for it
			defer close(f.done)
			run(ch)
		}()
	})
}

// stop cancels the subscription and waits for run to return.
func (f *follower) stop() {
	f.stopOnce.Do(func() {
		f.startOnce.Do(func() {})
		if f.cancel != nil {
			f.cancel()
			<-f.done
		}
	})
}
