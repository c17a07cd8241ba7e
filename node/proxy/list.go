package proxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spangledb/spangle/node/listwire"
)

// ListRequest asks peers holding every one of Partitions for a page of
// their keys in a range: GET /<db>/?proxy=<version>&parts=…&start=…
// (edge's listing, a peer's form), answered in listwire.
type ListRequest struct {
	DB, Version string
	Partitions  []int
	Start, End  []byte // End empty: unbounded
	Limit       int    // required, positive
	MaxBytes    int    // the page's keys and values bytes; 0: the peer's bound
	Values      bool   // values as stored
	// Peers hold every one of Partitions, "host:port", self excluded.
	// Each is tried at most once, in random order, with staged backups
	// as Get's.
	Peers []string
}

// errListTimeout is the cause of a listing's context ended by ListTimeout.
var errListTimeout = errors.New("proxy: listing timeout")

// ListResponse is the page a peer answered.
type ListResponse struct {
	Page listwire.Reply // aliases the peer's body, the caller's own
	Peer string
}

// List asks req.Peers for req's page: the first peer at once, the next
// one each StageTimeout without an answer or at once when an attempt
// fails, until one answers 200 with a page of req.Version, ListTimeout
// passes (ErrTimeout) or every peer failed (ErrNoReplica). It blocks
// until then or until ctx ends (ctx's error); attempts still running are
// cancelled and waited for before it returns.
func (p *Proxy) List(ctx context.Context, req ListRequest) (ListResponse, error) {
	if req.DB == "" || req.Version == "" || req.Limit <= 0 || len(req.Partitions) == 0 {
		return ListResponse{}, fmt.Errorf("%w: listing of db %q, version %q, limit %d, %d partitions", ErrInvalidRequest, req.DB, req.Version, req.Limit, len(req.Partitions))
	}
	if len(req.Peers) == 0 {
		return ListResponse{}, fmt.Errorf("%w: no peer holds partitions %v", ErrNoReplica, req.Partitions)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ListResponse{}, ErrClosed
	}
	p.running.Add(1) // Shutdown waits for the listing
	p.mu.Unlock()
	defer p.running.Done()

	ctx, cancel := context.WithTimeoutCause(ctx, p.cfg.ListTimeout, errListTimeout)
	defer cancel()
	stopAfter := context.AfterFunc(p.base, cancel) // Shutdown out of patience
	defer stopAfter()

	peers := append([]string(nil), req.Peers...)
	p.shuffleList(peers)
	path, query := listTarget(req)
	type result struct {
		res ListResponse
		err error
	}
	results := make(chan result, len(peers)) // never blocks a sender
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred later, run first)
	defer cancel()
	started, failed := 0, 0
	var errs []error
	start := func() {
		peer := peers[started]
		started++
		wg.Add(1)
		go func() { // owned: waited for by wg before List returns
			defer wg.Done()
			res, err := p.askList(ctx, peer, path, query, req)
			results <- result{res, err}
		}()
	}
	start()
	stage := time.NewTimer(p.cfg.StageTimeout)
	defer stage.Stop()
	for {
		select {
		case r := <-results:
			if r.err == nil {
				return r.res, nil
			}
			failed++
			errs = append(errs, r.err)
			if started < len(peers) {
				start()
				stage.Reset(p.cfg.StageTimeout)
			} else if failed == started {
				return ListResponse{}, fmt.Errorf("%w: partitions %v: %w", ErrNoReplica, req.Partitions, errors.Join(errs...))
			}
		case <-stage.C:
			if started < len(peers) {
				start()
				stage.Reset(p.cfg.StageTimeout)
			}
		case <-ctx.Done():
			if p.base.Err() != nil {
				return ListResponse{}, ErrClosed
			}
			if context.Cause(ctx) == errListTimeout {
				return ListResponse{}, fmt.Errorf("%w: no page of partitions %v within %v from %s", ErrTimeout, req.Partitions, p.cfg.ListTimeout, strings.Join(peers[:started], ", "))
			}
			return ListResponse{}, fmt.Errorf("proxy: %w", ctx.Err())
		}
	}
}

func (p *Proxy) shuffleList(peers []string) {
	if p.rnd == nil {
		rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
		return
	}
	p.randMu.Lock()
	p.rnd.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	p.randMu.Unlock()
}

// askList sends one attempt of a listing to peer.
func (p *Proxy) askList(ctx context.Context, peer, path, query string, req ListRequest) (ListResponse, error) {
	if err := checkPeer(peer); err != nil {
		return ListResponse{}, err
	}
	hreq, err := newPeerRequest(ctx, http.MethodGet, p.scheme, peer, path, query, p.getHeader, nil)
	if err != nil {
		return ListResponse{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	resp, err := p.transport.RoundTrip(hreq)
	if err != nil {
		return ListResponse{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		drain(resp.Body)
		return ListResponse{}, fmt.Errorf("%w %d from peer %s", errStatus, resp.StatusCode, peer)
	}
	body, err := readBody(resp, p.cfg.MaxBodyBytes)
	if err != nil {
		return ListResponse{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	page, err := listwire.DecodeReply(body, req.Limit)
	if err != nil {
		return ListResponse{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	if page.Version != req.Version || page.HasValues != req.Values {
		return ListResponse{}, fmt.Errorf("%w: peer %s listed version %q (values %v) for %q (values %v)", errVersion, peer, page.Version, page.HasValues, req.Version, req.Values)
	}
	return ListResponse{Page: page, Peer: peer}, nil
}

// listTarget is the path and query of a peer's listing: /<db>/ and
// proxy=<version>&parts=…&limit=…[&start=…][&end=…][&bytes=…][&values=1].
func listTarget(req ListRequest) (path, query string) {
	var b strings.Builder
	b.WriteString("proxy=")
	b.WriteString(url.QueryEscape(req.Version))
	b.WriteString("&parts=")
	for i, p := range req.Partitions {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p))
	}
	b.WriteString("&limit=")
	b.WriteString(strconv.Itoa(req.Limit))
	if len(req.Start) > 0 {
		b.WriteString("&start=")
		b.WriteString(url.QueryEscape(string(req.Start)))
	}
	if len(req.End) > 0 {
		b.WriteString("&end=")
		b.WriteString(url.QueryEscape(string(req.End)))
	}
	if req.MaxBytes > 0 {
		b.WriteString("&bytes=")
		b.WriteString(strconv.Itoa(req.MaxBytes))
	}
	if req.Values {
		b.WriteString("&values=1")
	}
	return "/" + string(appendEscaped(nil, []byte(req.DB))) + "/", b.String()
}
