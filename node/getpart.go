package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/spangledb/spangle/blocks"
)

// GetPart answers a lookup on a partition's NATS subject,
// spangle.<cluster>.part.<db>.<version>.<p>, which reaches the nodes
// holding partition p of that version. Such a request carries no peer
// credentials, so it reads only what a plain lookup reads (Get without a
// version, HTTP without ?proxy=): the db's active version (the pinned one
// under a pin).
//
//   - version is the active version here: the key is read here only
//     (never proxied) if p is its partition or its alternate under that
//     version, else ErrWrongPartition.
//   - version is not active here (not yet activated, a pending build;
//     retired since the client routed the request; never held): it is
//     answered as Get without a version answers, from the active version,
//     which Result.Version names. A version that is not active is never
//     read: only peers may (?proxy= with the peer token).
//
// The caller owns key and the returned value.
func (n *Node) GetPart(ctx context.Context, db, version string, p int, key []byte, opts GetOptions) (Result, error) {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return Result{}, ErrUnknownDB
	}
	opts.Version = ""
	for {
		v := d.active.Load()
		if v == nil || v.name != version {
			return n.lookup(ctx, d, key, opts, true, -1)
		}
		res, err := reader{d: d, v: v}.getPart(ctx, p, key)
		if errors.Is(err, blocks.ErrClosed) {
			continue // retired under us: its successor is active
		}
		return d.finish(ctx, v, res, err, opts.Raw)
	}
}

// getPart reads key from partition p here (r has no peers): p must be
// the key's partition, whose read goes on to the alternate when it is
// held here too (as reader.get does), or its alternate, read alone.
func (r reader) getPart(ctx context.Context, p int, key []byte) (Result, error) {
	parts, n, err := r.v.keyPartitions(key)
	switch {
	case err != nil:
		return Result{}, err
	case n == 0: // an empty version: every key is missing
		return Result{Version: r.v.name, Modified: r.v.lastModified()}, nil
	case parts[0] == p:
		return r.getFrom(ctx, key, parts[:n], -1)
	case n == 2 && parts[1] == p:
		return r.getFrom(ctx, key, parts[1:2], -1)
	}
	return Result{}, fmt.Errorf("%w: the key is in partition %d of version %s, not %d", ErrWrongPartition, parts[0], r.v.name, p)
}
