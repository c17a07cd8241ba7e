package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// flight is one lookup in progress, shared by the identical Gets that wait
// for it. It runs on no goroutine of its own: Get starts it, a timer
// starts its backup attempts and ends it at its deadline, and the senders
// (peer.go) report each attempt's outcome, which decides what happens
// next. That is sequins' staged algorithm (see the package doc):
//
//  1. shuffle the peers; start an attempt on the first at once;
//  2. each StageTimeout without an answer, start one on the next peer,
//     the earlier ones still running;
//  3. when an attempt fails, start the next one at once (and restart
//     the stage clock);
//  4. the first 200 or 404 wins; the others are cancelled;
//  5. every peer failed: ErrNoReplica; the deadline passed: ErrTimeout.
type flight struct {
	p   *Proxy
	key string  // flight key, as in Proxy.flights
	req Request // own copies of Key and Peers; Peers shuffled

	// begun is when start made the first attempt (zero if it did not),
	// deadline begun + Timeout: no attempt starts at or after it. Set
	// under mu by start, then only read.
	begun, deadline time.Time

	// done is closed once res, err and shared are set; they do not
	// change afterwards.
	done   chan struct{}
	res    Response
	err    error
	shared bool // callers copy res.Body (see Proxy.settle)

	waiters int // Gets waiting for the answer; guarded by Proxy.mu

	mu sync.Mutex // guards the fields below
	// finished: the answer is decided; nothing starts any more.
	finished bool
	next     int         // index in req.Peers of the next peer to try
	running  int         // attempts started and not reported
	stageAt  time.Time   // when the next backup attempt is due
	timer    *time.Timer // fires at min(stageAt, deadline); nil until start
	attempts []*attempt  // every attempt started, for cancelling them
	lastErr  error
	// Backing for the first attempts: up to three peers allocate none.
	inline    [3]attempt
	inlinePtr [3]*attempt
}

// newFlight returns a flight for req under key, with
// its own copies of req's slices. It starts nothing.
func (p *Proxy) newFlight(key string, req Request) *flight {
	f := &flight{
		p:    p,
		key:  key,
		req:  Request{DB: req.DB, Version: req.Version, Key: slices.Clone(req.Key), Peers: slices.Clone(req.Peers), Raw: req.Raw},
		done: make(chan struct{}),
	}
	f.attempts = f.inlinePtr[:0]
	p.shuffle(f.req.Peers)
	return f
}

// start makes the first attempt and arms the flight's timer.
func (f *flight) start() {
	f.mu.Lock()
	if f.finished { // Shutdown ended it already
		f.mu.Unlock()
		return
	}
	f.begun = time.Now()
	f.deadline = f.begun.Add(f.p.cfg.Timeout)
	f.timer = time.AfterFunc(f.p.cfg.Timeout, f.tick) // re-armed by launchLocked
	end := f.launchLocked(f.begun)
	f.mu.Unlock()
	if end {
		f.end()
	}
}

// launchLocked starts an attempt on the next peer that has a valid
// address, and re-arms the timer. When none is left and no attempt runs,
// it finishes the flight with ErrNoReplica and reports true: the caller
// must then call end once it has released f.mu.
func (f *flight) launchLocked(now time.Time) (end bool) {
	for f.next < len(f.req.Peers) {
		peer := f.req.Peers[f.next]
		f.next++
		if f.p.cfg.OnAttempt != nil {
			f.p.cfg.OnAttempt(peer)
		}
		if err := checkPeer(peer); err != nil {
			f.p.m.attempt(outcomeError)
			f.failedLocked(err)
			continue
		}
		var a *attempt
		if n := len(f.attempts); n < len(f.inline) {
			a = &f.inline[n]
		} else {
			a = new(attempt)
		}
		a.f, a.peer = f, peer
		f.attempts = append(f.attempts, a)
		f.running++
		f.stageAt = now.Add(f.p.cfg.StageTimeout)
		f.armLocked(now)
		f.p.enqueue(a)
		return false
	}
	if f.running == 0 {
		return f.finishLocked(Response{}, fmt.Errorf("%w: %d peers failed, last: %w", ErrNoReplica, len(f.req.Peers), f.lastErr))
	}
	f.armLocked(now)
	return false
}

// armLocked sets the timer for the next backup attempt or the deadline,
// whichever comes first.
func (f *flight) armLocked(now time.Time) {
	at := f.deadline
	if f.next < len(f.req.Peers) && f.stageAt.Before(at) {
		at = f.stageAt
	}
	f.timer.Reset(at.Sub(now))
}

