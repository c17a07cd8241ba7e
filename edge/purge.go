package edge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/internal/backoff"
	"github.com/spangledb/spangle/node"
)

// PurgeHook tells the caches in front of a node to drop a db's entries when
// a new version of it goes active here: an HTTP request (a PURGE or BAN to
// Varnish, a CDN's purge API) or a command. In URL, header values and
// command arguments, {db}, {version} and {previous} (the version replaced;
// empty at the first switch seen) are replaced; in URL, path-escaped.
type PurgeHook struct {
	// URL receives one request per switch. Default "": no request.
	URL string
	// Method is the request's method. Default "PURGE".
	Method string
	// Headers are sent with the request.
	Headers map[string]string
	// Command, when set, is run (no shell) instead of a request; a
	// non-zero exit is a failure.
	Command []string
}

// enabled reports whether h does anything.
func (h PurgeHook) enabled() bool { return h.URL != "" || len(h.Command) > 0 }

// PurgeConfig configures a Purger. Start from DefaultPurgeConfig.
type PurgeConfig struct {
	// Hook is run for dbs without their own in DBs.
	Hook PurgeHook
	// DBs holds per-db hooks, by db name.
	DBs map[string]PurgeHook
	// Timeout bounds one attempt. Default 5s.
	Timeout time.Duration
	// Attempts bounds the tries of one purge; a failed one is retried
	// after Backoff, doubling, with jitter. Defaults 5 and 1s.
	Attempts int
	Backoff  time.Duration
	// Logger receives a line per purge. Default nil: discard.
	Logger *slog.Logger
	// Registerer receives spangle_purges_total. Default nil: none.
	Registerer prometheus.Registerer
	// Client sends the requests. Default nil: a client of its own.
	Client *http.Client
}

// DefaultPurgeConfig returns the defaults; no hook is set.
func DefaultPurgeConfig() PurgeConfig {
	return PurgeConfig{Timeout: 5 * time.Second, Attempts: 5, Backoff: time.Second}
}

// Validate reports the first problem of c.
func (c PurgeConfig) Validate() error {
	switch {
	case c.Timeout <= 0:
		return fmt.Errorf("purge timeout %v: want a positive duration", c.Timeout)
	case c.Attempts < 1 || c.Attempts > 100:
		return fmt.Errorf("purge attempts %d: want 1 to 100", c.Attempts)
	case c.Backoff <= 0:
		return fmt.Errorf("purge backoff %v: want a positive duration", c.Backoff)
	}
	check := func(where string, h PurgeHook) error {
		if h.URL != "" && len(h.Command) > 0 {
			return fmt.Errorf("%s: url and command are exclusive", where)
		}
		if h.URL != "" {
			u, err := url.Parse(expand(h.URL, "d", "v", "p", true))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%s: url %q: want http(s)://host/…", where, h.URL)
			}
		}
		if h.Method != "" && strings.ContainsAny(h.Method, " \t\r\n") {
			return fmt.Errorf("%s: method %q", where, h.Method)
		}
		for k, v := range h.Headers {
			if k == "" || strings.ContainsAny(k, ": \t\r\n") || strings.ContainsAny(v, "\r\n") {
				return fmt.Errorf("%s: header %q: %q", where, k, v)
			}
		}
		return nil
	}
	if err := check("purge", c.Hook); err != nil {
		return err
	}
	for db, h := range c.DBs {
		if err := check("dbs."+db+".purge", h); err != nil {
			return err
		}
	}
	return nil
}

// HeldSource is what a Purger follows; *node.Node implements it.
type HeldSource interface {
	Held() ([]node.HeldVersion, <-chan struct{})
}

// Purger runs the purge hooks at each switch of a db's active version on
// this node, in the background: one purge per db at a time, a newer
// switch cancelling the purge of an older one. A purge that still fails
// after its attempts is logged and counted; serving never waits for it.
type Purger struct {
	cfg    PurgeConfig
	src    HeldSource
	log    *slog.Logger
	purges *prometheus.CounterVec

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	inFlight map[string]*context.CancelFunc // by db: the purge running
}

// NewPurger validates cfg and returns a purger of src's switches; it
// starts nothing.
func NewPurger(cfg PurgeConfig, src HeldSource) (*Purger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	purges := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spangle_purges_total",
		Help: "Purge hooks run at version switches, by db and result (ok, retried, failed).",
	}, []string{"db", "result"})
	if cfg.Registerer != nil {
		var err error
		if purges, err = register(cfg.Registerer, purges); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Purger{cfg: cfg, src: src, log: cfg.Logger.With("component", "purge"), purges: purges,
		ctx: ctx, cancel: cancel, inFlight: map[string]*context.CancelFunc{}}, nil
}

