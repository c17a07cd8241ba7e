package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// PeerFiles is what a node needs of its cluster to copy built partition
// files from peers instead of building them from the source (issue 35):
// who holds which partition, and the files (the peers' doors, edge's
// ?partfile=). node/cluster's Cluster implements it; a Cluster without it
// builds every version from the source.
type PeerFiles interface {
	// FileHolders returns, by partition, the addresses of the other live
	// nodes holding v's partitions.
	FileHolders(v VersionInfo) map[int][]string
	// PeerManifest returns peer's manifest of db's version.
	PeerManifest(ctx context.Context, peer, db, version string) (*blocks.Manifest, error)
	// PeerFile returns partition p's file of db's version from peer, from
	// byte off on, with the checksum the peer states and the file's
	// total size. The caller closes the body.
	PeerFile(ctx context.Context, peer, db, version string, p int, off int64) (io.ReadCloser, string, int64, error)
}

// errNoHolder: some partition to load has no holder among the peers, or
// none of them could give it; the version is built from the source.
var errNoHolder = errors.New("node: no peer holds the partitions")

// ErrPeerBusy: the peer is sending peer_copy_concurrency partition files
// already (503); asked again a second later (busyRetry).
var ErrPeerBusy = errors.New("node: peer busy sending partition files")

// busyRetry is the pause before a busy peer is asked again: the
// Retry-After its door sends.
const busyRetry = time.Second

// sleepCtx waits d, or less when ctx ends first; it reports whether d
// passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Results of spangle_peer_copy_bytes_total.
const (
	copyOK       = "ok"       // in files that matched the manifest, and are served
	copyMismatch = "mismatch" // in files that did not: discarded, refetched elsewhere
	copyDropped  = "dropped"  // of an interrupted copy that could not be resumed
)

// copyFromPeers makes version name of d, partitions parts, from copies of
// the files peers built (peerFetch). errNoHolder when a partition has no
// holder or none could give it: the caller builds from the source.
func (d *db) copyFromPeers(ctx context.Context, name string, n int, parts []int) (*blocks.Version, error) {
	return d.copyFrom(ctx, name, n, parts, nil, false)
}

// copyFrom is copyFromPeers from holders (by partition), or from the
// view's when nil. With partial it gives up per partition: it copies
// the partitions of parts that have a holder and returns the version
// of those it could copy (errNoHolder when none), the caller building
// the others from the source (buildRest).
func (d *db) copyFrom(ctx context.Context, name string, n int, parts []int, holders map[int][]string, partial bool) (*blocks.Version, error) {
	if holders == nil {
		holders = d.holders(name, n)
	}
	if partial {
		parts = withHolder(parts, holders)
	}
	from, fetch, err := d.peerFetch(ctx, name, n, parts, holders)
	if err != nil {
		return nil, err
	}
	bv, err := d.node.store.Import(ctx, blocks.ImportSpec{DB: d.name, Version: name, From: from, Partitions: parts, Fetch: fetch,
		Parallel: copyParallel(holders, parts), Partial: partial})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %w", errNoHolder, err)
	}
	return bv, nil
}

// healFromPeers adds spec.Partitions to v by copying those the peers
// hold and give (AddPartitions with spec.Fetch, FetchPartial); the
// caller loads the others from the source. errNoHolder when none could
// be copied.
func (d *db) healFromPeers(ctx context.Context, v *version, spec blocks.BuildSpec) error {
	holders := d.holders(v.name, v.n)
	spec.Partitions = withHolder(spec.Partitions, holders)
	_, fetch, err := d.peerFetch(ctx, v.name, v.n, spec.Partitions, holders)
	if err != nil {
		return err
	}
	spec.Fetch, spec.FetchParallel, spec.FetchPartial = fetch, copyParallel(holders, spec.Partitions), true
	return d.node.store.AddPartitions(ctx, v.data, spec)
}

// holders returns, by partition, the other nodes holding version name
// (of n partitions) as the view says (PeerFiles.FileHolders); nil
// without PeerFiles.
func (d *db) holders(name string, n int) map[int][]string {
	pf, ok := d.node.cfg.Cluster.(PeerFiles)
	if !ok || !d.node.clustered() {
		return nil
	}
	return pf.FileHolders(VersionInfo{DB: d.name, Version: name, NumPartitions: n, Partitioner: d.partitioner.Identity()})
}

