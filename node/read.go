package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/spangledb/spangle/blocks"
)

// The read path. Every lookup goes through the same three steps:
//
//  1. pick: the version it reads (the active one, or the one named);
//  2. the partitions that may hold its key (version.keyPartitions): its
//     own, then its alternate for a key the partitioner places twice;
//  3. a reader reads each where it is (reader.local): from this node's
//     copy when it holds the partition, else from the peers holding it.
//
// Get and GetMany use the three; List (list.go) reads the partitions a
// listing needs (all of them, or the one a prefix maps to) with the same
// reader: the local copy or the peers per partition as reader.local
// says (the peers through Peers' RemoteLister). The decoder, the db's
// headers and the retry on a version retired under a lookup are lookup's
// (get.go), above the reader.

// pick returns the version a lookup reads: the one called name when name
// is set (active, pending or retired, whose retention timer restarts), or
// ErrUnknownVersion; else the active version, or ErrNoVersion.
func (d *db) pick(name string) (*version, error) {
	if name == "" {
		if v := d.active.Load(); v != nil {
			return v, nil
		}
		return nil, ErrNoVersion
	}
	v, retired := d.named(name)
	if v == nil {
		return nil, ErrUnknownVersion
	}
	if retired {
		v.state.used()
	}
	return v, nil
}

// named returns the active, pending or retired version called name, or
// nil, and whether it is a retired one. It does not block.
func (d *db) named(name string) (v *version, retired bool) {
	if v := d.active.Load(); v != nil && v.name == name {
		return v, false
	}
	if v := d.pending.Load(); v != nil && v.name == name {
		return v, false
	}
	if v := d.retiredNamed(name); v != nil {
		return v, true
	}
	return nil, false
}

// keyPartitions returns the partitions of v that may hold key, in the
// order to try them, as parts[:n]: the key's own partition, then its
// alternate when the partitioner gives one (plugins.Partitioner). n is 0
// for an empty version: every key is missing.
func (v *version) keyPartitions(key []byte) (parts [2]int, n int, err error) {
	if v.n == 0 {
		return parts, 0, nil
	}
	p, alt, err := v.partitioner.Partition(key, v.n)
	if err != nil {
		return parts, 0, fmt.Errorf("node: partition key: %w", err)
	}
	parts[0], n = p, 1
	if alt != p {
		parts[1], n = alt, 2
	}
	return parts, n, nil
}

// reader reads one version of a db, each partition where it is (local):
// here when this node holds it, else from peers. A reader without peers
// (a node alone, or a peer's request naming a version, which is never
// proxied again) reads only what is held here. It is a value, made per
// lookup; safe for concurrent use as its version is.
type reader struct {
	d     *db
	v     *version
	peers Peers // nil: local only
}

// local reports whether partition q is read from this node's copy; when
// it is not, it is read from the peers, or is ErrPartitionNotHeld without
// them. Partitions are only ever added to a version (healing), so a
// partition local once stays local.
func (r reader) local(q int) bool { return r.v.data.Holds(q) }

// get looks key up in its partitions, in order, and returns the first
// value found. A limit of 0 or more bounds the size of a value read here
// (blocks.GetLimit). A missing key is Found false and a nil error. When
// the key's own partition is held here but lacks it and its alternate is
// not, a local-only reader answers not found: the proxying node asks the
// alternate's holders next: that answer is not complete (complete is
// false), all others are. The caller owns key and the returned value.
func (r reader) get(ctx context.Context, key []byte, limit int) (res Result, complete bool, err error) {
	parts, n, err := r.v.keyPartitions(key)
	if err != nil {
		return Result{}, false, err
	}
	return r.getFrom(ctx, key, parts[:n], limit)
}

// getFrom is get in parts, the key's partitions in the order to try them.
func (r reader) getFrom(ctx context.Context, key []byte, parts []int, limit int) (res Result, complete bool, err error) {
	res = Result{Version: r.v.name, Modified: r.v.lastModified()}
	complete = true
	for i, q := range parts {
		val, found, peer, err := r.getIn(ctx, q, key, limit)
		switch {
		case i > 0 && r.peers == nil && errors.Is(err, ErrPartitionNotHeld):
			complete = false
			continue // another node's alternate: see above
		case err != nil:
			return Result{}, false, err
		case found:
			res.Value, res.Found, res.ProxiedTo = val, true, peer
			return res, true, nil
		}
	}
	return res, complete, nil
}

// getIn looks key up in partition q: here when local, else on the peers
// (peer names the node that answered), else ErrPartitionNotHeld. Errors
// are blocks' for a local read (blocks.ErrClosed when the version was
// closed, ErrCorrupt, ErrTooLarge), the Cluster's for a remote one.
func (r reader) getIn(ctx context.Context, q int, key []byte, limit int) (val []byte, found bool, peer string, err error) {
	if r.local(q) || r.peers == nil {
		val, err = r.v.data.GetLimit(q, key, limit)
		switch {
		case errors.Is(err, blocks.ErrNotFound):
			return nil, false, "", nil
		case errors.Is(err, blocks.ErrPartitionNotHeld):
			return nil, false, "", ErrPartitionNotHeld
		case err != nil:
			return nil, false, "", err
		}
		return val, true, "", nil
	}
	rem, err := r.peers.Get(ctx, r.d.info(r.v), q, key)
	if err != nil {
		return nil, false, "", err
	}
	return rem.Value, rem.Found, rem.Peer, nil
}
