package kvwatch

import (
	"context"
	"errors"
	"time"
)

// ownLoop is the part that owns this node's own TTL'd entries, in the
// manner of raft's run loop: one goroutine (run) holds the registry and
// every entry's state (value, revision, last write) and starts every
// write of them — Publish, Withdraw, the heartbeat's refreshes, repair's
// rewrites and the deletes of Shutdown. Callers talk to it through
// requests (reqs), each carrying a channel for its answer; the loop
// itself never does I/O, so it takes a request at once, and a caller's
// ctx bounds its wait for the answer and the write it asked for.
//
// The writes run in goroutines of their own (workers), each given a copy
// of what it writes, and report back on results; the loop then updates
// the entry and answers. The writes of one key run one after the other,
// in the order they were asked for (a slot's queue): a Withdraw's delete
// and the next Publish's create of a key never overlap, and the last
// Publish wins. Keys are written concurrently; the background's writes
// (refreshes, rewrites, the deletes of close) at most refreshParallelism
// at a time, the callers' as they come.
type ownLoop struct {
	k       *KV
	reqs    chan ownRequest     // to run, from the callers
	results chan ownResult      // to run, from the workers
	stopped chan struct{}       // closed when run has returned
	ln      *link               // set by run, before any worker starts
	ctx     context.Context     // run's; ends the workers' writes when it ends
	slots   map[ownKey]*ownSlot // owned by run
	closed  bool                // close ran: Publish fails with ErrClosed
	running int                 // workers of background writes
	waiting []*ownJob           // background writes waiting for a place, in order
	stop    bool                // ctx ended: every op left fails with ErrClosed
}

type ownKey struct {
	b   Bucket
	key string
}

// ownSlot is one own key as the loop knows it: its registered entry, if
// any, and the ops on it, run one at a time.
type ownSlot struct {
	entry *ownEntry // nil when not registered (never published, withdrawn, closed)
	busy  bool      // a write of the key is running or waiting for a place
	queue []*ownOp
}

// opKind is what an op does to its key in its turn.
type opKind int

const (
	opPublish  opKind = iota // register value and write it
	opWithdraw               // unregister, then delete
	opRefresh                // heartbeat: write again when due (or always, after a reconnect)
	opRewrite                // repair: write again
	opRevision               // read the revision (after the writes before it)
	opDelete                 // close: delete (already unregistered)
)

// ownOp is one step on an own key. An op asked for by an API call
// answers on reply; the heartbeat's, repair's and close's are counted in
// their batch.
type ownOp struct {
	ctx   context.Context
	kind  opKind
	value []byte     // opPublish: owned by the op
	entry *ownEntry  // opRefresh, opRewrite: the entry the batch meant (skipped if replaced)
	all   bool       // opRefresh: write even when not due
	reply chan error // buffered 1; nil for batch ops
	batch *ownBatch
}

// ownBatch counts the ops of one heartbeat round, repair or close, and
// answers once all of them are done.
type ownBatch struct {
	left  int
	res   batchResult
	reply chan batchResult // buffered 1
}

// batchResult is a batch's answer: writes that succeeded and failed, and
// for opRevision the revisions read.
type batchResult struct {
	ok, failed int
	revs       []uint64
	err        error // ErrClosed when the loop stopped first
}

// ownRequest is a call to the loop: one op on key id (op set), or a
// batch over the registered entries (batch set).
type ownRequest struct {
	id    ownKey
	op    *ownOp
	batch *batchRequest
}

// batchRequest asks for one op per registered entry (of bucket b, or all
// when any).
type batchRequest struct {
	ctx   context.Context
	kind  opKind
	b     Bucket
	any   bool
	all   bool
	close bool // unregister every entry first and refuse later Publishes
	reply chan batchResult
}

// ownJob is a write or delete handed to a worker: a copy of what it
// needs.
type ownJob struct {
	id    ownKey
	op    *ownOp
	entry *ownEntry // the entry written (nil for a delete)
	w     ownWrite
	del   bool
	bg    bool // a background write: counted in running
}

// ownResult is a worker's report.
type ownResult struct {
	job *ownJob
	rev uint64 // the entry's revision after the write, as far as known
	err error
	at  time.Time
}

func newOwnLoop(k *KV) *ownLoop {
	return &ownLoop{
		k:       k,
		reqs:    make(chan ownRequest),
		results: make(chan ownResult),
		stopped: make(chan struct{}),
		slots:   make(map[ownKey]*ownSlot),
	}
}

