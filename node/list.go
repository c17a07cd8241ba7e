package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
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
	m := newListMerge(opts)
	defer m.free()
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
	// The partitions continue where the listing's previous page, read
	// here, left them (list_positions.go); and where this page leaves
	// them is kept for the next.
	ps := d.node.positions
	taken := ps.take(listPositionKey(d.name, v.name, rg))
	var kept *listPosition
	err = v.data.View(func(r *blocks.Reader) error {
		its := make([]*blocks.Iter, 0, len(local))
		continued := 0
		for _, p := range local {
			pos, ok := taken.of(p)
			if ok {
				continued++
			}
			it, err := r.Resume(p, rg, pos)
			if err != nil {
				return err
			}
			its = append(its, it)
			if err := m.addLocal(it); err != nil {
				return err
			}
		}
		d.node.metrics.listContinued.Add(float64(continued))
		if err := m.run(ctx); err != nil {
			return err
		}
		// A peer's page keeps none: the page that asked for it usually
		// ends before its last key (it merges other partitions too), so
		// its next request starts elsewhere, and such positions would
		// only push out those of listings asked here.
		if !m.more || m.count() == 0 || ps.max <= 0 || opts.Version != "" {
			return nil
		}
		next := blocks.Range{Start: append(m.lastKey(), 0), End: rg.End}
		kept = &listPosition{key: listPositionKey(d.name, v.name, next)}
		if taken != nil {
			// The taken positions are in the iterators now: their slice
			// holds the kept ones.
			clear(taken.parts)
			kept.parts = taken.parts[:0]
		}
		kept.parts = slices.Grow(kept.parts, len(local))
		for i, p := range local {
			if pos, ok := its[i].Suspend(); ok {
				kept.parts = append(kept.parts, partPosition{p: p, pos: pos})
			}
		}
		return nil
	})
	if err != nil {
		return ListPage{}, err
	}
	if kept != nil {
		ps.put(kept)
	}
	d.node.metrics.listPositionBytes.Set(float64(ps.bytes()))
	page.Keys, page.Values, page.More = m.page()
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
	m := newListMerge(opts)
	defer m.free()
	for i := range pages {
		m.addRemote(&pages[i])
	}
	if err := m.run(ctx); err != nil {
		return ListPage{}, err
	}
	page.Keys, page.Values, page.More = m.page()
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
// iterator, or a peer's page. Its current key is the iterator's, not
// copied here: a write of a slice into the source, once per key, is a
// write barrier while the GC marks.
type listSource struct {
	it   *blocks.Iter // local; nil for a page
	page *RemotePage
	i    int // the page's current record
}

// key is the source's current key.
func (s *listSource) key() []byte {
	if s.it != nil {
		return s.it.Key()
	}
	return s.page.Keys[s.i]
}

// next moves to the source's next key; false at its end.
func (s *listSource) next() (bool, error) {
	if s.it != nil {
		if s.it.Next() {
			return true, nil
		}
		return false, s.it.Err()
	}
	s.i++
	return s.i < len(s.page.Keys), nil
}

func (s *listSource) value() ([]byte, error) {
	if s.it != nil {
		return s.it.Value()
	}
	return s.page.Values[s.i], nil
}

// listHead is what the merge compares of a source's current key: its
// first 16 bytes as two big-endian words, zero-padded. Words that differ
// order two keys as bytes.Compare does (a key's padding is only ever
// compared with the other key's zeros or later bytes, so a key that is a
// prefix of the other still comes first); equal words leave it to the
// keys themselves. An ended source's words are all ones and it is done.
type listHead struct {
	w0, w1 uint64
}

// headOf returns k's head. A short key's last word is loaded from its
// last 8 (or 4) bytes and shifted up past those already in the first,
// which are dropped: no copy into a padded buffer (a memmove call).
func headOf(k []byte) listHead {
	be := binary.BigEndian
	switch n := len(k); {
	case n >= 16:
		return listHead{be.Uint64(k), be.Uint64(k[8:])}
	case n >= 8:
		return listHead{be.Uint64(k), be.Uint64(k[n-8:]) << (8 * (16 - n))}
	case n >= 4:
		hi := uint64(be.Uint32(k)) << 32
		lo := uint64(be.Uint32(k[n-4:])) << (8 * (8 - n)) & 0xffffffff
		return listHead{hi | lo, 0}
	default:
		var w uint64
		for i, c := range k {
			w |= uint64(c) << (56 - 8*i)
		}
		return listHead{w, 0}
	}
}

