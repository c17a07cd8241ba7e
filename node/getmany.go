package node

import (
	"context"
	"errors"
)

// getManyAttempts bounds how often GetMany starts over when the version it
// reads is retired under it (each retirement needs a whole build, so more
// than one in a batch is rare).
const getManyAttempts = 4

// GetMany looks keys up in db, all in one version, and returns that
// version's name and one Result per key, in the order of keys (a key
// given twice is answered twice). Without opts.Version it reads the db's
// active version when it starts; if that version is retired during the
// batch, the batch starts over on its successor, so an answer never mixes
// versions. With opts.Version it reads that version only, as Get does;
// the other options apply to every key.
//
// Each key goes through Get pinned to the chosen version, so that a
// value is found, decoded and described exactly as Get would; errors are
// Get's, for the whole batch. It never waits on a build or on the source.
// The caller owns keys and the returned values.
func (n *Node) GetMany(ctx context.Context, db string, keys [][]byte, opts GetOptions) (string, []Result, error) {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return "", nil, ErrUnknownDB
	}
	results := make([]Result, len(keys))
	for attempt := 1; ; attempt++ {
		version := opts.Version
		if version == "" {
			v := d.active.Load()
			if v == nil {
				return "", nil, ErrNoVersion
			}
			version = v.name
		}
		err := n.getAll(ctx, db, keys, GetOptions{Version: version, Raw: opts.Raw}, opts.Version == "", results)
		if err == nil {
			return version, results, nil
		}
		if opts.Version != "" || !errors.Is(err, ErrUnknownVersion) || attempt == getManyAttempts {
			return "", nil, err
		}
		clear(results)
	}
}

// getAll fills results with the lookups of keys, stopping at the first
// error or when ctx ends (checked every 64 keys: local lookups do not
// block; proxied ones end with ctx). mayProxy is lookup's.
func (n *Node) getAll(ctx context.Context, db string, keys [][]byte, opts GetOptions, mayProxy bool, results []Result) error {
	for i, k := range keys {
		if i%64 == 63 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		res, err := n.lookup(ctx, db, k, opts, mayProxy)
		if err != nil {
			return err
		}
		results[i] = res
	}
	return nil
}
