package proxy

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// peer is the queue of one peer address: attempts wait in it until a
// sender takes them. A sender sends one request at a time on a
// keep-alive connection, taking as many queued attempts as a batch may
// (MaxBatchKeys, MaxBatchBytes), until the queue is empty. An attempt
// queued for a peer without a sender starts one, and is sent at once,
// alone; attempts queued while a request is in flight wait for it, and
// go together in the next. A second sender (up to MaxConnsPerPeer)
// starts only when a full batch waits: so a busy node sends few, large
// requests (a batch costs both ends about what one lookup does, wake-ups
// and syscalls included), and the connections to a peer stay few.
//
// A peer is in Proxy.peers while it has a sender; the last sender to
// leave an empty queue removes it.
type peer struct {
	addr string

	mu       sync.Mutex // guards the fields below; see Proxy.peersMu for the order
	queue    []*attempt // waiting to be sent, oldest first; dead ones are dropped when seen
	busy     int        // senders running, ≤ MaxConnsPerPeer
	starting int        // senders started that have not taken a request yet
}

// peerRequest is one request to a peer: a GET for one attempt, a batch
// for several.
type peerRequest struct {
	attempts []*attempt // all of the same db, version and raw
	// live counts the attempts whose flights still want the answer, plus
	// one held by the sender until the request is ready to go. When it
	// drops to zero the request is cancelled (its connection closed).
	live   atomic.Int32
	cancel context.CancelFunc // set before the sender drops its hold
}

// release drops one hold on r; the last one cancels it.
func (r *peerRequest) release() {
	if r.live.Add(-1) == 0 {
		r.cancel()
	}
}

// enqueue queues a on its peer, and starts a sender for the peer if it
// has none, or a full batch waits and it has a free slot (and no sender
// is about to take the queue already).
func (p *Proxy) enqueue(a *attempt) {
	p.peersMu.Lock()
	pr := p.peers[a.peer]
	if pr == nil {
		pr = &peer{addr: a.peer}
		p.peers[a.peer] = pr
	}
	pr.mu.Lock()
	p.peersMu.Unlock()
	pr.queue = append(pr.queue, a)
	start := pr.starting == 0 && (pr.busy == 0 || pr.busy < p.cfg.MaxConnsPerPeer && len(pr.queue) >= p.cfg.MaxBatchKeys)
	if start {
		pr.busy++
		pr.starting++
	}
	pr.mu.Unlock()
	if start {
		p.senders.Add(1)
		go p.send(pr) // owned: Shutdown waits for p.senders
	}
}

// send is a sender: it sends pr's queued attempts, a request at a time,
// until the queue is empty. Before it takes the queue, it yields once:
// on a busy node, the goroutines the same wave of client requests made
// runnable queue their lookups first and join the batch; on an idle one,
// nothing else is runnable and the yield returns at once.
func (p *Proxy) send(pr *peer) {
	defer p.senders.Done()
	for first := true; ; first = false {
		runtime.Gosched()
		r := p.take(pr, first)
		if r == nil {
			return
		}
		p.do(pr.addr, r)
	}
}

// take removes the next request's attempts from pr's queue: the oldest
// live attempt and the later ones of the same db, version and raw, within
// the batch limits. With none, the sender leaves: take returns nil.
func (p *Proxy) take(pr *peer, first bool) *peerRequest {
	r := &peerRequest{}
	r.live.Store(1) // the sender's hold
	var keyBytes int
	var head *Request
	pr.mu.Lock()
	if first {
		pr.starting--
	}
	r.attempts = make([]*attempt, 0, min(len(pr.queue), p.cfg.MaxBatchKeys))
	kept := pr.queue[:0]
	for _, a := range pr.queue {
		if a.state.Load() == attemptDead {
			p.m.attempt(outcomeCanceled)
			continue
		}
		req := &a.f.req
		if head != nil && (len(r.attempts) == p.cfg.MaxBatchKeys || keyBytes+len(req.Key) > p.cfg.MaxBatchBytes ||
			req.DB != head.DB || req.Version != head.Version || req.Raw != head.Raw) {
			kept = append(kept, a)
			continue
		}
		a.req = r
		r.live.Add(1)
		if !a.state.CompareAndSwap(attemptQueued, attemptSent) { // its flight just ended
			r.live.Add(-1)
			p.m.attempt(outcomeCanceled)
			continue
		}
		if head == nil {
			head = req
		}
		r.attempts = append(r.attempts, a)
		keyBytes += len(req.Key)
	}
	clear(pr.queue[len(kept):])
	pr.queue = kept
	if len(r.attempts) > 0 {
		pr.mu.Unlock()
		return r
	}
	pr.busy--
	idle := pr.busy == 0 && len(pr.queue) == 0
	pr.mu.Unlock()
	if idle {
		p.peersMu.Lock()
		pr.mu.Lock()
		if pr.busy == 0 && len(pr.queue) == 0 && p.peers[pr.addr] == pr {
			delete(p.peers, pr.addr)
		}
		pr.mu.Unlock()
		p.peersMu.Unlock()
	}
	return nil
}

// do sends r to addr and reports each of its attempts' outcome to its
// flight, exactly once.
func (p *Proxy) do(addr string, r *peerRequest) {
	ctx, cancel := context.WithTimeout(p.base, p.cfg.Timeout)
	defer cancel()
	r.cancel = cancel
	if r.live.Add(-1) == 0 { // every flight ended while it queued
		for _, a := range r.attempts {
			a.f.report(a, Response{}, context.Canceled)
		}
		return
	}
	p.m.batchKeys.Observe(float64(len(r.attempts)))
	if len(r.attempts) == 1 {
		a := r.attempts[0]
		res, err := p.ask(ctx, addr, &a.f.req)
		a.f.report(a, res, err)
		return
	}
	ip := batchItemBufs.Get().(*[]batchItem)
	results, err := p.askBatch(ctx, addr, r.attempts, (*ip)[:0])
	switch {
	case err == nil:
		for i, a := range r.attempts {
			a.f.report(a, results[i].res, results[i].err)
		}
		putBatchItems(ip, results)
	case errors.Is(err, errRefused):
		// The peer would not answer the batch as a whole (one of its
		// keys is in a partition it no longer holds, it does not speak
		// batches, it limits them below us, ...): ask it key by key,
		// as if there had been no batch.
		p.log.Debug("proxy batch refused, asking key by key", "peer", addr, "keys", len(r.attempts), "error", err)
		for _, a := range r.attempts {
			if !a.live() {
				a.f.report(a, Response{}, context.Canceled)
				continue
			}
			res, err := p.ask(ctx, addr, &a.f.req)
			a.f.report(a, res, err)
		}
	default:
		for _, a := range r.attempts {
			a.f.report(a, Response{}, err)
		}
	}
}
