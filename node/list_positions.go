package node

import (
	"container/list"
	"encoding/binary"
	"sync"

	"github.com/spangledb/spangle/blocks"
)

// listPositions keeps, between the pages of a listing, where each of its
// local partitions stood when the page ended (blocks.Position: the
// decoded block and the record in it), so that the next page, when this
// node is asked for it, continues each partition there instead of
// seeking it again and, in the s2-blocks layout, decoding again the
// block it stood in and walking that block's records up to the page's
// end. It is only a shortcut: the cursor stays stateless and complete,
// and a page whose positions are not here (another node, evicted, a
// restart) reads as before. Positions are keyed by what makes them good:
// the db, the version, and the next page's range (its Start is the
// first key after the page's last); a position also holds the version's
// contents it was read from, and blocks.Reader.Resume ignores it for any
// other. A listing's positions are taken by its next page (one page
// continues them) and put back when that page ends. Memory is bounded by
// Config.ListPositionBytes, the least recently stored dropped first.
// Safe for concurrent use.
type listPositions struct {
	max int // bytes; 0 keeps none

	mu    sync.Mutex // guards the fields below
	size  int
	byKey map[string]*list.Element // of *listPosition
	order list.List                // the least recently stored at the front
}

// listPosition is where a page left its listing's local partitions.
type listPosition struct {
	key   string
	parts []partPosition // by partition, ascending
	size  int
}

type partPosition struct {
	p   int
	pos blocks.Position
}

// listPositionOverhead is counted for each kept partition besides its
// block: the entry's bookkeeping.
const listPositionOverhead = 64

func newListPositions(maxBytes int) *listPositions {
	return &listPositions{max: maxBytes, byKey: map[string]*list.Element{}}
}

// listPositionKey is the key of a page's positions: db, version and the
// range the page reads (the next page's, for put).
func listPositionKey(db, version string, rg blocks.Range) string {
	b := make([]byte, 0, 4*binary.MaxVarintLen32+len(db)+len(version)+len(rg.Start)+len(rg.End))
	for _, f := range [][]byte{[]byte(db), []byte(version), rg.Start, rg.End} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return string(b)
}

// take removes and returns the positions stored under key; nil when
// there are none.
func (ps *listPositions) take(key string) *listPosition {
	if ps.max <= 0 {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	e := ps.byKey[key]
	if e == nil {
		return nil
	}
	lp := e.Value.(*listPosition)
	ps.removeLocked(e)
	return lp
}

// put stores lp under its key (replacing what was there) and drops the
// least recently stored positions until they fit; lp alone larger than
// the bound is not kept.
func (ps *listPositions) put(lp *listPosition) {
	lp.size = len(lp.key)
	for i := range lp.parts {
		lp.size += lp.parts[i].pos.Size() + listPositionOverhead
	}
	if ps.max <= 0 || lp.size > ps.max || len(lp.parts) == 0 {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if e := ps.byKey[lp.key]; e != nil {
		ps.removeLocked(e)
	}
	for ps.size+lp.size > ps.max {
		ps.removeLocked(ps.order.Front())
	}
	ps.byKey[lp.key] = ps.order.PushBack(lp)
	ps.size += lp.size
}

func (ps *listPositions) removeLocked(e *list.Element) {
	lp := ps.order.Remove(e).(*listPosition)
	delete(ps.byKey, lp.key)
	ps.size -= lp.size
}

// bytes is the memory the kept positions hold.
func (ps *listPositions) bytes() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.size
}

// of returns the position of partition p in lp, and true; the zero
// Position (which resumes nothing) and false when lp is nil or has none
// for p.
func (lp *listPosition) of(p int) (blocks.Position, bool) {
	if lp == nil {
		return blocks.Position{}, false
	}
	for _, pp := range lp.parts {
		if pp.p == p {
			return pp.pos, true
		}
	}
	return blocks.Position{}, false
}
