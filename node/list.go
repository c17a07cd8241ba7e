package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// ListOptions qualify a listing: which keys (a prefix, a range, or both:
// their intersection), how many, from where.
type ListOptions struct {
	// Prefix keeps the keys starting with it; empty: all.
	Prefix []byte
	// Start and End bound the keys: from Start (included) to End
	// (excluded); empty: unbounded.
	Start, End []byte
	// Limit is the most keys of the page: required, positive. The door
	// bounds it (edge's MaxListKeys).
	Limit int
	// MaxBytes, when positive, bounds the page's keys and values bytes:
	// the page stops before the record that would pass it (a first
	// record larger than it alone is ErrTooLarge).
	MaxBytes int
	// Values lists the values too, decoded as Get decodes them (unless
	// Raw).
	Values bool
	// Raw skips the db's decoder, as GetOptions.Raw.
	Raw bool
	// Cursor continues a listing where the page that returned it ended,
	// in the same version. Untrusted: ErrBadCursor when no node of the
	// cluster made it for db, ErrVersionGone when its version is no
	// longer held.
	Cursor string

	// Version and Partitions make a peer's page: that version only
	// (ErrUnknownVersion when not held here), those partitions only
	// (ErrPartitionNotHeld for one not held here), never asked of other
	// nodes, and no cursor: More says whether keys follow the page's
	// last in those partitions. Partitions without Version are ignored.
	Version    string
	Partitions []int
}

// ListPage is one page of a listing.
type ListPage struct {
	Version string
	// Keys are in bytewise order, each once; Values, with
	// ListOptions.Values, are theirs (same length). Owned by the caller.
	Keys, Values [][]byte
	// Cursor continues the listing; "" on its last page (and on a peer's
	// page).
	Cursor string
	// More reports keys after the last of the page (Cursor is set for a
	// client's listing).
	More bool
	// Modified, ContentType (of the values) and CacheControl are the
	// version's and the db's, as for Get.
	Modified     time.Time
	ContentType  string
	CacheControl string
}

// List returns a page of db's keys in bytewise order: those of opts'
// prefix and range, at most opts.Limit keys and opts.MaxBytes bytes, from
// the db's active version or, with a cursor, the version of its first
// page. It merges the partitions' ordered keys (a k-way merge); a prefix
// that the db's partitioner places in one partition
// (plugins.PrefixPartitioner) reads that partition only. In cluster mode
// the partitions held elsewhere are asked of their holders
// (ListRemote), before the local ones are read; a partition no holder
// answered for fails the page (an error naming it), never a short page.
// It never waits on a build or on the source. The caller owns opts' slices
// and the page.
func (n *Node) List(ctx context.Context, db string, opts ListOptions) (ListPage, error) {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return ListPage{}, ErrUnknownDB
	}
	switch {
	case opts.Limit <= 0:
		return ListPage{}, fmt.Errorf("%w: limit %d is not positive", ErrBadListing, opts.Limit)
	case len(opts.Prefix) > MaxListKeyLen, len(opts.Start) > MaxListKeyLen, len(opts.End) > MaxListKeyLen:
		return ListPage{}, fmt.Errorf("%w: a prefix, start or end longer than %d bytes, the longest key", ErrBadListing, MaxListKeyLen)
	}
	peer := opts.Version != ""
	pinned := opts.Version
	var after []byte
	if opts.Cursor != "" && !peer {
		c, err := decodeCursor(opts.Cursor, n.cursorKey)
		if err != nil {
			return ListPage{}, err
		}
		if c.db != db {
			return ListPage{}, fmt.Errorf("%w: the cursor lists db %q, not %q", ErrBadListing, c.db, db)
		}
		pinned, after = c.version, c.after
	}
	rg := listRange(opts.Prefix, opts.Start, opts.End, after)
	for {
		v, err := d.pick(pinned)
		switch {
		case errors.Is(err, ErrUnknownVersion) && !peer:
			// Gone here; other nodes may still hold it (a cluster keeps a
			// replaced version for peers): read it all from them.
			if n.clustered() {
				if info, ok := n.cfg.Cluster.RemoteVersion(db, pinned); ok {
					page, err := n.listElsewhere(ctx, d, n.cfg.Cluster, info, rg, opts)
					if err != nil {
						return ListPage{}, err
					}
					if page.More && len(page.Keys) > 0 {
						page.Cursor = encodeCursor(cursor{db: db, version: pinned, after: page.Keys[len(page.Keys)-1]}, n.cursorKey)
					}
					return page, nil
				}
			}
			return ListPage{}, fmt.Errorf("%w: %s version %s", ErrVersionGone, db, pinned)
		case err != nil:
			return ListPage{}, err
		}
		r := reader{d: d, v: v}
		if !peer && n.clustered() {
			r.peers = n.cfg.Cluster
		}
		page, err := r.list(ctx, rg, opts)
		if errors.Is(err, blocks.ErrClosed) {
			if pinned != "" {
				if peer {
					return ListPage{}, ErrUnknownVersion
				}
				return ListPage{}, fmt.Errorf("%w: %s version %s", ErrVersionGone, db, pinned)
			}
			continue // retired meanwhile: its successor is active
		}
		if err != nil {
			if errors.Is(err, blocks.ErrCorrupt) {
				d.corrupted(v, err)
			}
			return ListPage{}, err
		}
		if page.More && !peer && len(page.Keys) > 0 {
			page.Cursor = encodeCursor(cursor{db: db, version: v.name, after: page.Keys[len(page.Keys)-1]}, n.cursorKey)
		}
		return page, nil
	}
}