// Enabled reports whether any hook is configured.
func (p *Purger) Enabled() bool {
	if p.cfg.Hook.enabled() {
		return true
	}
	for _, h := range p.cfg.DBs {
		if h.enabled() {
			return true
		}
	}
	return false
}

// Start follows the source's held versions until Stop.
func (p *Purger) Start() {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.run()
	}()
}

// Stop cancels the purges in flight and waits for them.
func (p *Purger) Stop() {
	p.cancel()
	p.wg.Wait()
}

// run purges each db whose active version changes, the first one seen
// included (the caches may hold what an earlier run of the node served).
func (p *Purger) run() {
	active := map[string]string{}
	for {
		held, changed := p.src.Held()
		for _, h := range held {
			if h.Active && active[h.DB] != h.Version {
				prev := active[h.DB]
				active[h.DB] = h.Version
				p.purge(h.DB, h.Version, prev)
			}
		}
		select {
		case <-p.ctx.Done():
			return
		case <-changed:
		}
	}
}

// purge starts the hook of db for its switch from prev to version,
// cancelling one still running for the db.
func (p *Purger) purge(db, version, prev string) {
	hook, ok := p.cfg.DBs[db]
	if !ok {
		hook = p.cfg.Hook
	}
	if !hook.enabled() {
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	mine := &cancel
	p.mu.Lock()
	if old := p.inFlight[db]; old != nil {
		(*old)()
	}
	p.inFlight[db] = mine
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			cancel()
			p.mu.Lock()
			if p.inFlight[db] == mine { // else a newer purge's
				delete(p.inFlight, db)
			}
			p.mu.Unlock()
		}()
		defer func() {
			if r := recover(); r != nil {
				p.log.Error("purge hook panicked", "db", db, "panic", r)
			}
		}()
		p.attempts(ctx, hook, db, version, prev)
	}()
}

// attempts runs hook until it succeeds, ctx ends or the attempts run out.
func (p *Purger) attempts(ctx context.Context, hook PurgeHook, db, version, prev string) {
	start := time.Now()
	pause := backoff.New(p.cfg.Backoff, 30*time.Second)
	for attempt := 1; ; attempt++ {
		err := p.once(ctx, hook, db, version, prev)
		if err == nil {
			p.purges.WithLabelValues(db, "ok").Inc()
			p.log.Info("caches purged", "db", db, "version", version, "previous", prev,
				"attempts", attempt, "seconds", time.Since(start).Seconds())
			return
		}
		if ctx.Err() != nil {
			return // a newer switch of the db, or Stop
		}
		if attempt == p.cfg.Attempts {
			p.purges.WithLabelValues(db, "failed").Inc()
			p.log.Error("purging the caches failed; they serve the previous version until their max-age",
				"db", db, "version", version, "attempts", attempt, "err", err)
			return
		}
		p.purges.WithLabelValues(db, "retried").Inc()
		wait := pause.Next()
		p.log.Warn("purge failed; retrying", "db", db, "version", version, "attempt", attempt, "in", wait, "err", err)
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}

// once makes one attempt of hook.
func (p *Purger) once(ctx context.Context, hook PurgeHook, db, version, prev string) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if len(hook.Command) > 0 {
		args := make([]string, len(hook.Command))
		for i, a := range hook.Command {
			args[i] = expand(a, db, version, prev, false)
		}
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w: %s", args[0], err, tailString(out.String(), 512))
		}
		return nil
	}
	method := hook.Method
	if method == "" {
		method = "PURGE"
	}
	req, err := http.NewRequestWithContext(ctx, method, expand(hook.URL, db, version, prev, true), nil)
	if err != nil {
		return err
	}
	for k, v := range hook.Headers {
		req.Header.Set(k, expand(v, db, version, prev, false))
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	// A 404 is what some caches answer a PURGE of nothing cached.
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("%s %s: %s: %s", method, req.URL.Redacted(), resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// expand replaces the placeholders of s.
func expand(s, db, version, prev string, inURL bool) string {
	if !strings.Contains(s, "{") {
		return s
	}
	esc := func(v string) string { return v }
	if inURL {
		esc = url.PathEscape
	}
	return strings.NewReplacer("{db}", esc(db), "{version}", esc(version), "{previous}", esc(prev)).Replace(s)
}

// tailString returns the end of s, at most n bytes.
func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
