package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Header names read from peers.
const (
	hdrVersion = "X-Spangle-Version"
	userAgent  = "spangle-proxy"
)

// attempt is the outcome of asking one peer.
type attempt struct {
	res Response
	err error
}

// fetch runs sequins' staged backup requests for req within ctx (which
// carries the Timeout deadline):
//
//  1. shuffle the peers; start an attempt on the first at once;
//  2. each StageTimeout without an answer, start one on the next peer,
//     the earlier ones still running;
//  3. when an attempt fails, start the next one at once (and restart the
//     stage clock);
//  4. the first 200 or 404 wins; the others are cancelled;
//  5. every peer failed: ErrNoReplica; the deadline passed: ErrTimeout.
//
// It waits for its attempts' goroutines before it returns.
func (p *Proxy) fetch(ctx context.Context, req Request) (Response, error) {
	peers := req.Peers // fly's own copy
	p.shuffle(peers)
	target := requestTarget(req)
	deadline, _ := ctx.Deadline()

	actx, cancel := context.WithCancel(ctx)
	results := make(chan attempt, len(peers)) // never blocks a sender
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	stage := time.NewTimer(p.cfg.StageTimeout)
	defer stage.Stop()
	next, running := 0, 0
	launch := func() {
		peer := peers[next]
		next++
		running++
		if p.cfg.OnAttempt != nil {
			p.cfg.OnAttempt(peer)
		}
		wg.Add(1)
		go func() { // owned: fetch waits for it
			defer wg.Done()
			results <- p.attempt(actx, peer, target, req.Version)
		}()
		stage.Reset(p.cfg.StageTimeout)
	}

	launch()
	var lastErr error
	for {
		select {
		case a := <-results:
			running--
			if a.err == nil {
				return a.res, nil
			}
			if ctx.Err() != nil {
				return Response{}, p.ctxErr(ctx)
			}
			lastErr = a.err
			p.log.Debug("proxy attempt failed", slog.String("db", req.DB), slog.String("version", req.Version), slog.Any("error", a.err))
			if next < len(peers) {
				launch()
			} else if running == 0 {
				return Response{}, fmt.Errorf("%w: %d peers failed, last: %w", ErrNoReplica, len(peers), lastErr)
			}
		case <-stage.C:
			// The deadline check makes "no attempt starts at or after
			// Timeout" exact, whichever of the two timers fires first.
			if next < len(peers) && time.Now().Before(deadline) {
				launch()
			}
		case <-ctx.Done():
			return Response{}, p.ctxErr(ctx)
		}
	}
}

// ctxErr is the error for a flight whose context is done.
func (p *Proxy) ctxErr(ctx context.Context) error {
	switch {
	case p.base.Err() != nil:
		return ErrClosed
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w after %v", ErrTimeout, p.cfg.Timeout)
	}
	return fmt.Errorf("proxy: %w", ctx.Err()) // abandoned by every caller
}

// attempt asks peer for target and returns its 200 or 404, or why not.
func (p *Proxy) attempt(ctx context.Context, peer, target, version string) attempt {
	res, err := p.ask(ctx, peer, target, version)
	switch {
	case err == nil:
		p.m.attempt(statusOutcome(res.Status))
	case ctx.Err() != nil:
		p.m.attempt(outcomeCanceled)
	case errors.Is(err, ErrBodyTooLarge):
		p.m.attempt(outcomeTooLarge)
	case errors.Is(err, errStatus):
		p.m.attempt(outcomeStatus)
	case errors.Is(err, errVersion):
		p.m.attempt(outcomeVersion)
	default:
		p.m.attempt(outcomeError)
	}
	return attempt{res, err}
}

var (
	errStatus  = errors.New("proxy: unexpected status")
	errVersion = errors.New("proxy: peer answered from another version")
)

func (p *Proxy) ask(ctx context.Context, peer, target, version string) (Response, error) {
	if peer == "" || strings.ContainsAny(peer, "/?#@ \t\r\n") {
		return Response{}, fmt.Errorf("proxy: invalid peer address %q", peer)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+peer+target, nil)
	if err != nil {
		return Response{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	hreq.Header["User-Agent"] = []string{userAgent}
	resp, err := p.transport.RoundTrip(hreq)
	if err != nil {
		return Response{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		drain(resp.Body)
		return Response{}, fmt.Errorf("%w %d from peer %s", errStatus, resp.StatusCode, peer)
	}
	// A peer without the version answers 501, but one that fell back to
	// another (as sequins did) must not be believed, nor cached under
	// the version asked for.
	v := resp.Header.Get(hdrVersion)
	if v != "" && v != version {
		drain(resp.Body)
		return Response{}, fmt.Errorf("%w: peer %s sent version %q for %q", errVersion, peer, v, version)
	}
	body, err := readBody(resp, p.cfg.MaxBodyBytes)
	if err != nil {
		return Response{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	return Response{
		Status:       resp.StatusCode,
		Body:         body,
		Version:      v,
		ContentType:  resp.Header.Get("Content-Type"),
		ETag:         resp.Header.Get("ETag"),
		LastModified: resp.Header.Get("Last-Modified"),
		Peer:         peer,
	}, nil
}

// readBody reads resp's body whole, failing with ErrBodyTooLarge beyond
// limit bytes.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, resp.ContentLength, limit)
	}
	if resp.ContentLength >= 0 {
		b := make([]byte, resp.ContentLength)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	}
	return b, nil
}

// drain reads a little of a body we do not want, so that a short one
// leaves its connection reusable.
func drain(body io.Reader) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
}
