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
	"slices"
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
//
// With MaxKeys set, a switch that changed at most MaxKeys keys (added,
// removed or given another value: node.Node.ChangedKeys) purges only
// them, in batches of PurgeConfig.BatchKeys keys, one request (or command)
// each, with {paths} replaced by the batch's URL paths ("/<db>/<key>",
// the key path-escaped) separated by spaces, and {paths_regex} by a
// regular expression matching exactly those paths
// ("^(/db/k1|/db/k2)$", for a Varnish ban on req.url); the caches keep
// every other key, whose value and ETag are the same. In a cluster each
// node purges the keys of the partitions it holds, which the holders
// cover between them. A switch that changed more, or whose changed keys
// the node does not know (the first switch seen, a node that did not
// hold a partition of the new version in the old one), is purged whole,
// the hook run once with {paths} and {paths_regex} empty.
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
	// MaxKeys is the most changed keys a switch purges key by key
	// (above); more are purged whole. Default 0: always whole.
	MaxKeys int
}

// keyed reports whether h purges key by key: MaxKeys set and {paths} or
// {paths_regex} somewhere in it.
func (h PurgeHook) keyed() bool { return h.MaxKeys > 0 }

// mentionsPaths reports whether {paths} or {paths_regex} is in h.
func (h PurgeHook) mentionsPaths() bool {
	has := func(s string) bool { return strings.Contains(s, "{paths}") || strings.Contains(s, "{paths_regex}") }
	if has(h.URL) {
		return true
	}
	for _, v := range h.Headers {
		if has(v) {
			return true
		}
	}
	return slices.ContainsFunc(h.Command, has)
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
	// BatchKeys is the most keys one request (or command) of a key by
	// key purge names (PurgeHook.MaxKeys). Default 100.
	BatchKeys int
	// Logger receives a line per purge. Default nil: discard.
	Logger *slog.Logger
	// Registerer receives spangle_purges_total. Default nil: none.
	Registerer prometheus.Registerer
	// Client sends the requests. Default nil: a client of its own.
	Client *http.Client
}

// DefaultPurgeConfig returns the defaults; no hook is set.
func DefaultPurgeConfig() PurgeConfig {
	return PurgeConfig{Timeout: 5 * time.Second, Attempts: 5, Backoff: time.Second, BatchKeys: 100}
}

// MaxKeys is the largest MaxKeys of c's hooks: how many changed keys the
// node keeps for a switch (node.Config.ChangedKeys).
func (c PurgeConfig) MaxKeys() int {
	n := c.Hook.MaxKeys
	for _, h := range c.DBs {
		n = max(n, h.MaxKeys)
	}
	return n
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
	case c.BatchKeys < 1 || c.BatchKeys > maxBatchKeys:
		return fmt.Errorf("purge batch_keys %d: want 1 to %d", c.BatchKeys, maxBatchKeys)
	}
	check := func(where string, h PurgeHook) error {
		if h.URL != "" && len(h.Command) > 0 {
			return fmt.Errorf("%s: url and command are exclusive", where)
		}
		if h.URL != "" {
			u, err := url.Parse(expand(h.URL, placeholders{db: "d", version: "v", prev: "p"}, true))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%s: url %q: want http(s)://host/…", where, h.URL)
			}
		}
		switch {
		case h.MaxKeys < 0 || h.MaxKeys > maxPurgeKeys:
			return fmt.Errorf("%s: max_keys %d: want 0 (always the whole db) to %d", where, h.MaxKeys, maxPurgeKeys)
		case h.MaxKeys > 0 && !h.mentionsPaths():
			return fmt.Errorf("%s: max_keys needs {paths} or {paths_regex} in the url, a header or the command", where)
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

// HeldSource is what a Purger follows; *node.Node implements it. A
// source that also implements ChangeSource gives the changed keys of its
// switches, which hooks with MaxKeys purge key by key.
type HeldSource interface {
	Held() ([]node.HeldVersion, <-chan struct{})
}

// ChangeSource gives what a version changed against the one it replaced
// (node.Node.ChangedKeys).
type ChangeSource interface {
	ChangedKeys(db, version string) (node.Changes, bool)
}

// Bounds of the key by key purges.
const (
	maxPurgeKeys = 1 << 20 // PurgeHook.MaxKeys
	maxBatchKeys = 10000   // PurgeConfig.BatchKeys
)

// Purger runs the purge hooks at each switch of a db's active version on
// this node, in the background: one purge per db at a time, a newer
// switch cancelling the purge of an older one. A purge that still fails
// after its attempts is logged and counted; serving never waits for it.
type Purger struct {
	cfg    PurgeConfig
	src    HeldSource
	log    *slog.Logger
	purges *prometheus.CounterVec
	keys   *prometheus.CounterVec // db: keys purged key by key

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
	keys := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spangle_purge_keys_total",
		Help: "Keys purged one by one at version switches (purge hooks with max_keys: the keys a switch changed), by db.",
	}, []string{"db"})
	if cfg.Registerer != nil {
		var err error
		if purges, err = register(cfg.Registerer, purges); err != nil {
			return nil, err
		}
		if keys, err = register(cfg.Registerer, keys); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Purger{cfg: cfg, src: src, log: cfg.Logger.With("component", "purge"), purges: purges, keys: keys,
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
		p.run1(ctx, hook, placeholders{db: db, version: version, prev: prev})
	}()
}