// listRange is the range of keys a listing reads: the intersection of
// the prefix's and [start, end), after the key a cursor names. An empty
// End is unbounded.
func listRange(prefix, start, end, after []byte) blocks.Range {
	rg := blocks.Range{Start: start, End: end}
	if bytes.Compare(prefix, rg.Start) > 0 {
		rg.Start = prefix
	}
	if pe := prefixEnd(prefix); pe != nil && (len(rg.End) == 0 || bytes.Compare(pe, rg.End) < 0) {
		rg.End = pe
	}
	if after != nil {
		next := append(append(make([]byte, 0, len(after)+1), after...), 0) // the first key after it
		if bytes.Compare(next, rg.Start) > 0 {
			rg.Start = next
		}
	}
	return rg
}

// prefixEnd returns the first key after every key starting with prefix,
// nil when there is none (an empty prefix, or one of 0xff bytes only).
func prefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := append([]byte(nil), prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}

// emptyRange reports whether rg holds no key.
func emptyRange(rg blocks.Range) bool {
	return len(rg.End) > 0 && bytes.Compare(rg.Start, rg.End) >= 0
}

// list lists r's version: the partitions read from peers first (their
// pages are in memory before any local read transaction opens), then a
// merge of those pages with the local partitions' iterators.
func (r reader) list(ctx context.Context, rg blocks.Range, opts ListOptions) (ListPage, error) {
	d, v := r.d, r.v
	page := ListPage{Version: v.name, Modified: v.lastModified(), ContentType: d.cfg.ContentType, CacheControl: d.cfg.CacheControl}
	if opts.Values && d.decoder != nil && !opts.Raw {
		page.ContentType = d.contentType
	}
	if v.n == 0 || emptyRange(rg) {
		return page, nil
	}
	parts, err := v.listPartitions(opts)
	if err != nil {
		return ListPage{}, err
	}
	var local, remote []int
	for _, p := range parts {
		switch {
		case r.local(p):
			local = append(local, p)
		case r.peers == nil:
			return ListPage{}, fmt.Errorf("%w: %s/%s partition %d", ErrPartitionNotHeld, d.name, v.name, p)
		default:
			remote = append(remote, p)
		}
	}
	d.node.metrics.listPartitions.WithLabelValues("local").Add(float64(len(local)))
	d.node.metrics.listPartitions.WithLabelValues("remote").Add(float64(len(remote)))
	m := &listMerge{limit: opts.Limit, maxBytes: opts.MaxBytes, values: opts.Values}
	if len(remote) > 0 {
		pages, err := r.peers.ListRemote(ctx, d.info(v), remote, RemoteListRequest{
			Start: rg.Start, End: rg.End, Limit: opts.Limit, MaxBytes: opts.MaxBytes, Values: opts.Values,
		})
		if err != nil {
			return ListPage{}, err
		}
		for i := range pages {
			m.addRemote(&pages[i])
		}
	}
	err = v.data.View(func(r *blocks.Reader) error {
		for _, p := range local {
			it, err := r.Iter(p, rg)
			if err != nil {
				return err
			}
			if err := m.addLocal(it); err != nil {
				return err
			}
		}
		return m.run(ctx)
	})
	if err != nil {
		return ListPage{}, err
	}
	page.Keys, page.Values, page.More = m.keys, m.vals, m.more
	if err := d.decodeListed(ctx, page.Values, opts); err != nil {
		return ListPage{}, err
	}
	return page, nil
}

