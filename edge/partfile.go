package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/spangledb/spangle/node"
)

// PartFiles gives peers the built partition files of the versions held
// here, to copy instead of building them from the source (issue 35);
// *node.Node implements it. Safe for concurrent use.
type PartFiles interface {
	// OpenPartFile opens partition p's file of db's version, held here.
	OpenPartFile(db, version string, p int) (node.PartFile, error)
	// PartManifest returns the manifest of db's version held here, as
	// JSON.
	PartManifest(db, version string) ([]byte, error)
}

// Peer copies are asked as GET /<db>/?partfile=<p>&version=<v> (the file,
// with Range) or ?partfile=manifest&version=<v>, with the peer token.
const (
	paramPartFile     = "partfile"
	partFileManifest  = "manifest"
	hdrFileChecksum   = "X-Spangle-File-Checksum"
	partFileChunk     = 64 << 10 // bytes sent between two waits on the rate limit, at most
	partFileChunkWait = 30 * time.Second
	// partFileBurstPer: the rate limit's burst is the bytes of
	// 1/partFileBurstPer of a second, at least partFileChunk. A wait is
	// a timer and a goroutine's wake-up, late by up to milliseconds on a
	// busy machine, and the time lost is bytes the burst no longer holds:
	// with a burst of one chunk, a limit of 256 MiB/s sent 69 MiB/s on
	// two cores at load 25, 1 GiB/s 63 MiB/s. About 16 ms of bytes ride
	// out those wake-ups and still bound what is sent at once.
	partFileBurstPer = 64
)

// partFileBurst is the rate limit's burst for bandwidth bytes a second.
func partFileBurst(bandwidth int64) int {
	return int(min(max(bandwidth/partFileBurstPer, partFileChunk), 1<<30))
}

// partFiles is the server's side of peer copies: a concurrency limit and
// a shared bandwidth limit, so that copies leave room for lookups.
type partFiles struct {
	files PartFiles
	slots *semaphore.Weighted
	rate  *rate.Limiter
	sent  prometheus.Counter // spangle_peer_copy_served_bytes_total
	busy  prometheus.Counter // spangle_peer_copy_busy_total
}

func newPartFiles(cfg Config, reg prometheus.Registerer) (*partFiles, error) {
	if cfg.PartFiles == nil {
		return nil, nil
	}
	pf := &partFiles{
		files: cfg.PartFiles,
		slots: semaphore.NewWeighted(int64(cfg.PeerCopyConcurrency)),
		rate:  rate.NewLimiter(rate.Limit(cfg.PeerCopyBandwidth), partFileBurst(cfg.PeerCopyBandwidth)),
	}
	var err error
	if pf.sent, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spangle_peer_copy_served_bytes_total",
		Help: "Bytes of partition files sent to peers copying them.",
	})); err != nil {
		return nil, err
	}
	if pf.busy, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spangle_peer_copy_busy_total",
		Help: "Partition file requests answered 503 because peer_copy_concurrency copies were being sent.",
	})); err != nil {
		return nil, err
	}
	return pf, nil
}

// isPartFile reports whether a db status request asks for a partition
// file (?partfile=).
func isPartFile(rawQuery string) bool {
	return rawQuery != "" && queryParam(rawQuery, paramPartFile) != ""
}

// servePartFile answers a peer's GET /<db>/?partfile=…&version=…: the
// file of a held partition (Range honoured, so an interrupted copy
// resumes), or the version's manifest. Only peers with the token may ask.
func (s *Server) servePartFile(w http.ResponseWriter, r *http.Request, db string) {
	if !s.peerAllowed(w, r) {
		return
	}
	pf := s.parts
	if pf == nil {
		writeText(w, r, http.StatusNotImplemented, "partition files are not served here\n")
		return
	}
	version, what := queryParam(r.URL.RawQuery, "version"), queryParam(r.URL.RawQuery, paramPartFile)
	if version == "" {
		writeText(w, r, http.StatusBadRequest, "partfile needs version\n")
		return
	}
	if what == partFileManifest {
		b, err := pf.files.PartManifest(db, version)
		if err != nil {
			s.partFileError(w, r, err)
			return
		}
		writeBody(w, r, http.StatusOK, []string{"application/json"}, b)
		return
	}
	p, err := strconv.Atoi(what)
	if err != nil || p < 0 {
		writeText(w, r, http.StatusBadRequest, "partfile is a partition number or manifest\n")
		return
	}
	if !pf.slots.TryAcquire(1) {
		pf.busy.Inc()
		w.Header().Set("Retry-After", "1")
		writeText(w, r, http.StatusServiceUnavailable, "peer_copy_concurrency copies are being sent\n")
		return
	}
	defer pf.slots.Release(1)
	f, err := pf.files.OpenPartFile(db, version, p)
	if err != nil {
		s.partFileError(w, r, err)
		return
	}
	defer f.File.Close()
	w.Header().Set(hdrFileChecksum, f.Checksum)
	w.Header().Set("Content-Type", "application/octet-stream")
	// ServeContent answers Range (206, 416) and HEAD; the reads it makes
	// go through the limiter, which also moves the write deadline on.
	http.ServeContent(w, r, "", time.Time{}, &limitedFile{ctx: r.Context(), f: f.File, size: f.Size, pf: pf,
		rc: http.NewResponseController(w)})
}

// partFileError answers a failed open: 404 for what is not held here.
func (s *Server) partFileError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, node.ErrUnknownDB) || errors.Is(err, node.ErrUnknownVersion) || errors.Is(err, node.ErrPartitionNotHeld) {
		writeText(w, r, http.StatusNotFound, err.Error()+"\n")
		return
	}
	s.log.Error("partition file", "path", r.URL.Path, "error", err)
	writeText(w, r, http.StatusInternalServerError, "partition file unavailable\n")
}

// limitedFile is the file as ServeContent reads it: each read waits for
// its bytes on the shared limiter, and gives the response another
// partFileChunkWait to be written (a file takes longer than WriteTimeout).
type limitedFile struct {
	ctx  context.Context
	f    *os.File
	size int64
	off  int64
	pf   *partFiles
	rc   *http.ResponseController
}

func (l *limitedFile) Read(b []byte) (int, error) {
	if l.off >= l.size {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), partFileChunk, l.size-l.off)]
	if err := l.pf.rate.WaitN(l.ctx, len(b)); err != nil {
		return 0, err
	}
	_ = l.rc.SetWriteDeadline(time.Now().Add(partFileChunkWait))
	n, err := l.f.ReadAt(b, l.off)
	l.off += int64(n)
	l.pf.sent.Add(float64(n))
	if err == io.EOF && l.off < l.size {
		err = io.ErrUnexpectedEOF
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (l *limitedFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += l.off
	case io.SeekEnd:
		offset += l.size
	}
	if offset < 0 {
		return 0, fmt.Errorf("partfile: seek to %d", offset)
	}
	l.off = offset
	return offset, nil
}
