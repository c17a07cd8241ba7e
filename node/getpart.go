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
// The caller owns key; the returned value is shared (Result.Value).
func (n *Node) GetPart(ctx context.Context, db, version string, p int, key []byte, opts GetOptions) (Result, error) {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return Result{}, ErrUnknownDB
	}
	opts.Version = ""
	kh := n.cache.hash(key)
	for {
		epoch := n.cache.epochNow()
		v := d.active.Load()
		if v == nil || v.name != version {
			return n.lookup(ctx, d, key, opts, true, -1)
		}
		parts, np, err := v.keyPartitions(key)
		if err != nil {
			return Result{}, err
		}
		if np > 0 && parts[0] != p && (np == 1 || parts[1] != p) {
			return Result{}, fmt.Errorf("%w: the key is in partition %d of version %s, not %d", ErrWrongPartition, parts[0], v.name, p)
		}
		if e, ok := n.cache.get(v, kh, key, opts.Raw); ok {
			return d.cached(v, e, opts.Raw), nil
		}
		res, complete, err := reader{d: d, v: v}.getPart(ctx, p, key, parts[:np])
		if errors.Is(err, blocks.ErrClosed) {
			continue // retired under us: its successor is active
		}
		if res, err = d.finish(ctx, v, res, err, opts.Raw); err == nil && complete {
			n.cache.put(v, kh, key, opts.Raw, &res, epoch)
		}
		return res, err
	}
}

// getPart reads key from partition p here (r has no peers), parts being
// the key's partitions (keyPartitions), of which p is one: p is the
// key's partition, whose read goes on to the alternate when it is held
// here too (as reader.get does), or its alternate, read alone. complete
// is reader.get's: a key missing from the alternate alone is not.
func (r reader) getPart(ctx context.Context, p int, key []byte, parts []int) (res Result, complete bool, err error) {
	switch {
	case len(parts) == 0: // an empty version: every key is missing
		return Result{Version: r.v.name, Modified: r.v.lastModified()}, true, nil
	case parts[0] == p:
		return r.getFrom(ctx, key, parts, -1)
	}
	res, _, err = r.getFrom(ctx, key, parts[1:2], -1)
	return res, res.Found, err
}