// listElsewhere lists a version this node does not hold from the nodes
// that do: every partition remote, merged as list merges.
func (n *Node) listElsewhere(ctx context.Context, d *db, lister RemoteLister, info VersionInfo, rg blocks.Range, opts ListOptions) (ListPage, error) {
	page := ListPage{Version: info.Version, ContentType: d.cfg.ContentType, CacheControl: d.cfg.CacheControl}
	if opts.Values && d.decoder != nil && !opts.Raw {
		page.ContentType = d.contentType
	}
	if info.NumPartitions == 0 || emptyRange(rg) {
		return page, nil
	}
	parts := make([]int, info.NumPartitions)
	for i := range parts {
		parts[i] = i
	}
	n.metrics.listPartitions.WithLabelValues("remote").Add(float64(len(parts)))
	pages, err := lister.ListRemote(ctx, info, parts, RemoteListRequest{
		Start: rg.Start, End: rg.End, Limit: opts.Limit, MaxBytes: opts.MaxBytes, Values: opts.Values,
	})
	if err != nil {
		return ListPage{}, err
	}
	m := &listMerge{limit: opts.Limit, maxBytes: opts.MaxBytes, values: opts.Values}
	for i := range pages {
		m.addRemote(&pages[i])
	}
	if err := m.run(ctx); err != nil {
		return ListPage{}, err
	}
	page.Keys, page.Values, page.More = m.keys, m.vals, m.more
	if err := d.decodeListed(ctx, page.Values, opts); err != nil {
		return ListPage{}, err
	}
	return page, nil
}

// listPartitions returns the partitions a listing reads: a peer's, or
// the one a prefix-keeping partitioner names, or all of them.
func (v *version) listPartitions(opts ListOptions) ([]int, error) {
	if opts.Version != "" && opts.Partitions != nil {
		for _, p := range opts.Partitions {
			if p < 0 || p >= v.n {
				return nil, fmt.Errorf("%w: partition %d of %d", ErrBadListing, p, v.n)
			}
		}
		// Each partition once: a request naming one many times must not
		// open as many read transactions.
		parts := slices.Clone(opts.Partitions)
		slices.Sort(parts)
		return slices.Compact(parts), nil
	}
	if pp, ok := v.partitioner.(PrefixPartitioner); ok && len(opts.Prefix) > 0 {
		p, ok, err := pp.PrefixPartition(opts.Prefix, v.n)
		if err != nil {
			return nil, fmt.Errorf("node: partition prefix: %w", err)
		}
		if ok {
			return []int{p}, nil
		}
	}
	parts := make([]int, v.n)
	for i := range parts {
		parts[i] = i
	}
	return parts, nil
}

