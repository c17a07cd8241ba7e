package cluster

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spangledb/spangle/node"

	"github.com/spangledb/spangle/node/assign"
	"github.com/spangledb/spangle/node/proxy"
)

// Config configures cluster mode (the [sharding] table, with sequins' key
// names). Start from DefaultConfig and set View.
type Config struct {
	// Replication is how many nodes hold each partition of a version.
	// Default 2.
	Replication int
	// MinReplication is how many replicas every partition of a version
	// needs, cluster-wide, before a node switches its clients to it.
	// Default 1.
	MinReplication int
	// MaxReplication, when ≥ Replication, makes a node skip assigned
	// partitions that already have MaxReplication replicas on other nodes
	// (sequins' rule). Default 0: off.
	MaxReplication int
	// Assignment names the strategy: "sequential" (sequins', the default)
	// or "rendezvous".
	Assignment string
	// TimeToConverge is how long membership must stay unchanged at start
	// before the node processes its dbs. Default 10s.
	TimeToConverge time.Duration
	// ProxyTimeout caps a proxied lookup. Default 100ms.
	ProxyTimeout time.Duration
	// ProxyListTimeout caps a page of a key listing asked of the peers
	// holding partitions this node lacks (a staged request per group of
	// partitions, backups after ProxyStageTimeout): past it the listing
	// fails with 504, naming the partitions missing. Default 2s.
	ProxyListTimeout time.Duration
	// ProxyStageTimeout is how long a proxied attempt runs alone before a
	// backup attempt starts on the next replica. Default 0:
	// ProxyTimeout / Replication (stageTimeout).
	ProxyStageTimeout time.Duration
	// ProxyBatchKeys caps the lookups one request to a peer carries:
	// lookups for a peer that arrive while a request to it is in flight go
	// together in the next one. 1 turns batching off. Default 64 (the
	// proxy package's).
	ProxyBatchKeys int
	// ProxyConnsPerPeer caps the requests in flight to one peer. Default 2
	// (the proxy package's).
	ProxyConnsPerPeer int
	// VersionRemoveTimeout is how long a replaced version stays open and
	// advertised for peers naming it after the last request for it; each
	// request restarts the wait. Default 10m.
	VersionRemoveTimeout time.Duration
	// HealAfter is how long a partition of a db's active version must
	// stay below Replication live replicas before the next nodes in
	// rendezvous order load it (healing). Default 1m. Negative is an
	// error: DisableHeal turns healing off.
	HealAfter time.Duration
	// HealMaxParallel bounds the partitions this node loads for healing at
	// once, over all dbs. Default 1.
	HealMaxParallel int
	// DisableHeal turns healing off: partitions that lose replicas stay
	// under-replicated until the next version, as in sequins. Default
	// false (healing on). It is a negative switch so that the zero value
	// keeps healing on.
	DisableHeal bool
	// DisableBuildOnce makes every node build the partitions it is
	// assigned from the source, as before build once (issue 35): a region
	// then reads each version once per node. Default false: one node
	// builds each new version (VersionBuilder), the others copy from it.
	// A negative switch so that the zero value keeps build once on.
	DisableBuildOnce bool
	// BuildOnceWait is how long a node waits for the builder of a new
	// version to publish its partitions, or for a busy peer to send a
	// file, before it builds from the source itself: set it above the
	// longest build. Default 10m.
	BuildOnceWait time.Duration
	// BuildOnceMinBytes is the smallest version (its source files' total
	// size) built once; smaller ones are built by every node, as without
	// build once: reading them is cheap, and building in parallel switches
	// sooner than a build followed by copies. Default 64 MiB; 0: every
	// version.
	BuildOnceMinBytes int64
	// PeerToken is the cluster's shared secret: sent with this node's
	// proxied requests, and required of peers' by the HTTP front door
	// when set (edge.Config.PeerToken). Default "": peers are not told
	// from other clients.
	PeerToken string
	// PeerTLS, when set, makes requests to peers HTTPS with the
	// configuration it returns for each new connection
	// (proxy.Config.TLS): spangle sets it from [http] tls_* when the
	// doors speak HTTPS (edge.TLS.PeerConfig, which follows the CA
	// file's reloads). Default nil: plain HTTP.
	PeerTLS func() *tls.Config
	// View is the cluster state as this node sees it. Required;
	// kvcluster.View implements it over kvwatch.
	View View
	// Logger receives the cluster's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the metrics of healing and of the proxy; nil
	// registers none.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults stated on each field.
func DefaultConfig() Config {
	return Config{
		Replication:          2,
		MinReplication:       1,
		Assignment:           assign.NameSequential,
		TimeToConverge:       10 * time.Second,
		ProxyTimeout:         100 * time.Millisecond,
		ProxyListTimeout:     2 * time.Second,
		ProxyBatchKeys:       proxy.DefaultConfig().MaxBatchKeys,
		ProxyConnsPerPeer:    proxy.DefaultConfig().MaxConnsPerPeer,
		VersionRemoveTimeout: 10 * time.Minute,
		HealAfter:            time.Minute,
		HealMaxParallel:      1,
		BuildOnceWait:        10 * time.Minute,
		BuildOnceMinBytes:    64 << 20,
	}
}

// validate checks c; it changes nothing.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: sharding."+format, append([]any{node.ErrConfig}, args...)...)
	}
	switch {
	case c.Replication < 1:
		return bad("replication %d: want at least 1", c.Replication)
	case c.MinReplication < 1:
		return bad("min_replication %d: want at least 1", c.MinReplication)
	case c.MinReplication > c.Replication:
		return bad("min_replication %d exceeds replication %d", c.MinReplication, c.Replication)
	case c.MaxReplication < 0:
		return bad("max_replication %d is negative", c.MaxReplication)
	case c.TimeToConverge <= 0:
		return bad("time_to_converge %v: want a positive duration", c.TimeToConverge)
	case c.ProxyTimeout <= 0:
		return bad("proxy_timeout %v: want a positive duration", c.ProxyTimeout)
	case c.ProxyListTimeout <= 0:
		return bad("proxy_list_timeout %v: want a positive duration", c.ProxyListTimeout)
	case c.ProxyStageTimeout < 0:
		return bad("proxy_stage_timeout %v is negative", c.ProxyStageTimeout)
	case c.ProxyBatchKeys < 1:
		return bad("proxy_batch_keys %d: want at least 1", c.ProxyBatchKeys)
	case c.ProxyConnsPerPeer < 1:
		return bad("proxy_conns_per_peer %d: want at least 1", c.ProxyConnsPerPeer)
	case c.VersionRemoveTimeout <= 0:
		return bad("version_remove_timeout %v: want a positive duration", c.VersionRemoveTimeout)
	case c.HealAfter <= 0:
		return bad("heal_after %v: want a positive duration (heal = false turns healing off)", c.HealAfter)
	case c.HealMaxParallel < 1:
		return bad("heal_max_parallel %d: want at least 1", c.HealMaxParallel)
	case c.BuildOnceWait <= 0:
		return fmt.Errorf("%w: cluster.build_once_wait %v: want a positive duration", node.ErrConfig, c.BuildOnceWait)
	case c.BuildOnceMinBytes < 0:
		return fmt.Errorf("%w: cluster.build_once_min_size %d is negative", node.ErrConfig, c.BuildOnceMinBytes)
	}
	if _, err := assign.ByName(c.Assignment); err != nil {
		return fmt.Errorf("%w: sharding.assignment: %v", node.ErrConfig, err)
	}
	if c.View == nil {
		return fmt.Errorf("%w: sharding: cluster mode needs a View", node.ErrConfig)
	}
	return nil
}

// stageTimeout is ProxyStageTimeout, or ProxyTimeout / Replication (at
// least 1ms) when it is 0.
func (c Config) stageTimeout() time.Duration {
	if c.ProxyStageTimeout > 0 {
		return c.ProxyStageTimeout
	}
	return max(c.ProxyTimeout/time.Duration(max(c.Replication, 1)), time.Millisecond)
}