// run1 purges the switch of ph: key by key when the hook says so and
// the source knows the keys, else whole.
func (p *Purger) run1(ctx context.Context, hook PurgeHook, ph placeholders) {
	if keys, ok := p.changedKeys(hook, ph); ok {
		start := time.Now()
		for batch := range slices.Chunk(keys, p.cfg.BatchKeys) {
			kph := ph
			kph.paths = keyPaths(ph.db, batch)
			if !p.attempts(ctx, hook, kph, len(batch)) {
				return
			}
			p.keys.WithLabelValues(ph.db).Add(float64(len(batch)))
		}
		p.log.Info("changed keys purged", "db", ph.db, "version", ph.version, "previous", ph.prev,
			"keys", len(keys), "seconds", time.Since(start).Seconds())
		return
	}
	p.attempts(ctx, hook, ph, 0)
}

// changedKeys returns the keys the switch of ph changed, when hook purges
// key by key and they are known and at most hook.MaxKeys.
func (p *Purger) changedKeys(hook PurgeHook, ph placeholders) ([][]byte, bool) {
	cs, ok := p.src.(ChangeSource)
	if !hook.keyed() || !ok || ph.prev == "" {
		return nil, false
	}
	ch, ok := cs.ChangedKeys(ph.db, ph.version)
	if !ok || ch.From != ph.prev || len(ch.Keys) > hook.MaxKeys {
		return nil, false
	}
	return ch.Keys, true
}

// keyPaths is the URL paths of keys of db.
func keyPaths(db string, keys [][]byte) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = "/" + url.PathEscape(db) + "/" + url.PathEscape(string(k))
	}
	return out
}

// attempts runs hook until it succeeds, ctx ends or the attempts run out,
// and reports whether it succeeded; keys is the keys of a key by key
// batch (0: the whole db).
func (p *Purger) attempts(ctx context.Context, hook PurgeHook, ph placeholders, keys int) bool {
	start := time.Now()
	pause := backoff.New(p.cfg.Backoff, 30*time.Second)
	db, version := ph.db, ph.version
	for attempt := 1; ; attempt++ {
		err := p.once(ctx, hook, ph)
		if err == nil {
			p.purges.WithLabelValues(db, "ok").Inc()
			p.log.Info("caches purged", "db", db, "version", version, "previous", ph.prev,
				"attempts", attempt, "seconds", time.Since(start).Seconds(), "keys", keys)
			return true
		}
		if ctx.Err() != nil {
			return false // a newer switch of the db, or Stop
		}
		if attempt == p.cfg.Attempts {
			p.purges.WithLabelValues(db, "failed").Inc()
			p.log.Error("purging the caches failed; they serve the previous version until their max-age",
				"db", db, "version", version, "attempts", attempt, "err", err)
			return false
		}
		p.purges.WithLabelValues(db, "retried").Inc()
		wait := pause.Next()
		p.log.Warn("purge failed; retrying", "db", db, "version", version, "attempt", attempt, "in", wait, "err", err)
		if !backoff.Sleep(ctx, wait) {
			return false
		}
	}
}

// once makes one attempt of hook.
func (p *Purger) once(ctx context.Context, hook PurgeHook, ph placeholders) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if len(hook.Command) > 0 {
		args := make([]string, len(hook.Command))
		for i, a := range hook.Command {
			args[i] = expand(a, ph, false)
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
	req, err := http.NewRequestWithContext(ctx, method, expand(hook.URL, ph, true), nil)
	if err != nil {
		return err
	}
	for k, v := range hook.Headers {
		req.Header.Set(k, expand(v, ph, false))
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

// placeholders are what a hook's {…} are replaced with.
type placeholders struct {
	db, version, prev string
	paths             []string // a key by key batch's URL paths; nil: the whole db
}

// expand replaces the placeholders of s.
func expand(s string, ph placeholders, inURL bool) string {
	if !strings.Contains(s, "{") {
		return s
	}
	esc := func(v string) string { return v }
	if inURL {
		esc = url.PathEscape
	}
	var re string
	if len(ph.paths) > 0 {
		quoted := make([]string, len(ph.paths))
		for i, p := range ph.paths {
			quoted[i] = quoteRegex(p)
		}
		re = "^(" + strings.Join(quoted, "|") + ")$"
	}
	return strings.NewReplacer("{db}", esc(ph.db), "{version}", esc(ph.version), "{previous}", esc(ph.prev),
		"{paths_regex}", esc(re), "{paths}", esc(strings.Join(ph.paths, " "))).Replace(s)
}

// quoteRegex quotes s for a regular expression of any dialect (RE2,
// PCRE: a Varnish ban): every byte but letters, digits and "/%-_~" as
// \xHH, so that nothing in a key (a space, "&&", a quote) can end the
// expression or the ban it is part of.
func quoteRegex(s string) string {
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("/%-_~", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02X`, c)
		}
	}
	return b.String()
}

// tailString returns the end of s, at most n bytes.
func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
