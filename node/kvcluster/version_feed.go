package kvcluster

import (
	"log/slog"

	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node/advert"
)

// Announcer is what a VersionFeed tells of published versions;
// *node.Node implements it.
type Announcer interface {
	// Announce must not block.
	Announce(db, version string)
}

// VersionFeed is the change feed of published versions: it follows the
// versions bucket of a kvwatch.KV (Subscribe) and calls Announce for each
// entry written since it last looked (by revision), so that a node reading
// the NATS Object Store learns of a version `spangle publish` announced
// without listing its source on a timer. Undecodable entries are skipped
// and logged at debug level. One goroutine, started by Start, reads the
// snapshots; it never blocks on the KV.
type VersionFeed struct {
	follower
	to  Announcer
	log *slog.Logger
}

// NewVersionFeed returns a feed from kv to to; it starts nothing. A nil
// log discards.
func NewVersionFeed(kv *kvwatch.KV, to Announcer, log *slog.Logger) *VersionFeed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &VersionFeed{follower: newFollower(kv), to: to, log: log.With("component", "version_feed")}
}

// Start subscribes to the KV's snapshots. It may be called before the KV
// has started. It is idempotent.
func (f *VersionFeed) Start() { f.start(f.run) }

// Stop cancels the subscription and waits for the goroutine. It is
// idempotent; without Start it does nothing.
func (f *VersionFeed) Stop() { f.stop() }

func (f *VersionFeed) run(ch <-chan *kvwatch.Snapshot) {
	seen := map[string]uint64{} // key → revision announced
	for s := range ch {
		s.Range(kvwatch.Versions, "", func(key string, e kvwatch.Entry) bool {
			if seen[key] == e.Revision {
				return true
			}
			seen[key] = e.Revision
			v, err := advert.DecodeVersion(key, e.Value)
			if err != nil {
				f.log.Debug("ignoring a versions entry", "key", key, "err", err)
				return true
			}
			f.to.Announce(v.DB, v.Version)
			return true
		})
	}
}
