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
	nc         *nats.Conn   // cfg.Conn
	conns      []*nats.Conn // nc, then cfg.ClientConn if set: each gets every subscription
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
	subs     []*subscription           // get, mget and list, on every connection
	parts    map[partKey]*subscription // part subject on a connection → its subscription
	draining []*subscription           // parts of retired versions, until closed

	quit chan struct{}  // closed by Shutdown to stop follow
	wg   sync.WaitGroup // follow
}

type lifeState uint8

const (
	stateNew lifeState = iota
	stateRunning
	stateClosed
)

// subscription is a subscription, its connection and the channel that
// reports its closing (after a drain).
type subscription struct {
	sub    *nats.Subscription
	nc     *nats.Conn
	closed <-chan nats.SubStatus
}

// partKey names a part subscription: its subject on conns[conn].
type partKey struct {
	conn    int
	subject string
}

// subscribe queue-subscribes h to subject on nc.
func subscribe(nc *nats.Conn, subject, queue string, h nats.MsgHandler) (*subscription, error) {
	sub, err := nc.QueueSubscribe(subject, queue, h)
	if err != nil {
		return nil, err
	}
	return &subscription{sub: sub, nc: nc, closed: sub.StatusChanged(nats.SubscriptionClosed)}, nil
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
	conns := []*nats.Conn{cfg.Conn}
	if cfg.ClientConn != nil {
		conns = append(conns, cfg.ClientConn)
	}
	return &NATSServer{
		cfg:        cfg,
		nc:         cfg.Conn,
		conns:      conns,
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
		parts:      map[partKey]*subscription{},
		quit:       make(chan struct{}),
	}, nil
}

// Start subscribes to the get, mget and list subjects, on Conn and on
// ClientConn, and starts following the backend's held versions with part
// subscriptions. It does not wait for the server to confirm the
// subscriptions (Conn.Flush does). It fails if a connection is closed,
// or on a second call.
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
		for _, nc := range s.conns {
			for range s.cfg.Handlers {
				sub, err := subscribe(nc, sc.subject, sc.queue, s.logged("", sc.handler))
				if err != nil {
					for _, sub := range s.subs {
						_ = sub.sub.Unsubscribe()
					}
					s.subs = nil
					return fmt.Errorf("edge: subscribe %s: %w", sc.subject, err)
				}
				s.subs = append(s.subs, sub)
			}
		}
	}
	s.state = stateRunning
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.follow()
	}()
	s.log.Info("NATS front door started", "get", s.getPrefix+"*", "mget", s.mgetPrefix+"*", "list", s.listPrefix+"*", "handlers", s.cfg.Handlers,
		"client_account", s.cfg.ClientConn != nil)
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
// subscription on a connection and drains those of versions no longer
// held. It reports whether every subscription succeeded.
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
	for key, ps := range s.parts {
		if want[key.subject] {
			continue
		}
		// A drain answers the requests already routed here, then closes.
		if err := ps.sub.Drain(); err != nil {
			_ = ps.sub.Unsubscribe()
		}
		s.draining = append(s.draining, ps)
		delete(s.parts, key)
		s.log.Debug("NATS part subscription retired", "subject", key.subject, "conn", key.conn)
	}
	for _, a := range adds {
		db, version, p := a.db, a.version, a.p
		for i, nc := range s.conns {
			key := partKey{i, a.subject}
			if _, ok := s.parts[key]; ok {
				continue
			}
			sub, err := subscribe(nc, a.subject, a.subject, s.logged(db, func(m *nats.Msg) { s.onPart(m, db, version, p) }))
			if err != nil {
				s.log.Warn("cannot subscribe; retrying", "subject", a.subject, "conn", i, "err", err)
				ok = false
				continue
			}
			s.parts[key] = sub
			s.log.Debug("NATS part subscription added", "subject", a.subject, "conn", i)
		}
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
	subjects := map[string]bool{}
	for key := range s.parts {
		subjects[key.subject] = true
	}
	s.met.parts.Set(float64(len(subjects)))
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

	// 2. A drain needs the server: on a connection that is down,
	// unsubscribe (nothing is routed there meanwhile) and wait for
	// nothing.
	connected := map[*nats.Conn]bool{}
	for _, nc := range s.conns {
		connected[nc] = nc.IsConnected()
	}
	var waits []*subscription
	stop := func(ps *subscription) {
		if !connected[ps.nc] || ps.sub.Drain() != nil {
			_ = ps.sub.Unsubscribe()
			return
		}
		waits = append(waits, ps)
	}
	s.mu.Lock()
	for _, ps := range s.subs {
		stop(ps)
	}
	for key, ps := range s.parts {
		stop(ps)
		delete(s.parts, key)
	}
	for _, ps := range s.draining {
		if connected[ps.nc] {
			waits = append(waits, ps)
		}
	}
	s.draining = nil
	s.met.parts.Set(0)
	s.mu.Unlock()

	// 3. A closed connection closes no subscription channel: do not wait
	// for those.
	var err error
	for _, ps := range waits {
		if ps.nc.IsClosed() {
			continue
		}
		select {
		case <-ps.closed:
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