// failedLocked records a failed attempt.
func (f *flight) failedLocked(err error) {
	f.lastErr = err
	f.p.log.Debug("proxy attempt failed", slog.String("db", f.req.DB), slog.String("version", f.req.Version), slog.Any("error", err))
}

// tick runs when the timer fires: at the deadline the flight times out;
// when a backup attempt is due, it starts. A timer that fires early (it
// was re-armed as it fired) only re-arms it.
func (f *flight) tick() {
	f.mu.Lock()
	if f.finished {
		f.mu.Unlock()
		return
	}
	now := time.Now()
	var end bool
	switch {
	case !now.Before(f.deadline):
		end = f.finishLocked(Response{}, fmt.Errorf("%w after %v", ErrTimeout, f.p.cfg.Timeout))
	case f.next < len(f.req.Peers) && !now.Before(f.stageAt):
		end = f.launchLocked(now)
	default:
		f.armLocked(now)
	}
	f.mu.Unlock()
	if end {
		f.end()
	}
}

// report is called by a sender with the outcome of attempt a: the
// answer if err is nil. A report for a finished flight counts the
// attempt as cancelled and is otherwise ignored.
func (f *flight) report(a *attempt, res Response, err error) {
	f.mu.Lock()
	if f.finished {
		f.mu.Unlock()
		f.p.m.attempt(outcomeCanceled)
		return
	}
	f.p.m.attempt(attemptOutcome(res, err))
	f.running--
	var end bool
	if err == nil {
		end = f.finishLocked(res, nil)
	} else {
		f.failedLocked(err)
		switch now := time.Now(); {
		case f.p.base.Err() != nil: // Shutdown cancelled the request
			end = f.finishLocked(Response{}, ErrClosed)
		case !now.Before(f.deadline):
			end = f.finishLocked(Response{}, fmt.Errorf("%w after %v", ErrTimeout, f.p.cfg.Timeout))
		default:
			end = f.launchLocked(now)
		}
	}
	f.mu.Unlock()
	if end {
		f.end()
	}
}

// fail ends the flight with err unless it has ended already (Shutdown).
func (f *flight) fail(err error) {
	f.mu.Lock()
	end := f.finishLocked(Response{}, err)
	f.mu.Unlock()
	if end {
		f.end()
	}
}

// abandon ends a flight every caller has left: its attempts are
// cancelled, and its answer, should one come, is dropped.
func (f *flight) abandon() {
	f.fail(errAbandoned)
}

// errAbandoned ends a flight no Get waits for any more; no one sees it.
var errAbandoned = errors.New("proxy: lookup abandoned by every caller")

// finishLocked decides the flight's answer, unless it is decided
// already, and reports whether it did: the caller must then call end
// once it has released f.mu.
func (f *flight) finishLocked(res Response, err error) bool {
	if f.finished {
		return false
	}
	f.finished = true
	f.res, f.err = res, err
	if f.timer != nil {
		f.timer.Stop()
	}
	return true
}

// end completes a flight finishLocked decided: it cancels the attempts
// still queued or in flight, records the duration,
// forgets the flight and wakes its callers.
func (f *flight) end() {
	// No attempt is added once finished is set, so attempts is stable.
	for _, a := range f.attempts {
		a.cancel()
	}
	if !f.begun.IsZero() {
		f.p.m.duration.Observe(time.Since(f.begun).Seconds())
	}
	f.shared = f.p.settle(f)
	close(f.done)
	f.p.running.Done()
}

// Attempt states: an attempt is queued on its peer, then sent in a
// request, or dead when its flight ended before it was sent.
const (
	attemptQueued int32 = iota
	attemptSent
	attemptDead
)

// attempt is a flight's request to one peer. A sender takes it from its
// peer's queue (queued → sent) unless its flight ended first (queued →
// dead).
type attempt struct {
	f     *flight
	peer  string
	state atomic.Int32
	// req is the request carrying the attempt; set before state
	// becomes attemptSent and not changed after.
	req *peerRequest
}

// cancel withdraws the attempt of an ended flight: a queued one is never
// sent; a sent one releases its request, which is cancelled when no live
// attempt is left in it.
func (a *attempt) cancel() {
	if a.state.CompareAndSwap(attemptQueued, attemptDead) {
		return
	}
	if a.state.Load() == attemptSent {
		a.req.release()
	}
}

// live reports whether the attempt's answer is still wanted.
func (a *attempt) live() bool {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	return !a.f.finished
}
