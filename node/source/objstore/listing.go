package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/node/source"
)

// One announcement of a version makes the node list its dbs (ListDBs),
// then every db its versions (ListVersions) and the new version its files
// (ListFiles): each of them once listed the whole bucket. A listing now
// starts with one stream-info request (which it made anyway, see list) and
// lists the bucket only when the stream changed since the last listing:
// while the stream's creation time, first and last sequences, message and
// byte counts are those the last listing started from, no object was put,
// deleted, purged or expired and the bucket was not re-created, so that
// listing's objects are still the bucket's.

// object is a listed object name split into its parts.
type object struct {
	db, version, file string
	size              int64
	modTime           time.Time
}

// streamState is what says that a bucket's stream changed: any put or
// delete moves last, a purge or an expiry first, msgs and bytes, and a
// bucket deleted and created again has another creation time.
type streamState struct {
	created                  time.Time
	first, last, msgs, bytes uint64
}

func stateOf(st jetstream.ObjectStoreStatus) (streamState, bool) {
	bs, ok := st.(*jetstream.ObjectBucketStatus)
	if !ok || bs.StreamInfo() == nil {
		return streamState{}, false
	}
	info := bs.StreamInfo()
	return streamState{
		created: info.Created,
		first:   info.State.FirstSeq,
		last:    info.State.LastSeq,
		msgs:    info.State.Msgs,
		bytes:   info.State.Bytes,
	}, true
}

func (a streamState) same(b streamState) bool {
	return a.created.Equal(b.created) && a.first == b.first && a.last == b.last && a.msgs == b.msgs && a.bytes == b.bytes
}

// listing is the objects of a listing that started when the bucket's
// stream was in state. Its objs are shared by the callers: read only.
type listing struct {
	state streamState
	objs  []object
	valid bool
}

// list lists the bucket's objects named <db>/<version>/<file> with valid db
// and version names. Other names are ignored. It lists the bucket only when
// its stream changed since the last listing (see above).
func (s *Source) list(ctx context.Context) ([]object, error) {
	obs, ok, err := s.store(ctx)
	if err != nil || !ok {
		return nil, err
	}
	// An empty bucket lists as empty without a watcher: jetstream's List
	// waits for a first entry that never comes when its bucket was
	// re-created empty between its two requests (a listing then hung
	// until the node stopped). A bucket gone drops the handle, so that a
	// re-created one is bound again.
	st, err := obs.Status(ctx)
	if err != nil {
		s.mu.Lock()
		if s.obs == obs {
			s.obs = nil
		}
		s.mu.Unlock()
		return nil, fmt.Errorf("objstore: %s: status: %w", s, err)
	}
	if st.Size() == 0 {
		return nil, nil
	}
	state, known := stateOf(st)
	// Callers that find the stream changed at once wait for one listing
	// and share it.
	s.listMu.Lock()
	defer s.listMu.Unlock()
	if known && s.last.valid && s.last.state.same(state) {
		s.listings.WithLabelValues("reused").Inc()
		return s.last.objs, nil
	}
	s.listings.WithLabelValues("listed").Inc()
	// The listing sees at least the state read above (it starts after);
	// a change made since moves the state on, and the next call lists
	// again.
	objs, err := listObjects(ctx, obs)
	if err != nil {
		return nil, fmt.Errorf("objstore: %s: list: %w", s, err)
	}
	s.last = listing{state: state, objs: objs, valid: known}
	return objs, nil
}

// listObjects lists the objects of obs, the whole bucket.
func listObjects(ctx context.Context, obs jetstream.ObjectStore) ([]object, error) {
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	objs := make([]object, 0, len(infos))
	for _, in := range infos {
		if in.Deleted {
			continue
		}
		parts := strings.Split(in.Name, "/")
		if len(parts) != 3 || !source.ValidName(parts[0]) || !source.ValidName(parts[1]) || parts[2] == "" {
			continue
		}
		objs = append(objs, object{db: parts[0], version: parts[1], file: parts[2], size: int64(in.Size), modTime: in.ModTime})
	}
	return objs, nil
}
