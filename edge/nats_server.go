package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node"
)

// NATSBackend is what the NATS front door needs from a node. *node.Node
// implements it. Implementations must be safe for concurrent use.
type NATSBackend interface {
	// Get is Backend.Get.
	Get(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error)
	// GetPart answers a part subject (node.Node.GetPart): only the db's
	// active version, only keys of partition p.
	GetPart(ctx context.Context, db, version string, p int, key []byte, opts node.GetOptions) (node.Result, error)
	// GetMany is BatchBackend.GetMany.
	GetMany(ctx context.Context, db string, keys [][]byte, opts node.GetOptions) (string, []node.Result, error)
	// Held returns the versions readable here and a channel closed at the
	// next change of that list (node.Node.Held). The caller does not
	// modify the list.
	Held() ([]node.HeldVersion, <-chan struct{})
}

// NATSServer is the NATS request-reply front door (see the package doc,
// "NATS"). Create it with NewNATSServer, then Start and Shutdown. Safe for
// concurrent use.
type NATSServer struct {
	cfg        NATSConfig
	nc         *nats.Conn
	backend    NATSBackend
	lister     ListBackend // nil: listings are 501
	log        *slog.Logger
	met        *natsMetrics
	guard      *replyGuard
	getPrefix  string // "spangle.<cluster>.get."
	mgetPrefix string // "spangle.<cluster>.mget."
	listPrefix string // "spangle.<cluster>.list."

	// ctx is the context of every lookup: cancelled once Shutdown has
	// waited for the in-flight ones, or given up.
	ctx    context.Context
	cancel context.CancelFunc

	headers sync.Map // db → *natsDB, for dbs the backend knows
	// inflight maps the requests being answered to their access log
	// records (accesslog_nats.go); empty without NATSConfig.AccessLog.
	inflight sync.Map

	mu       sync.Mutex // guards the fields below
	state    lifeState
	subs     []*nats.Subscription     // get and mget
	parts    map[string]*subscription // part subject → its subscription
	draining []*subscription          // parts of retired versions, until closed

	quit chan struct{}  // closed by Shutdown to stop follow
	wg   sync.WaitGroup // follow
}

type lifeState uint8

const (
	stateNew lifeState = iota
	stateRunning
	stateClosed
)

// subscription is a part subscription and the channel that reports its
// closing (after a drain).
type subscription struct {
	sub    *nats.Subscription
	closed <-chan nats.SubStatus
}

// NewNATSServer validates cfg, registers the NATS metrics and returns a
// server. It subscribes to nothing until Start.
func NewNATSServer(cfg NATSConfig) (*NATSServer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	met, err := newNATSMetrics(reg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &NATSServer{
		cfg:        cfg,
		nc:         cfg.Conn,
		backend:    cfg.Backend,
		lister:     cfg.List,
		log:        log,
		met:        met,
		guard:      newReplyGuard(slices.Clone(cfg.ReplyPrefixes), log),
		getPrefix:  names.GetSubject(cfg.ClusterName, ""),
		mgetPrefix: names.MGetSubject(cfg.ClusterName, ""),
		listPrefix: names.ListSubject(cfg.ClusterName, ""),
		ctx:        ctx,
		cancel:     cancel,
		parts:      map[string]*subscription{},
		quit:       make(chan struct{}),
	}, nil
}

// Start subscribes to the get and mget subjects and starts following the
// backend's held versions with part subscriptions. It does not wait for
// the server to confirm the subscriptions (Conn.Flush does). It fails if
// the connection is closed, or on a second call.
func (s *NATSServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateNew {
		return errors.New("edge: NATS server already started or shut down")
	}
	prefix := names.Prefix(s.cfg.ClusterName)
	for _, sc := range []struct {
		subject, queue string
		handler        nats.MsgHandler
	}{
		{s.getPrefix + "*", prefix + ".get", s.onGet},
		{s.mgetPrefix + "*", prefix + ".mget", s.onMGet},
		{s.listPrefix + "*", prefix + ".list", s.onList},
	} {
		for range s.cfg.Handlers {
			sub, err := s.nc.QueueSubscribe(sc.subject, sc.queue, s.logged("", sc.handler))
			if err != nil {
				for _, sub := range s.subs {
					_ = sub.Unsubscribe()
				}
				s.subs = nil
				return fmt.Errorf("edge: subscribe %s: %w", sc.subject, err)
			}
			s.subs = append(s.subs, sub)
		}
	}
	s.state = stateRunning
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.follow()
	}()
	s.log.Info("NATS front door started", "get", s.getPrefix+"*", "mget", s.mgetPrefix+"*", "list", s.listPrefix+"*", "handlers", s.cfg.Handlers)
	return nil
}

