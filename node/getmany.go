package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/spangledb/spangle/blocks"
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
			v, err := d.pick("")
			if err != nil {
				return "", nil, err
			}
			version = v.name
		}
		err := n.getAll(ctx, d, keys, GetOptions{Version: version, Raw: opts.Raw, MaxBytes: opts.MaxBytes}, opts.Version == "", results)
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
// block; proxied ones end with ctx). mayProxy is lookup's. A key asked
// for more than once is looked up once: its later positions share the
// first one's result (and value). With opts.MaxBytes, the values of the
// reply (a value once per position asking for it) may total at most that
// many bytes: past it, ErrTooLarge, and a value read here that would pass
// it is refused before it is copied (blocks.GetLimit), so that a batch's
// retries with a larger budget do not copy values first.
func (n *Node) getAll(ctx context.Context, d *db, keys [][]byte, opts GetOptions, mayProxy bool, results []Result) error {
	var first map[string]int // key → its first position, once a key repeats
	if len(keys) > 1 {
		first = make(map[string]int, len(keys))
	}
	total := 0
	for i, k := range keys {
		if i%64 == 63 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		var res Result
		j, dup := first[string(k)]
		if dup {
			res = results[j]
		} else {
			// A value read here that would pass MaxBytes is refused
			// before it is copied.
			limit := -1
			if opts.MaxBytes > 0 {
				limit = opts.MaxBytes - total
			}
			var err error
			if res, err = n.lookup(ctx, d, k, opts, mayProxy, limit); err != nil {
				if errors.Is(err, blocks.ErrTooLarge) {
					return fmt.Errorf("%w: the values of the first %d keys exceed %d bytes; ask for fewer keys", ErrTooLarge, i+1, opts.MaxBytes)
				}
				return err
			}
			if first != nil {
				first[string(k)] = i
			}
		}
		// The reply repeats a value at every position that asks for it.
		total += len(res.Value)
		if opts.MaxBytes > 0 && total > opts.MaxBytes {
			return fmt.Errorf("%w: the values of the first %d keys exceed %d bytes; ask for fewer keys", ErrTooLarge, i+1, opts.MaxBytes)
		}
		results[i] = res
	}
	return nil
}