// maxCopyParallel bounds the files a node copies at once.
const maxCopyParallel = 8

// copyParallel is how many files to copy at once: two per peer holding
// some of parts, at most maxCopyParallel. A copy takes one file at a
// time from each peer (peerSlots); the second slot has the peer's next
// file ready for when the first is done. Each peer bounds what it sends
// with its own peer_copy_concurrency and peer_copy_bandwidth.
func copyParallel(holders map[int][]string, parts []int) int {
	peers := map[string]bool{}
	for _, p := range parts {
		for _, h := range holders[p] {
			peers[h] = true
		}
	}
	return min(max(2*len(peers), 1), maxCopyParallel)
}

// peerFetch returns a manifest of version name from a holder and the
// Fetch (blocks.ImportSpec, BuildSpec) that copies partitions parts from
// the peers holding them: each checked against the manifest of the peer
// it came from as it arrives, a mismatch refetched from another holder,
// an interrupted copy resumed from the next holder (from where it
// stopped, when that holder's file has the same checksum). errNoHolder
// when a partition has no holder, or no holder gives its manifest.
// holders are the peers by partition.
func (d *db) peerFetch(ctx context.Context, name string, n int, parts []int, holders map[int][]string) (*blocks.Manifest, func(context.Context, int, *os.File) (blocks.PartitionInfo, error), error) {
	nd := d.node
	pf, ok := nd.cfg.Cluster.(PeerFiles)
	if !ok || !nd.clustered() || len(parts) == 0 {
		return nil, nil, errNoHolder
	}

	for _, p := range parts {
		if len(holders[p]) == 0 {
			return nil, nil, errNoHolder
		}
	}
	var mu sync.Mutex                          // guards manifests
	manifests := map[string]*blocks.Manifest{} // by peer; nil: it failed
	manifest := func(ctx context.Context, peer string) *blocks.Manifest {
		mu.Lock()
		defer mu.Unlock()
		m, ok := manifests[peer]
		if !ok {
			var err error
			if m, err = pf.PeerManifest(ctx, peer, d.name, name); err != nil {
				nd.log.Warn("peer copy: manifest", "db", d.name, "version", name, "peer", peer, "err", err)
				m = nil
			} else if m.NumPartitions != n || m.Partitioner != d.partitioner.Identity() {
				nd.log.Warn("peer copy: manifest differs", "db", d.name, "version", name, "peer", peer,
					"partitions", m.NumPartitions, "partitioner", m.Partitioner)
				m = nil
			}
			manifests[peer] = m
		}
		return m
	}
	var from *blocks.Manifest
	for _, p := range parts {
		for _, peer := range holders[p] {
			if from == nil {
				from = manifest(ctx, peer)
			}
		}
	}
	if from == nil {
		return nil, nil, errNoHolder
	}
	copied := nd.metrics.peerCopy
	var busyWait time.Duration // how long all holders of a file may stay busy
	if bo, ok := nd.cfg.Cluster.(BuildOnce); ok {
		busyWait = bo.PeerWait()
	}
	var slots peerSlots // one file at a time from each peer
	fetch := func(ctx context.Context, p int, f *os.File) (blocks.PartitionInfo, error) {
		// Holders in turn, from the p-th on: copies spread over them.
		k := p % len(holders[p])
		peers := append(slices.Clone(holders[p][k:]), holders[p][:k]...)
		c := &fileCopy{f: f}
		var last error = errNoHolder
		var giveUp time.Time
		for {
			busy := false
			for _, peer := range slots.freeFirst(peers) {
				m := manifest(ctx, peer)
				if m == nil {
					continue
				}
				i, ok := slices.BinarySearch(m.Partitions, p)
				if !ok || m.PartitionInfo[i].FileChecksum == "" || m.PartitionInfo[i].StoredBytes <= 0 {
					continue
				}
				pi := m.PartitionInfo[i]
				before := c.resumed
				if !slots.take(ctx, peer) {
					return pi, ctx.Err()
				}
				err := c.from(ctx, pf, nd.cfg.DataDir, peer, d.name, name, pi)
				slots.give(peer)
				if c.resumed > before {
					nd.metrics.peerCopyResumed.WithLabelValues(d.name).Inc()
				}
				switch {
				case err == nil:
					copied.WithLabelValues(d.name, copyOK).Add(float64(c.sum.Size()))
					return pi, nil
				case errors.Is(err, blocks.ErrCorrupt):
					copied.WithLabelValues(d.name, copyMismatch).Add(float64(c.sum.Size()))
					nd.metrics.peerCopyMismatch.WithLabelValues(d.name).Inc()
					c.reset()
				case ctx.Err() != nil:
					return pi, ctx.Err()
				case errors.Is(err, ErrPeerBusy):
					busy = true
				}
				nd.log.Warn("peer copy: partition failed, next holder", "db", d.name, "version", name,
					"partition", p, "peer", peer, "err", err)
				last = err
			}
			// A busy holder (peer_copy_concurrency files being sent) is
			// asked again, a second apart, for up to busyWait.
			if giveUp.IsZero() {
				giveUp = time.Now().Add(busyWait)
			}
			if !busy || !time.Now().Before(giveUp) || !sleepCtx(ctx, busyRetry) {
				break
			}
		}
		if ctx.Err() != nil {
			return blocks.PartitionInfo{}, ctx.Err()
		}
		if c.sum != nil {
			copied.WithLabelValues(d.name, copyDropped).Add(float64(c.sum.Size()))
		}
		return blocks.PartitionInfo{}, fmt.Errorf("%w: partition %d: %w", errNoHolder, p, last)
	}
	return from, fetch, nil
}