// endedHead is the head of an ended source.
var endedHead = listHead{^uint64(0), ^uint64(0)}

// listMerge is the k-way merge of a page: a tournament tree of losers
// over the sources' current keys, so that taking a key and replaying its
// source costs one comparison per level (log2 of the sources), where a
// binary heap's sift costs up to two (container/heap also pays an
// interface call per comparison, and the GC's write barriers on every
// pointer swap: a profile of a whole-db listing put those above the
// comparisons themselves). A comparison is of the sources' heads (two
// words each, in one small array) before their keys: most keys differ in
// their first 16 bytes, and bytes.Compare is a call.
//
// The merge writes the page's bytes into buf and their ends into ends,
// which hold no pointers (no write barriers while the GC marks), and page
// makes the caller's slices of them at the end, with one allocation of
// the bytes' exact size. A merge is pooled with its slices (newListMerge,
// free): a page of a whole-db listing allocated 50 KB, of which 35 are
// the page itself.
type listMerge struct {
	srcs     []listSource
	heads    []listHead // heads[i] is srcs[i]'s current key's, endedHead once it ended
	done     []bool     // the source has no key left: after every key
	tree     []int      // tree[0] the winner (smallest key); tree[1:] the losers of the matches
	winners  []int      // build's scratch
	limit    int
	maxBytes int
	values   bool
	// bound is the smallest last key of the peers' pages that have more
	// after it: the merge cannot go past it without asking again.
	bound []byte

	buf  []byte // the page's keys (and values) bytes, in order
	ends []int  // where each key (and its value, after it) ends in buf
	more bool
}

// maxPooledListBuf bounds the page buffer a pooled merge keeps: a page
// of large values does not stay in memory after it.
const maxPooledListBuf = 1 << 20

var listMerges = sync.Pool{New: func() any { return new(listMerge) }}

// newListMerge returns an empty merge for a page of opts, from the pool.
func newListMerge(opts ListOptions) *listMerge {
	m := listMerges.Get().(*listMerge)
	m.limit, m.maxBytes, m.values = opts.Limit, opts.MaxBytes, opts.Values
	return m
}

// free returns m to the pool, keeping none of its sources' or peers'
// slices. m is not used after.
func (m *listMerge) free() {
	clear(m.srcs)
	m.srcs, m.heads, m.done, m.tree, m.winners = m.srcs[:0], m.heads[:0], m.done[:0], m.tree[:0], m.winners[:0]
	m.bound, m.more = nil, false
	m.buf, m.ends = m.buf[:0], m.ends[:0]
	if cap(m.buf) > maxPooledListBuf {
		m.buf = nil
	}
	listMerges.Put(m)
}

func (m *listMerge) addLocal(it *blocks.Iter) error {
	s := listSource{it: it}
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
		m.srcs = append(m.srcs, listSource{page: p})
	}
}

// before reports whether source a's key comes before source b's; an
// ended source comes after every other.
func (m *listMerge) before(a, b int) bool {
	ha, hb := m.heads[a], m.heads[b]
	if ha.w0 != hb.w0 {
		return ha.w0 < hb.w0
	}
	if ha.w1 != hb.w1 {
		return ha.w1 < hb.w1
	}
	return m.beforeKeys(a, b)
}

// beforeKeys is before for sources whose heads are equal.
func (m *listMerge) beforeKeys(a, b int) bool {
	if m.done[a] {
		return false
	}
	if m.done[b] {
		return true
	}
	return bytes.Compare(m.srcs[a].key(), m.srcs[b].key()) < 0
}

