package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// GetOptions qualify a lookup.
type GetOptions struct {
	// Version, when set, asks for that version by name (a peer's
	// "?proxy=<version>" request): it is never proxied again, and a version
	// this node does not hold is ErrUnknownVersion.
	Version string
	// Raw skips the db's decoder: the value as stored, with the db's
	// configured content type (what peers ask for).
	Raw bool
	// MaxBytes, when positive, bounds the value bytes GetMany returns:
	// it stops at the first value past it with ErrTooLarge, before
	// reading more. Get ignores it.
	MaxBytes int
}

// Result is the answer to a lookup. A missing key is Found == false with a
// nil error and Version set.
type Result struct {
	// Value is shared with the answer cache (cache.go) and with other
	// lookups of the key: read it, never modify it.
	Value        []byte
	Found        bool
	Version      string    // the version that answered
	Modified     time.Time // the version's date for caches (Last-Modified): its newest source file's time
	ContentType  string    // from the db's config; "" means application/octet-stream
	CacheControl string    // from the db's config, for values
	// NegativeCacheControl is the db's Cache-Control for a missing key.
	NegativeCacheControl string
	ProxiedTo            string // the peer that answered, when proxied
	// ETag is Value's entity tag (AppendETag) as a one-element header
	// value, which http.Header and nats.Header take as it is, when the
	// answer came from the answer cache or was stored in it; nil
	// otherwise (a door that needs it hashes Value). Shared: never
	// modify it.
	ETag []string
	// Cached says the answer came from the answer cache.
	Cached bool
}

// Get looks key up in db. It never waits on a build or on the source: it
// reads the active version, or with opts.Version the named version. The
// caller owns key; the returned value is shared (Result.Value). A key
// asked again may be answered from the answer cache (cache.go).
//
// In cluster mode, a key whose partition is held elsewhere is proxied to
// its replicas (Peers.Get); a lookup naming a version (a peer's) is
// never proxied again, and may read a version built but not yet active.
func (n *Node) Get(ctx context.Context, db string, key []byte, opts GetOptions) (Result, error) {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return Result{}, ErrUnknownDB
	}
	return n.lookup(ctx, d, key, opts, opts.Version == "", -1)
}

// lookup is Get in d (read.go has the steps); mayProxy allows reading
// from peers in cluster mode even when opts.Version is set (GetMany pins
// its batch to one version). A limit of 0 or more bounds the size of a
// value read here (blocks.GetLimit): a larger one is blocks.ErrTooLarge
// before it is copied.
func (n *Node) lookup(ctx context.Context, d *db, key []byte, opts GetOptions, mayProxy bool, limit int) (Result, error) {
	kh := n.cache.hash(key)
	for {
		epoch := n.cache.epochNow()
		v, err := d.pick(opts.Version)
		if err != nil {
			return Result{}, err
		}
		if e, ok := n.cache.get(v, kh, key, opts.Raw); ok {
			return d.cached(v, e, opts.Raw), nil
		}
		r := reader{d: d, v: v}
		if mayProxy && n.clustered() {
			r.peers = n.cfg.Cluster
		}
		res, complete, err := r.get(ctx, key, limit)
		if errors.Is(err, blocks.ErrClosed) {
			// The version was retired between loading it and reading it;
			// its successor is active already.
			continue
		}
		if res, err = d.finish(ctx, v, res, err, opts.Raw); err == nil && complete {
			n.cache.put(v, kh, key, opts.Raw, &res, epoch)
		}
		return res, err
	}
}

// finish completes a read of v that did not fail with blocks.ErrClosed:
// a corrupt block marks v for repair; a result gets the db's headers and,
// unless raw, its value decoded.
func (d *db) finish(ctx context.Context, v *version, res Result, err error, raw bool) (Result, error) {
	if err != nil {
		if errors.Is(err, blocks.ErrCorrupt) {
			d.corrupted(v, err)
		}
		return Result{}, err
	}
	if d.decoder != nil && res.Found && !raw {
		val, err := d.decoder.Decode(ctx, res.Value)
		if err != nil {
			return Result{}, fmt.Errorf("node: decode %s value: %w", d.name, err)
		}
		res.Value = val
	}
	d.describe(&res, raw)
	return res, nil
}

// cached returns the Result of e, an answer of v cached by a lookup with
// raw, as finish returned it then.
func (d *db) cached(v *version, e *cacheEntry, raw bool) Result {
	res := Result{Value: e.value, Found: e.found, Version: v.name, Modified: v.lastModified(),
		ProxiedTo: e.proxiedTo, ETag: e.etag, Cached: true}
	d.describe(&res, raw)
	return res
}

// describe sets res's headers from the db's config: its content type
// (the decoder's for a value decoded, unless raw) and cache controls.
func (d *db) describe(res *Result, raw bool) {
	res.ContentType = d.cfg.ContentType
	res.CacheControl = d.cfg.CacheControl
	res.NegativeCacheControl = d.cfg.NegativeCacheControl
	if d.decoder != nil && res.Found && !raw {
		res.ContentType = d.contentType
	}
}
