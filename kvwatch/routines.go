package kvwatch

import (
	"context"
	"sync"
)

// routines is a set of goroutines with one owner, stopped together, in the
// manner of raft's goFunc: go starts one with the set's context, stop
// cancels it and waits for every one to return. KV has two: the
// background (heartbeat, embedded server's supervisor, hub check), stopped
// before its own entries are withdrawn, and the loops (the own loop, which
// withdraws them, and the watch loop), stopped after.
type routines struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newRoutines() *routines {
	ctx, cancel := context.WithCancel(context.Background())
	return &routines{ctx: ctx, cancel: cancel}
}

// goFunc runs fn(ctx) in a goroutine of the set. It must not be called
// after stop.
func (r *routines) goFunc(fn func(ctx context.Context)) {
	r.wg.Go(func() { fn(r.ctx) })
}

// stop cancels the set's context and waits for its goroutines. Idempotent.
func (r *routines) stop() {
	r.cancel()
	r.wg.Wait()
}