// fileCopy is one partition file being copied, possibly from several
// holders in turn.
type fileCopy struct {
	f   *os.File
	sum *blocks.FileSum // of the bytes in f; nil before the first
	// want is the checksum sum checks against: the holder's a resumed
	// copy continues from must state the same.
	want string
	// resumed counts the copies continued from where another stopped.
	resumed int
}

// reset empties the file: what it holds is not to be resumed.
func (c *fileCopy) reset() {
	c.sum, c.want = nil, ""
	_ = c.f.Truncate(0)
}

// Write writes b to the file where the bytes checked so far end, and
// checks what was written.
func (c *fileCopy) Write(b []byte) (int, error) {
	n, err := c.f.WriteAt(b, c.sum.Size())
	_, _ = c.sum.Write(b[:n])
	return n, err
}

// from copies pi's file from peer into c.f, resuming where the previous
// holder stopped when peer's file has the same checksum, and checks it:
// an error wrapping blocks.ErrCorrupt when the bytes do not match.
func (c *fileCopy) from(ctx context.Context, pf PeerFiles, dataDir, peer, db, version string, pi blocks.PartitionInfo) error {
	if c.sum != nil && c.want != pi.FileChecksum {
		c.reset()
	}
	if c.sum == nil {
		sum, err := blocks.NewFileSum(pi.FileChecksum)
		if err != nil {
			return err
		}
		c.sum, c.want = sum, pi.FileChecksum
	}
	off := c.sum.Size()
	body, stated, size, err := pf.PeerFile(ctx, peer, db, version, pi.Partition, off)
	if err != nil {
		return err
	}
	defer body.Close()
	if off > 0 {
		c.resumed++
	}
	if free, err := blocks.FreeBytes(dataDir); err == nil && size-off > free {
		// A peer's manifest is not trusted to size the disk.
		return fmt.Errorf("peer %s: partition %d: %d bytes to copy, %d free on the data dir's disk", peer, pi.Partition, size-off, free)
	}
	if stated != pi.FileChecksum || size != pi.StoredBytes {
		// The peer's file changed since its manifest was read (a repair).
		return fmt.Errorf("peer %s: partition %d: checksum %q, %d bytes; the manifest says %q, %d",
			peer, pi.Partition, stated, size, pi.FileChecksum, pi.StoredBytes)
	}
	if _, err := io.Copy(c, io.LimitReader(body, size-c.sum.Size())); err != nil {
		return err
	}
	if c.sum.Size() != size {
		return fmt.Errorf("peer %s: partition %d: %d of %d bytes", peer, pi.Partition, c.sum.Size(), size)
	}
	return c.sum.Check()
}

// countingReader counts the bytes read from the source into a counter.
type countingReader struct {
	io.ReadCloser
	c interface{ Add(float64) }
}

func (r countingReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.c.Add(float64(n))
	return n, err
}