// build plays every match of the tree.
func (m *listMerge) build() {
	k := len(m.srcs)
	m.done = slices.Grow(m.done[:0], k)[:k]
	clear(m.done)
	m.heads = slices.Grow(m.heads[:0], k)[:k]
	for i := range m.srcs {
		m.heads[i] = headOf(m.srcs[i].key())
	}
	m.tree = slices.Grow(m.tree[:0], max(k, 1))[:max(k, 1)]
	m.tree[0] = 0 // the winner of one source (or none)
	m.winners = slices.Grow(m.winners[:0], 2*k)[:2*k]
	winners := m.winners
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
	w, hw := i, m.heads[i]
	tree, heads := m.tree, m.heads
	for n := (i + len(m.srcs)) / 2; n >= 1; n /= 2 {
		t := tree[n]
		ht := heads[t]
		var lt bool // t before w: before, with w's head kept at hand
		switch {
		case ht.w0 != hw.w0:
			lt = ht.w0 < hw.w0
		case ht.w1 != hw.w1:
			lt = ht.w1 < hw.w1
		default:
			lt = m.beforeKeys(t, w)
		}
		if lt {
			tree[n], w, hw = w, t, ht
		}
	}
	tree[0] = w
}

// count is the number of keys merged so far.
func (m *listMerge) count() int {
	if m.values {
		return len(m.ends) / 2
	}
	return len(m.ends)
}

// run merges until the page is full or the sources end. Checking ctx
// every 256 keys: local reads do not block. The page's bytes and ends
// are appended to local slices, stored in m once at the end (a slice
// stored in m per key is a write barrier while the GC marks).
func (m *listMerge) run(ctx context.Context) error {
	m.build()
	perKey := 1
	if m.values {
		perKey = 2
	}
	buf := m.buf[:0]
	ends := slices.Grow(m.ends[:0], perKey*min(m.limit, 1024))
	defer func() { m.buf, m.ends = buf, ends }()
	size, n := 0, 0              // bytes, keys
	lastStart, lastEnd := -1, -1 // the last key is buf[lastStart:lastEnd]
	lastHead := endedHead
	for len(m.srcs) > 0 && !m.done[m.tree[0]] {
		i := m.tree[0]
		top := &m.srcs[i]
		k, h := top.key(), m.heads[i]
		switch {
		case m.bound != nil && bytes.Compare(k, m.bound) > 0:
			m.more = true
			return nil
		case lastStart >= 0 && h == lastHead && bytes.Equal(k, buf[lastStart:lastEnd]):
			// A key stored in two partitions (presharded input): once.
		case n == m.limit:
			m.more = true
			return nil
		default:
			if n%256 == 255 {
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
				if n == 0 {
					return fmt.Errorf("%w: a record of %d bytes, over the page's %d", ErrTooLarge, len(k)+len(val), m.maxBytes)
				}
				m.more = true
				return nil
			}
			lastStart, lastHead = len(buf), h
			buf = append(buf, k...)
			lastEnd = len(buf)
			ends = append(ends, lastEnd)
			if m.values {
				buf = append(buf, val...)
				ends = append(ends, len(buf))
			}
			n++
		}
		ok, err := top.next()
		if err != nil {
			return err
		}
		if ok {
			m.heads[i] = headOf(top.key())
		} else {
			m.done[i], m.heads[i] = true, endedHead
		}
		m.replay(i)
	}
	// Every source ended; a peer's page that has more ended at bound.
	m.more = m.bound != nil && n > 0
	return nil
}

// lastKey returns a copy of the last key merged; there must be one.
func (m *listMerge) lastKey() []byte {
	perKey := 1
	if m.values {
		perKey = 2
	}
	n := len(m.ends) - perKey
	start := 0
	if n > 0 {
		start = m.ends[n-1]
	}
	return bytes.Clone(m.buf[start:m.ends[n]])
}

// page returns the merged keys and values (nil without
// ListOptions.Values), which the caller owns, and whether keys follow.
// The bytes are one allocation, each key and value capped at its end.
func (m *listMerge) page() (keys, vals [][]byte, more bool) {
	arena := make([]byte, len(m.buf))
	copy(arena, m.buf)
	n := m.count()
	keys = make([][]byte, n)
	if m.values {
		vals = make([][]byte, n)
	}
	start := 0
	for i, j := 0, 0; i < n; i++ {
		end := m.ends[j]
		keys[i] = arena[start:end:end]
		start, j = end, j+1
		if m.values {
			end = m.ends[j]
			vals[i] = arena[start:end:end]
			start, j = end, j+1
		}
	}
	return keys, vals, m.more
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
