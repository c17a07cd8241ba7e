package node

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// memoryRelease hands the heap a build leaves to the garbage collector
// (its sort buffers) back to the OS, so that the node does not serve
// with a build-sized heap: debug.FreeOSMemory, a forced collection then
// a release of every free page, on a goroutine of its own. It took 0.2 to
// 1.1 s of a loaded machine after a delta build (docs/PERFORMANCE.md,
// "Delta versions"); on the db's loop it held up what came next: the
// switch to the version once its peers announced theirs, the next
// version's build.
type memoryRelease struct {
	ch   chan struct{} // buffered 1: a release asked for, not begun
	free func()        // debug.FreeOSMemory; a test holds it
	// seconds observes each release's duration
	// (spangle_memory_release_seconds).
	seconds prometheus.Observer
}

func newMemoryRelease(seconds prometheus.Observer) *memoryRelease {
	return &memoryRelease{ch: make(chan struct{}, 1), free: debug.FreeOSMemory, seconds: seconds}
}

// ask asks for a release without waiting: one asked for while another
// runs follows it, and the asks made meanwhile are that one.
func (m *memoryRelease) ask() {
	select {
	case m.ch <- struct{}{}:
	default: // one is asked for already and has not begun
	}
}

// run releases memory as asked until ctx ends. The node's goroutine
// (Start) runs it.
func (m *memoryRelease) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.ch:
			start := time.Now()
			m.free()
			m.seconds.Observe(time.Since(start).Seconds())
		}
	}
}
