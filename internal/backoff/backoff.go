// Package backoff is spangle's one pause between retries: exponential,
// from a first pause doubling up to a bound, with jitter, in the manner of
// hashicorp/raft's backoff(). Every retry loop of spangle takes its pauses
// from a Backoff, with its own bounds (config fields or constants where
// the loop is).
//
// Jitter is "equal jitter": a pause of d is drawn uniformly from [d/2, d],
// so that nodes failing at once (a server restart, a bucket many nodes
// create together) do not retry in step, while no pause exceeds its bound
// and none is shorter than half of it.
//
// A leaf: it imports only the standard library, so that edge/client stays
// light.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff hands out the pauses of one retry loop. The zero value pauses
// 0; make one with New. A Backoff is not safe for concurrent use: each
// loop owns its own.
type Backoff struct {
	first, max time.Duration
	next       time.Duration // the next pause before jitter
}

// New returns a Backoff whose first pause is first, doubling at each
// pause up to max (max below first is taken as first). Both are bounds
// before jitter.
func New(first, max time.Duration) Backoff {
	return Backoff{first: first, max: max, next: first}
}

// Next returns the pause before the next attempt, with jitter, and
// doubles the one after, up to the bound.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(max(2*d, b.first), max(b.max, b.first))
	return Jitter(d)
}

// Reset makes the next pause the first again (after a success).
func (b *Backoff) Reset() { b.next = b.first }

// Wait pauses for Next(), or until ctx ends: it reports false when ctx
// ended first.
func (b *Backoff) Wait(ctx context.Context) bool {
	return Sleep(ctx, b.Next())
}

// Jitter returns a duration drawn uniformly from [d/2, d]; d itself when
// d <= 1ns.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d-d/2+1)
}

// Sleep pauses for d, or until ctx ends: it reports false when ctx ended
// first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
