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
}

// Result is the answer to a lookup. A missing key is Found == false with a
// nil error and Version set.
type Result struct {
	Value        []byte // owned by the caller
	Found        bool
	Version      string    // the version that answered
	Modified     time.Time // when this node activated Version (Last-Modified)
	ContentType  string    // from the db's config; "" means application/octet-stream
	CacheControl string    // from the db's config; "" means none
	ProxiedTo    string    // the peer that answered, when proxied
}

// Get looks key up in db. It never waits on a build or on the source: it
// reads the active version, or with opts.Version the named version. The
// caller owns key and the returned value.
func (n *Node) Get(ctx context.Context, db string, key []byte, opts GetOptions) (Result, error) {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return Result{}, ErrUnknownDB
	}
	for {
		v := d.active.Load()
		if v == nil {
			if opts.Version != "" {
				return Result{}, ErrUnknownVersion
			}
			return Result{}, ErrNoVersion
		}
		if opts.Version != "" && opts.Version != v.name {
			return Result{}, ErrUnknownVersion
		}
		res, err := v.get(key)
		if errors.Is(err, blocks.ErrClosed) {
			// The version was retired between loading it and reading it;
			// its successor is active already.
			continue
		}
		if err != nil {
			return Result{}, err
		}
		res.ContentType = d.cfg.ContentType
		res.CacheControl = d.cfg.CacheControl
		if d.decoder != nil && res.Found && !opts.Raw {
			val, err := d.decoder.Decode(ctx, res.Value)
			if err != nil {
				return Result{}, fmt.Errorf("node: decode %s value: %w", db, err)
			}
			res.Value, res.ContentType = val, d.contentType
		}
		return res, nil
	}
}

func (v *version) get(key []byte) (Result, error) {
	res := Result{Version: v.name, Modified: v.modified}
	if v.n == 0 {
		return res, nil // an empty version: every key is missing
	}
	p, alt, err := v.partitioner.Partition(key, v.n)
	if err != nil {
		return Result{}, fmt.Errorf("node: partition key: %w", err)
	}
	val, err := v.data.Get(p, key)
	if errors.Is(err, blocks.ErrNotFound) && alt != p {
		val, err = v.data.Get(alt, key)
	}
	switch {
	case err == nil:
		res.Value, res.Found = val, true
		return res, nil
	case errors.Is(err, blocks.ErrNotFound):
		return res, nil
	case errors.Is(err, blocks.ErrPartitionNotHeld):
		return Result{}, ErrPartitionNotHeld
	}
	return Result{}, err
}