// PrefixPartitioner is a partitioner that can say that every key with a
// prefix is placed in one partition (package plugins: a Wasm module with
// the spangle_prefix_partition export); a prefix listing then reads that
// partition only.
type PrefixPartitioner interface {
	// PrefixPartition returns the partition in [0, n) of every key
	// starting with prefix, and true; false when such keys may be placed
	// apart.
	PrefixPartition(prefix []byte, n int) (p int, ok bool, err error)
}

// RemoteLister lists partitions of a version that other nodes hold: the
// Peers' part of a listing, with which List fans out (node/cluster
// implements it).
type RemoteLister interface {
	// ListRemote returns, for each of parts (none held here), the page
	// its holders answer for req: every partition in exactly one page. A
	// partition no holder answered for within the proxy's timeouts is an
	// error wrapping ErrProxyTimeout or ErrNoReplica and naming it.
	ListRemote(ctx context.Context, v VersionInfo, parts []int, req RemoteListRequest) ([]RemotePage, error)
	// RemoteVersion describes db's version as the other nodes holding it
	// advertise it (no partitions held here); false when none does.
	RemoteVersion(db, version string) (VersionInfo, bool)
}

// RemoteListRequest is the range and bounds of a page asked of peers.
type RemoteListRequest struct {
	Start, End []byte // End empty: unbounded
	Limit      int
	MaxBytes   int
	Values     bool // values as stored
}

// RemotePage is a peer's page of some partitions: their keys merged in
// order, More when keys follow the last one in those partitions.
type RemotePage struct {
	Partitions   []int
	Keys, Values [][]byte
	More         bool
	Peer         string
}

// listSource is one ordered input of the merge: a local partition's
// iterator, or a peer's page.
type listSource struct {
	it   *blocks.Iter // local; nil for a page
	page *RemotePage
	i    int    // the page's current record
	key  []byte // the current key
}

// next moves to the source's next key; false at its end.
func (s *listSource) next() (bool, error) {
	if s.it != nil {
		if s.it.Next() {
			s.key = s.it.Key()
			return true, nil
		}
		return false, s.it.Err()
	}
	if s.i++; s.i < len(s.page.Keys) {
		s.key = s.page.Keys[s.i]
		return true, nil
	}
	return false, nil
}

func (s *listSource) value() ([]byte, error) {
	if s.it != nil {
		return s.it.Value()
	}
	return s.page.Values[s.i], nil
}

// listMerge is the k-way merge of a page: a tournament tree of losers
// over the sources' current keys, so that taking a key and replaying its
// source costs one comparison per level (log2 of the sources), where a
// binary heap's sift costs up to two (container/heap also pays an
// interface call per comparison, and the GC's write barriers on every
// pointer swap: a profile of a whole-db listing put those above the
// comparisons themselves).
type listMerge struct {
	srcs     []*listSource
	done     []bool // the source has no key left: after every key
	tree     []int  // tree[0] the winner (smallest key); tree[1:] the losers of the matches
	limit    int
	maxBytes int
	values   bool
	// bound is the smallest last key of the peers' pages that have more
	// after it: the merge cannot go past it without asking again.
	bound []byte

	keys, vals [][]byte
	arena      []byte // the page's key and value bytes, in chunks
	more       bool
}

func (m *listMerge) addLocal(it *blocks.Iter) error {
	s := &listSource{it: it}
	ok, err := s.next()
	if ok {
		m.srcs = append(m.srcs, s)
	}
	return err
}

func (m *listMerge) addRemote(p *RemotePage) {
	if p.More && len(p.Keys) > 0 {
		if last := p.Keys[len(p.Keys)-1]; m.bound == nil || bytes.Compare(last, m.bound) < 0 {
			m.bound = last
		}
	}
	if len(p.Keys) > 0 {
		m.srcs = append(m.srcs, &listSource{page: p, key: p.Keys[0]})
	}
}