// do runs op on (b, key) and returns its answer, or ctx's error when ctx
// ends first (the op still runs), or ErrClosed once the loop stopped.
func (o *ownLoop) do(ctx context.Context, b Bucket, key string, op *ownOp) error {
	op.ctx, op.reply = ctx, make(chan error, 1)
	select {
	case o.reqs <- ownRequest{id: ownKey{b, key}, op: op}:
	case <-o.stopped:
		return ErrClosed
	}
	select {
	case err := <-op.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// doBatch runs r and returns its answer, or ctx's error when ctx ends
// first (its ops still run), or ErrClosed once the loop stopped.
func (o *ownLoop) doBatch(ctx context.Context, r batchRequest) batchResult {
	r.ctx, r.reply = ctx, make(chan batchResult, 1)
	select {
	case o.reqs <- ownRequest{batch: &r}:
	case <-o.stopped:
		return batchResult{err: ErrClosed}
	}
	select {
	case res := <-r.reply:
		return res
	case <-ctx.Done():
		return batchResult{err: ctx.Err()}
	}
}

// publish registers value as key's in b and writes it.
func (o *ownLoop) publish(ctx context.Context, b Bucket, key string, value []byte) error {
	return o.do(ctx, b, key, &ownOp{kind: opPublish, value: value})
}

// withdraw unregisters key of b and deletes it, if registered.
func (o *ownLoop) withdraw(ctx context.Context, b Bucket, key string) error {
	return o.do(ctx, b, key, &ownOp{kind: opWithdraw})
}

// refresh writes every registered entry that is due (all of them with
// all), after the writes asked for before, and returns when all are done.
func (o *ownLoop) refresh(ctx context.Context, all bool) {
	o.doBatch(ctx, batchRequest{kind: opRefresh, any: true, all: all})
}

// rewrite writes every registered entry of b again (repair) and returns
// how many writes succeeded and failed.
func (o *ownLoop) rewrite(ctx context.Context, b Bucket) (ok, failed int) {
	res := o.doBatch(ctx, batchRequest{kind: opRewrite, b: b})
	return res.ok, res.failed
}

// revisions returns the revisions of the registered entries of b, each
// read after the writes of its key asked for before (0 for an entry not
// written yet).
func (o *ownLoop) revisions(ctx context.Context, b Bucket) []uint64 {
	return o.doBatch(ctx, batchRequest{kind: opRevision, b: b}).revs
}

// close unregisters every entry, deletes them (after the writes asked for
// before) and makes later Publishes fail with ErrClosed. For Shutdown.
func (o *ownLoop) close(ctx context.Context) {
	o.doBatch(ctx, batchRequest{kind: opDelete, any: true, close: true})
}

// run is the loop, started by Start with the connection it bound. When
// ctx ends it fails every op not yet started, waits for the workers and
// returns.
func (o *ownLoop) run(ctx context.Context, ln *link) {
	o.ctx, o.ln = ctx, ln
	defer close(o.stopped)
	inflight := 0
	for {
		select {
		case r := <-o.reqs:
			inflight += o.take(r)
		case res := <-o.results:
			inflight--
			inflight += o.finish(res)
		case <-ctx.Done():
			o.stop = true
			for id, s := range o.slots {
				for _, op := range s.queue {
					o.answer(op, ErrClosed)
				}
				s.queue = nil
				o.gc(id, s)
			}
			for _, j := range o.waiting {
				o.answer(j.op, ErrClosed)
				o.slots[j.id].busy = false
				o.gc(j.id, o.slots[j.id])
			}
			o.waiting = nil
			for inflight > 0 {
				select {
				case r := <-o.reqs:
					o.take(r) // answered ErrClosed: nothing starts
				case res := <-o.results:
					inflight--
					o.finish(res)
				}
			}
			return
		}
	}
}

// take handles a request and returns how many workers it started.
func (o *ownLoop) take(r ownRequest) int {
	if r.batch == nil {
		return o.enqueue(r.id, r.op)
	}
	q := r.batch
	if o.stop {
		q.reply <- batchResult{err: ErrClosed}
		return 0
	}
	b := &ownBatch{reply: q.reply}
	type pending struct {
		id ownKey
		op *ownOp
	}
	var ops []pending
	for id, s := range o.slots {
		e := s.entry
		if e == nil || !(q.any || id.b == q.b) {
			continue
		}
		if q.close {
			s.entry = nil
		}
		ops = append(ops, pending{id, &ownOp{ctx: q.ctx, kind: q.kind, entry: e, all: q.all, batch: b}})
	}
	if q.close {
		o.closed = true
	}
	b.left = len(ops)
	if b.left == 0 {
		b.reply <- b.res
		return 0
	}
	started := 0
	for _, p := range ops {
		started += o.enqueue(p.id, p.op)
	}
	return started
}

// enqueue adds op to its key's queue and starts what can start; it
// returns how many workers it started.
func (o *ownLoop) enqueue(id ownKey, op *ownOp) int {
	s := o.slots[id]
	if s == nil {
		s = &ownSlot{}
		o.slots[id] = s
	}
	s.queue = append(s.queue, op)
	return o.advance(id, s)
}

// advance starts the ops of s's queue until one needs a worker, and
// returns how many workers it started (0 or 1).
func (o *ownLoop) advance(id ownKey, s *ownSlot) int {
	started := 0
	for !s.busy && len(s.queue) > 0 {
		op := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		started += o.start(id, s, op)
	}
	o.gc(id, s)
	return started
}

// gc forgets s once it holds nothing.
func (o *ownLoop) gc(id ownKey, s *ownSlot) {
	if s.entry == nil && !s.busy && len(s.queue) == 0 {
		delete(o.slots, id)
	}
}

// start takes op in its key's turn: answers it at once, or hands its
// write to a worker (s is then busy). It returns how many workers it
// started.
func (o *ownLoop) start(id ownKey, s *ownSlot, op *ownOp) int {
	if o.stop {
		o.answer(op, ErrClosed)
		return 0
	}
	j := &ownJob{id: id, op: op}
	switch op.kind {
	case opPublish:
		if o.closed {
			o.answer(op, ErrClosed)
			return 0
		}
		if s.entry == nil {
			s.entry = &ownEntry{b: id.b, key: id.key}
		}
		s.entry.value = op.value
		j.entry = s.entry
	case opWithdraw:
		if s.entry == nil {
			o.answer(op, nil)
			return 0
		}
		s.entry = nil
		j.del = true
	case opRefresh, opRewrite:
		if s.entry != op.entry || (op.kind == opRefresh && !op.all && !o.k.due(op.entry, time.Now())) {
			o.skip(op) // withdrawn or replaced since, or not due
			return 0
		}
		j.entry, j.bg = op.entry, true
	case opRevision:
		if s.entry != nil {
			op.batch.res.revs = append(op.batch.res.revs, s.entry.rev)
		}
		o.skip(op)
		return 0
	case opDelete:
		j.del, j.bg = true, true
	}
	if j.entry != nil {
		j.w = ownWrite{b: id.b, key: id.key, value: j.entry.value, rev: j.entry.rev}
	}
	s.busy = true
	if j.bg && o.running >= refreshParallelism {
		o.waiting = append(o.waiting, j)
		return 0
	}
	o.launch(j)
	return 1
}

// launch runs j in a worker, its write cut short when the loop stops.
func (o *ownLoop) launch(j *ownJob) {
	if j.bg {
		o.running++
	}
	go func() {
		ctx, cancel := context.WithCancel(j.op.ctx)
		defer cancel()
		defer context.AfterFunc(o.ctx, cancel)()
		res := ownResult{job: j}
		if j.del {
			res.err = o.k.purge(ctx, o.ln.kvs[j.id.b], j.id.b, j.id.key)
		} else {
			res.rev, res.err = o.k.writeOwn(ctx, o.ln, j.w)
		}
		res.at = time.Now()
		o.results <- res
	}()
}

// finish takes a worker's report: updates the entry written, answers
// the op, and starts what waited for the key or for a place. It returns
// how many workers it started.
func (o *ownLoop) finish(res ownResult) int {
	j := res.job
	if e := j.entry; e != nil {
		e.rev = res.rev
		if res.err == nil {
			e.written = res.at
		}
	}
	o.report(j, res.err)
	o.answer(j.op, res.err)
	started := 0
	if j.bg {
		o.running--
		if len(o.waiting) > 0 && !o.stop {
			next := o.waiting[0]
			o.waiting[0] = nil
			o.waiting = o.waiting[1:]
			o.launch(next)
			started++
		}
	}
	s := o.slots[j.id]
	s.busy = false
	return started + o.advance(j.id, s)
}

// report logs and counts a background write's failure.
func (o *ownLoop) report(j *ownJob, err error) {
	switch {
	case err == nil:
	case j.op.kind == opRefresh && j.op.ctx.Err() == nil:
		o.k.met.heartbeatFailures.Inc()
		o.k.log.Warn("heartbeat refresh failed", "bucket", j.id.b, "key", j.id.key, "err", err)
	case j.op.kind == opDelete:
		o.k.log.Warn("could not delete own entry at shutdown; it expires after EntryTTL",
			"bucket", j.id.b, "key", j.id.key, "err", err)
	}
}

// answer gives op's answer, its write's outcome, to its caller or its
// batch.
func (o *ownLoop) answer(op *ownOp, err error) {
	if op.reply != nil {
		op.reply <- err
		return
	}
	if err == nil {
		op.batch.res.ok++
	} else {
		op.batch.res.failed++
		if errors.Is(err, ErrClosed) {
			op.batch.res.err = err
		}
	}
	op.batch.done()
}

// skip ends op without a write (nothing to write, or not due).
func (o *ownLoop) skip(op *ownOp) {
	if op.reply != nil {
		op.reply <- nil
		return
	}
	op.batch.done()
}

// done counts one op of b done, and answers once all are.
func (b *ownBatch) done() {
	b.left--
	if b.left == 0 {
		b.reply <- b.res
	}
}
