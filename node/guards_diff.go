package node

import (
	"bytes"
	"container/heap"
	"errors"

	"github.com/spangledb/spangle/blocks"
)

// The merge diff of two versions of a db: their partitions are sorted
// bbolt files, so that one pass over both, in key order, finds the keys
// added, removed and changed (another value), without sorting or
// indexing anything. max_change (guards.go) counts them; the purge of a
// switch (changedKeys) purges the changed keys only.
//
// Versions of the same partitioning (count and partitioner) are compared
// partition by partition, over the partitions both hold here. Versions
// partitioned differently are compared as wholes (every partition's
// records merged in key order), which needs both held whole here;
// otherwise nothing is compared (compared 0).

// versionDiff is what differs from one version (from) to the next.
type versionDiff struct {
	from string // the version compared with
	// compared counts the partitions (or wholes) compared; base the
	// records of from in them.
	compared int
	base     int64
	// added, removed and changed count the keys the next version added,
	// removed, and holds with another value.
	added, removed, changed int64
	// keys holds the changed keys (added, removed or changed) in key
	// order per partition, while there are at most keep of them; nil
	// once there are more (overflow).
	keys     [][]byte
	overflow bool
	// complete is true when every partition of the next version held
	// here was compared: keys then lists every key that changed in them
	// (unless overflow). In a cluster the holders of a version together
	// cover all its partitions.
	complete bool
}

// fraction is the part of the compared keys that changed.
func (x *versionDiff) fraction() float64 {
	return float64(x.added+x.removed+x.changed) / float64(max(x.base, 1))
}

// note counts key as changed, keeping it while at most keep are.
func (x *versionDiff) note(key []byte, keep int) {
	if x.overflow {
		return
	}
	if len(x.keys) >= keep {
		x.keys, x.overflow = nil, true
		return
	}
	x.keys = append(x.keys, bytes.Clone(key))
}

// diffVersions compares next with old (named from), keeping up to keep
// changed keys.
func diffVersions(from string, old, next *blocks.Version, keep int) (*versionDiff, error) {
	x := &versionDiff{from: from}
	mo, mn := old.Manifest(), next.Manifest()
	err := old.View(func(ro *blocks.Reader) error {
		return next.View(func(rn *blocks.Reader) error {
			if mo.NumPartitions == mn.NumPartitions && mo.Partitioner == mn.Partitioner {
				x.complete = true
				for _, p := range mn.Partitions {
					if !ro.Holds(p) {
						x.complete = false
						continue
					}
					io, err := ro.Iter(p, blocks.Range{})
					if err != nil {
						return err
					}
					in, err := rn.Iter(p, blocks.Range{})
					if err != nil {
						return err
					}
					if err := x.merge(io, in, partitionRecords(mo, p), keep); err != nil {
						return err
					}
				}
				return nil
			}
			if len(mo.Partitions) < mo.NumPartitions || len(mn.Partitions) < mn.NumPartitions {
				return nil // partitioned differently and not held whole: not comparable here
			}
			io, err := mergedIter(ro, mo)
			if err != nil {
				return err
			}
			in, err := mergedIter(rn, mn)
			if err != nil {
				return err
			}
			x.complete = true
			return x.merge(io, in, mo.Records, keep)
		})
	})
	if err != nil {
		return nil, err
	}
	return x, nil
}

// partitionRecords is the records of partition p in m.
func partitionRecords(m *blocks.Manifest, p int) int64 {
	for _, pi := range m.PartitionInfo {
		if pi.Partition == p {
			return pi.Records
		}
	}
	return 0
}

// recordIter is a sorted stream of records: a partition's (*blocks.Iter)
// or several merged (mergeIter).
type recordIter interface {
	Next() bool
	Key() []byte
	Value() ([]byte, error)
	Err() error
}

// merge walks old and next in key order, counting what differs.
func (x *versionDiff) merge(old, next recordIter, base int64, keep int) error {
	x.compared++
	x.base += base
	okO, okN := old.Next(), next.Next()
	for okO || okN {
		c := 0
		switch {
		case !okO:
			c = 1
		case !okN:
			c = -1
		default:
			c = bytes.Compare(old.Key(), next.Key())
		}
		switch {
		case c < 0:
			x.removed++
			x.note(old.Key(), keep)
			okO = old.Next()
		case c > 0:
			x.added++
			x.note(next.Key(), keep)
			okN = next.Next()
		default:
			vo, err := old.Value()
			if err != nil {
				return err
			}
			vn, err := next.Value()
			if err != nil {
				return err
			}
			if !bytes.Equal(vo, vn) {
				x.changed++
				x.note(next.Key(), keep)
			}
			okO, okN = old.Next(), next.Next()
		}
	}
	return errors.Join(old.Err(), next.Err())
}

// mergeIter merges the partitions of a version into one stream in key
// order (a heap of their iterators).
type mergeIter struct {
	h       iterHeap
	cur     recordIter
	started bool
	err     error
}

// mergedIter is every partition m holds, merged.
func mergedIter(r *blocks.Reader, m *blocks.Manifest) (*mergeIter, error) {
	mi := &mergeIter{}
	for _, p := range m.Partitions {
		it, err := r.Iter(p, blocks.Range{})
		if err != nil {
			return nil, err
		}
		if it.Next() {
			mi.h = append(mi.h, it)
		} else if err := it.Err(); err != nil {
			return nil, err
		}
	}
	heap.Init(&mi.h)
	return mi, nil
}

func (mi *mergeIter) Next() bool {
	if mi.started && mi.cur != nil {
		// Advance the record returned last, at the heap's top.
		if mi.cur.Next() {
			heap.Fix(&mi.h, 0)
		} else {
			if err := mi.cur.Err(); err != nil {
				mi.err = err
				return false
			}
			heap.Pop(&mi.h)
		}
	}
	mi.started = true
	if len(mi.h) == 0 {
		mi.cur = nil
		return false
	}
	mi.cur = mi.h[0]
	return true
}

func (mi *mergeIter) Key() []byte            { return mi.cur.Key() }
func (mi *mergeIter) Value() ([]byte, error) { return mi.cur.Value() }
func (mi *mergeIter) Err() error             { return mi.err }

// iterHeap orders iterators, each on a record, by their keys.
type iterHeap []recordIter

func (h iterHeap) Len() int           { return len(h) }
func (h iterHeap) Less(i, j int) bool { return bytes.Compare(h[i].Key(), h[j].Key()) < 0 }
func (h iterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *iterHeap) Push(x any)        { *h = append(*h, x.(recordIter)) }
func (h *iterHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
