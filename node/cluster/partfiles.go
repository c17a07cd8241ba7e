package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/proxy"
)

var _ node.PeerFiles = (*Cluster)(nil)

// maxManifestBytes bounds a peer's manifest (a few hundred bytes a
// partition and a source file).
const maxManifestBytes = 16 << 20

// partClient is the HTTP client of peer copies: its own transport (a copy
// is long; lookups keep the proxy's connections), HTTPS when the doors
// speak it, the peer token.
type partClient struct {
	once      sync.Once
	transport *http.Transport
	scheme    string
}

func (c *Cluster) partClient() *partClient {
	pc := &c.parts
	pc.once.Do(func() { pc.transport, pc.scheme = proxy.PeerTransport(c.cfg.PeerTLS) })
	return pc
}

// close closes the idle connections of peer copies.
func (pc *partClient) close() {
	pc.once.Do(func() {})
	if pc.transport != nil {
		pc.transport.CloseIdleConnections()
	}
}

// FileHolders returns, by partition, the addresses of the other live
// nodes holding v's partitions (kvwatch's partitions entries), as the
// lookups' routes see them.
func (c *Cluster) FileHolders(v node.VersionInfo) map[int][]string {
	out := map[int][]string{}
	if c.n == nil {
		return out
	}
	self := c.n.ID()
	for _, h := range c.snapshot().Holders(v.DB, v.Version) {
		if h.NodeID == self || h.Address == "" || h.NumPartitions != v.NumPartitions || h.Partitioner != v.Partitioner {
			continue
		}
		for _, p := range h.Partitions {
			out[p] = append(out[p], h.Address)
		}
	}
	return out
}

func (c *Cluster) partRequest(ctx context.Context, peer, db, version, what string) (*http.Request, error) {
	pc := c.partClient()
	u := pc.scheme + "://" + peer + "/" + url.PathEscape(db) + "/?partfile=" + what + "&version=" + url.QueryEscape(version)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "spangle-peercopy")
	if c.cfg.PeerToken != "" {
		req.Header.Set(proxy.PeerTokenHeader, c.cfg.PeerToken)
	}
	return req, nil
}

// PeerManifest asks peer for its manifest of db's version.
func (c *Cluster) PeerManifest(ctx context.Context, peer, db, version string) (*blocks.Manifest, error) {
	req, err := c.partRequest(ctx, peer, db, version, "manifest")
	if err != nil {
		return nil, err
	}
	resp, err := c.partClient().transport.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("peer %s: manifest: status %d", peer, resp.StatusCode)
	}
	var m blocks.Manifest
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxManifestBytes)).Decode(&m); err != nil {
		return nil, fmt.Errorf("peer %s: manifest: %w", peer, err)
	}
	if m.DB != db || m.Version != version || len(m.PartitionInfo) != len(m.Partitions) {
		return nil, fmt.Errorf("peer %s: manifest of %s/%s, %d infos for %d partitions", peer, m.DB, m.Version, len(m.PartitionInfo), len(m.Partitions))
	}
	return &m, nil
}

// PeerFile asks peer for partition p's file of db's version from byte
// off on. It returns the body (the caller closes it), the file's checksum
// as the peer states it, and its total size.
func (c *Cluster) PeerFile(ctx context.Context, peer, db, version string, p int, off int64) (io.ReadCloser, string, int64, error) {
	req, err := c.partRequest(ctx, peer, db, version, strconv.Itoa(p))
	if err != nil {
		return nil, "", 0, err
	}
	want := http.StatusOK
	if off > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
		want = http.StatusPartialContent
	}
	resp, err := c.partClient().transport.RoundTrip(req)
	if err != nil {
		return nil, "", 0, fmt.Errorf("peer %s: %w", peer, err)
	}
	if resp.StatusCode != want {
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return nil, "", 0, fmt.Errorf("peer %s: partition %d: %w", peer, p, node.ErrPeerBusy)
		}
		return nil, "", 0, fmt.Errorf("peer %s: partition %d from %d: status %d", peer, p, off, resp.StatusCode)
	}
	return resp.Body, resp.Header.Get("X-Spangle-File-Checksum"), off + resp.ContentLength, nil
}