// before reports whether source a's key comes before source b's; an
// ended source comes after every other.
func (m *listMerge) before(a, b int) bool {
	if m.done[a] {
		return false
	}
	if m.done[b] {
		return true
	}
	return bytes.Compare(m.srcs[a].key, m.srcs[b].key) < 0
}

// build plays every match of the tree.
func (m *listMerge) build() {
	k := len(m.srcs)
	m.done = make([]bool, k)
	m.tree = make([]int, max(k, 1))
	winners := make([]int, 2*k)
	for i := range k {
		winners[k+i] = i
	}
	for n := k - 1; n >= 1; n-- {
		a, b := winners[2*n], winners[2*n+1]
		if m.before(b, a) {
			a, b = b, a
		}
		winners[n], m.tree[n] = a, b
	}
	if k > 1 {
		m.tree[0] = winners[1]
	}
}

// replay plays again the matches of source i, the winner, whose key
// changed (or ended).
func (m *listMerge) replay(i int) {
	w := i
	for n := (i + len(m.srcs)) / 2; n >= 1; n /= 2 {
		if m.before(m.tree[n], w) {
			m.tree[n], w = w, m.tree[n]
		}
	}
	m.tree[0] = w
}

// run merges until the page is full or the sources end. Checking ctx
// every 256 keys: local reads do not block.
func (m *listMerge) run(ctx context.Context) error {
	m.build()
	m.keys = make([][]byte, 0, min(m.limit, 1024))
	if m.values {
		m.vals = make([][]byte, 0, min(m.limit, 1024))
	}
	size := 0
	var last []byte
	for len(m.srcs) > 0 && !m.done[m.tree[0]] {
		i := m.tree[0]
		top := m.srcs[i]
		k := top.key
		switch {
		case m.bound != nil && bytes.Compare(k, m.bound) > 0:
			m.more = true
			return nil
		case last != nil && bytes.Equal(k, last):
			// A key stored in two partitions (presharded input): once.
		case len(m.keys) == m.limit:
			m.more = true
			return nil
		default:
			if len(m.keys)%256 == 255 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			var val []byte
			if m.values {
				var err error
				if val, err = top.value(); err != nil {
					return err
				}
			}
			if size += len(k) + len(val); m.maxBytes > 0 && size > m.maxBytes {
				if len(m.keys) == 0 {
					return fmt.Errorf("%w: a record of %d bytes, over the page's %d", ErrTooLarge, len(k)+len(val), m.maxBytes)
				}
				m.more = true
				return nil
			}
			last = m.keep(k)
			m.keys = append(m.keys, last)
			if m.values {
				m.vals = append(m.vals, m.keep(val))
			}
		}
		ok, err := top.next()
		if err != nil {
			return err
		}
		m.done[i] = !ok
		m.replay(i)
	}
	// Every source ended; a peer's page that has more ended at bound.
	m.more = m.bound != nil && len(m.keys) > 0
	return nil
}

// keep copies b into the page's arena: chunks of 16 KiB (a larger b gets
// its own), so that a page makes few allocations, and none of them large.
func (m *listMerge) keep(b []byte) []byte {
	const chunk = 16 << 10
	if len(b) > chunk/4 {
		return append([]byte{}, b...)
	}
	if cap(m.arena)-len(m.arena) < len(b) {
		m.arena = make([]byte, 0, chunk)
	}
	start := len(m.arena)
	m.arena = append(m.arena, b...)
	return m.arena[start:len(m.arena):len(m.arena)]
}

// decodeListed replaces a page's values by their decoded answers, in
// place, when the listing asked for values of a db with a decoder and
// not for raw ones.
func (d *db) decodeListed(ctx context.Context, values [][]byte, opts ListOptions) error {
	if !opts.Values || d.decoder == nil || opts.Raw {
		return nil
	}
	for i, val := range values {
		var err error
		if values[i], err = d.decoder.Decode(ctx, val); err != nil {
			return fmt.Errorf("node: decode %s value: %w", d.name, err)
		}
	}
	return nil
}