// follow keeps one part subscription per partition of every held version,
// until Shutdown. It is the only goroutine that changes them. It also
// forgets the cached headers of the dbs the backend removes.
func (s *NATSServer) follow() {
	for {
		held, changed := s.backend.Held()
		var retry <-chan time.Time
		var timer *time.Timer
		if !s.syncParts(held) {
			timer = time.NewTimer(s.cfg.RetryInterval)
			retry = timer.C
		}
		s.forgetRemoved()
		select {
		case <-s.quit:
		case <-changed:
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-s.quit:
			return
		default:
		}
	}
}

// syncParts subscribes to the part subjects of held that have no
// subscription and drains those of versions no longer held. It reports
// whether every subscription succeeded.
func (s *NATSServer) syncParts(held []node.HeldVersion) bool {
	want := map[string]bool{}
	type newSub struct {
		subject, db, version string
		p                    int
	}
	var adds []newSub
	for _, h := range held {
		prefix := names.PartPrefix(s.cfg.ClusterName, h.DB, h.Version)
		for _, p := range h.Partitions {
			subject := prefix + strconv.Itoa(p)
			want[subject] = true
			adds = append(adds, newSub{subject, h.DB, h.Version, p})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := true
	for subject, ps := range s.parts {
		if want[subject] {
			continue
		}
		// A drain answers the requests already routed here, then closes.
		if err := ps.sub.Drain(); err != nil {
			_ = ps.sub.Unsubscribe()
		}
		s.draining = append(s.draining, ps)
		delete(s.parts, subject)
		s.log.Debug("NATS part subscription retired", "subject", subject)
	}
	for _, a := range adds {
		if _, ok := s.parts[a.subject]; ok {
			continue
		}
		db, version, p := a.db, a.version, a.p
		sub, err := s.nc.QueueSubscribe(a.subject, a.subject, s.logged(db, func(m *nats.Msg) { s.onPart(m, db, version, p) }))
		if err != nil {
			s.log.Warn("cannot subscribe; retrying", "subject", a.subject, "err", err)
			ok = false
			continue
		}
		s.parts[a.subject] = &subscription{sub: sub, closed: sub.StatusChanged(nats.SubscriptionClosed)}
		s.log.Debug("NATS part subscription added", "subject", a.subject)
	}
	// Forget the drained subscriptions that have closed.
	kept := s.draining[:0]
	for _, ps := range s.draining {
		if ps.sub.IsValid() {
			kept = append(kept, ps)
		}
	}
	clear(s.draining[len(kept):])
	s.draining = kept
	s.met.parts.Set(float64(len(s.parts)))
	return ok
}

// Shutdown stops the front door gracefully and is idempotent:
//
//  1. stop following the held versions;
//  2. drain every subscription: the requests already routed here are
//     answered, no new ones arrive (NATS routes them to other members of
//     the queue groups, or answers "no responders");
//  3. wait until every subscription has closed, or ctx ends;
//  4. cancel the context of lookups still running.
//
// It does not close the connection. It returns ctx's error if ctx ended
// first.
func (s *NATSServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.state != stateRunning {
		s.state = stateClosed
		s.mu.Unlock()
		s.cancel()
		return nil
	}
	s.state = stateClosed
	s.mu.Unlock()

	// 1.
	close(s.quit)
	s.wg.Wait()

	// 2. A drain needs the server: without a connection, unsubscribe
	// (nothing is routed here meanwhile) and wait for nothing.
	connected := s.nc.IsConnected()
	stop := func(sub *nats.Subscription) {
		if !connected || sub.Drain() != nil {
			_ = sub.Unsubscribe()
		}
	}
	s.mu.Lock()
	var waits []<-chan nats.SubStatus
	for _, sub := range s.subs {
		if connected {
			waits = append(waits, sub.StatusChanged(nats.SubscriptionClosed))
		}
		stop(sub)
	}
	for subject, ps := range s.parts {
		stop(ps.sub)
		if connected {
			s.draining = append(s.draining, ps)
		}
		delete(s.parts, subject)
	}
	if connected {
		for _, ps := range s.draining {
			waits = append(waits, ps.closed)
		}
	}
	s.draining = nil
	s.met.parts.Set(0)
	s.mu.Unlock()

	// 3. A closed connection closes no subscription channel: do not wait
	// for those.
	var err error
	for _, ch := range waits {
		if s.nc.IsClosed() {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			err = fmt.Errorf("edge: NATS shutdown: %w", ctx.Err())
		}
		if err != nil {
			break
		}
	}
	// 4.
	s.cancel()
	s.log.Info("NATS front door stopped", "err", err)
	return err
}
