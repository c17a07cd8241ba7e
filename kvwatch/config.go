package kvwatch

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/kvwatch/region"
)

// Config configures a KV. It is one flat struct so that it maps one to one
// onto the [nats] table of the configuration file. Start from DefaultConfig:
// every field's comment states its default, which DefaultConfig holds, and
// Validate refuses a zero value where the default is not zero (Heartbeat
// and the nil Logger and Registerer excepted, as their comments say). New
// copies the Config, so later changes by the caller have no effect.
type Config struct {
	// URLs of the NATS servers to connect to. Empty (the default) starts an
	// embedded nats-server with JetStream inside this process.
	URLs []string

	// EmbeddedListen is the host:port on which the embedded server accepts
	// clients, so that other processes and tools can connect to it. Port 0
	// or -1 picks a random free port (see KV.ClientURL). Default
	// "127.0.0.1:4222". Ignored when URLs is set.
	EmbeddedListen string

	// EmbeddedStoreDir is where the embedded server keeps JetStream data,
	// typically <data_dir>/nats. Required when URLs is empty; ignored
	// otherwise.
	EmbeddedStoreDir string

	// EmbeddedServerName names the embedded server. It must be unique within
	// an embedded cluster. Default "": nats-server uses its generated ID.
	EmbeddedServerName string

	// EmbeddedClusterName, EmbeddedClusterListen and EmbeddedRoutes make the
	// embedded server one member of a NATS cluster: the same cluster name
	// on every member, a host:port for routes on each, and Routes listing
	// the route URLs of all members (nats://host:port; listing itself is
	// fine). All three default to empty: a stand-alone server. The bucket
	// Replicas must then follow the cluster size.
	EmbeddedClusterName   string
	EmbeddedClusterListen string
	EmbeddedRoutes        []string

	// EmbeddedUsers, when set, are the only logins the embedded server
	// accepts, each bounded by its role (see User, RolePermissions).
	// Default none: any client is accepted, which EmbeddedListen then
	// allows on loopback only.
	EmbeddedUsers []User
	// EmbeddedAllowInsecure lets the embedded server listen beyond
	// loopback with no users. Default false: Validate refuses it
	// (ErrInsecure).
	EmbeddedAllowInsecure bool
	// EmbeddedMaxMemory and EmbeddedMaxStore bound the embedded server's
	// JetStream memory and file storage, so that no client can fill the
	// machine. Defaults 256 MiB and 4 GiB.
	EmbeddedMaxMemory int64
	EmbeddedMaxStore  int64

	// EmbeddedRecoverCheck is how often a node checks its embedded server
	// for a store that failed on a full disk (JetStream keeps refusing
	// writes after that, even once space is back) and, when at least
	// EmbeddedMinFree bytes are free again, restarts the server on the same
	// port and store. Defaults 5s and 64 MiB.
	EmbeddedRecoverCheck time.Duration
	EmbeddedMinFree      int64

	// CredsFile is a NATS credentials file (JWT and seed) for URLs.
	// Default "": none. Exclusive with NKeySeedFile.
	CredsFile string

	// NKeySeedFile is a file holding an NKey user seed for URLs. Default "":
	// none.
	NKeySeedFile string

	// LookupCredsFile and LookupNKeySeedFile are this node's second login
	// at URLs, of the responder role in the client account (a server
	// configured with the accounts of AccountsConfig): the front door
	// answers the clients' lookups there, so that they cross no service
	// import (LookupConn; docs/SECURITY.md). A credentials file or an NKey
	// seed file, exclusive. Default "": none, the node answers in its own
	// account only. The embedded server with users makes this login by
	// itself.
	LookupCredsFile    string
	LookupNKeySeedFile string

	// TLSCAFile, TLSCertFile and TLSKeyFile configure TLS towards URLs: a CA
	// bundle to verify the servers, and a client certificate and key (both
	// or neither). TLSInsecureSkipVerify skips the server certificate check
	// (tests only). All default to empty/false: plain TCP unless the server
	// requires TLS.
	TLSCAFile             string
	TLSCertFile           string
	TLSKeyFile            string
	TLSInsecureSkipVerify bool

	// ClusterName is the spangle cluster name. Bucket names derive from it:
	// "spangle_<cluster>_nodes", "spangle_<cluster>_partitions" and
	// "spangle_<cluster>_versions", where characters other than letters,
	// digits, '-' and '_' become '_'. Default "spangle".
	ClusterName string

	// ConnName is the name of the NATS connection, shown by the server's
	// monitoring and by nats tools. Default "spangle".
	ConnName string

	// Replicas is the replica count of the buckets. It must follow the NATS
	// deployment: 1 on a single server (more fails with JetStream error
	// 10074), 3 on a three-server cluster. Default 1.
	Replicas int

	// EntryTTL is the time to live of own entries (Publish): the time after
	// which an entry whose node stopped without a clean Shutdown disappears.
	// Whole seconds, at least 1s (JetStream truncates TTLs to seconds and
	// rejects smaller ones). Default 10s.
	EntryTTL time.Duration

	// Heartbeat is how often own entries are refreshed. It must be below
	// EntryTTL. Default 0: EntryTTL/3.
	Heartbeat time.Duration

	// PartitionsTTL is the time to live of own entries in the Partitions
	// bucket. They change only when the node's holdings do, so they are
	// refreshed only about every PartitionsTTL/3, not every heartbeat:
	// the heartbeat of a cluster is then one write per node, whatever its
	// dbs and versions. A dead node's partitions entries outlive its node
	// entry; readers ignore the partitions entries of nodes that have
	// none. Whole seconds, at least EntryTTL. Default 1h.
	PartitionsTTL time.Duration

	// MarkerTTL is how long a bucket keeps the markers of deleted and expired
	// keys (JetStream LimitMarkerTTL). A watcher that reconnects within
	// MarkerTTL/2 of losing the connection resumes where it stopped; after a
	// longer outage it reloads the bucket whole, because markers it missed
	// may be gone. At least 1s. Default 15m.
	MarkerTTL time.Duration

	// MaxConsumers bounds the consumers of each of the cluster's KV
	// streams (JetStream's MaxConsumers, set on the streams the nodes
	// create and on existing ones: bucket.go). Every node holds one per
	// stream (two for a moment while a watcher is re-created), every
	// edge/client one, every spangle status --nats or rollback one while
	// it runs; a region's mirror takes none. It bounds what a flood of
	// consumers costs (about 32 KiB each on the server), whatever the
	// server's default_max_consumers says; it cannot keep slots for the
	// nodes, so a node that cannot start its watchers says so in its
	// readiness (WatchError). Size it above twice the nodes plus the
	// clients. Default 1000, nats-server's own default per stream.
	MaxConsumers int

	// OpTimeout bounds every single KV operation (create, publish, delete,
	// watcher creation). Default 2s.
	OpTimeout time.Duration

	// ReconnectWait is the pause between reconnect attempts to one server.
	// The client never gives up reconnecting. Default 1s.
	ReconnectWait time.Duration

	// Region places the node in a region ([region] table): the NATS
	// server (the embedded one, or the one at URLs) is the region's, with
	// JetStream domain Region.Name; the Nodes and Partitions buckets are
	// the region's own, and Versions is the region's mirror of the hub's
	// (read-only: Put and Delete refuse it). The embedded server joins
	// Region.Hub as a leafnode. Default region.DefaultConfig(): no region.
	Region region.Config

	// Logger receives the package's logs and the embedded server's.
	// Default nil: discard.
	Logger *slog.Logger

	// Registerer receives the package's metrics (names start with
	// "spangle_kvwatch_"). Default nil: no metrics are registered.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults. EmbeddedStoreDir has no default and
// must be set for an embedded server.
func DefaultConfig() Config {
	return Config{
		EmbeddedListen:       "127.0.0.1:4222",
		EmbeddedMaxMemory:    256 << 20,
		EmbeddedMaxStore:     4 << 30,
		EmbeddedRecoverCheck: 5 * time.Second,
		EmbeddedMinFree:      64 << 20,
		ClusterName:          "spangle",
		ConnName:             "spangle",
		Replicas:             1,
		EntryTTL:             10 * time.Second,
		PartitionsTTL:        time.Hour,
		MarkerTTL:            15 * time.Minute,
		MaxConsumers:         1000,
		OpTimeout:            2 * time.Second,
		ReconnectWait:        time.Second,
		Region:               region.DefaultConfig(),
	}
}

// heartbeat is how often own entries are refreshed: Heartbeat, or
// EntryTTL/3 when it is 0.
func (c Config) heartbeat() time.Duration {
	if c.Heartbeat == 0 {
		return c.EntryTTL / 3
	}
	return c.Heartbeat
}

// Embedded reports whether the configuration runs an embedded server.
func (c Config) Embedded() bool { return len(c.URLs) == 0 }

// Validate reports the first problem of c, as an error wrapping
// ErrInvalidConfig. It changes nothing: a field left at its zero value
// where DefaultConfig has another is a problem (start from DefaultConfig).
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.EntryTTL < time.Second || c.EntryTTL%time.Second != 0 {
		return bad("EntryTTL %v: must be whole seconds, at least 1s", c.EntryTTL)
	}
	if c.Heartbeat < 0 || c.heartbeat() <= 0 || c.heartbeat() >= c.EntryTTL {
		return bad("Heartbeat %v: must be positive (or 0: EntryTTL/3) and below EntryTTL %v", c.Heartbeat, c.EntryTTL)
	}
	if c.PartitionsTTL < c.EntryTTL || c.PartitionsTTL%time.Second != 0 {
		return bad("PartitionsTTL %v: must be whole seconds, at least EntryTTL %v", c.PartitionsTTL, c.EntryTTL)
	}
	if c.MarkerTTL < time.Second {
		return bad("MarkerTTL %v: must be at least 1s", c.MarkerTTL)
	}
	if c.MaxConsumers <= 0 {
		return bad("MaxConsumers %d: must be positive", c.MaxConsumers)
	}
	if c.OpTimeout <= 0 {
		return bad("OpTimeout %v: must be positive", c.OpTimeout)
	}
	if c.ReconnectWait <= 0 {
		return bad("ReconnectWait %v: must be positive", c.ReconnectWait)
	}
	if c.ClusterName == "" || c.ConnName == "" {
		return bad("ClusterName %q and ConnName %q: must not be empty", c.ClusterName, c.ConnName)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return bad("Replicas %d: must be 1 to 5", c.Replicas)
	}
	if c.CredsFile != "" && c.NKeySeedFile != "" {
		return bad("CredsFile and NKeySeedFile are exclusive")
	}
	if c.LookupCredsFile != "" && c.LookupNKeySeedFile != "" {
		return bad("LookupCredsFile and LookupNKeySeedFile are exclusive")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return bad("TLSCertFile and TLSKeyFile go together")
	}
	if err := c.Region.Validate(c.Embedded()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if !c.Embedded() {
		for _, u := range c.URLs {
			if strings.TrimSpace(u) == "" {
				return bad("empty entry in URLs")
			}
		}
		return nil
	}
	if c.CredsFile != "" || c.NKeySeedFile != "" || c.LookupCredsFile != "" || c.LookupNKeySeedFile != "" || c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSInsecureSkipVerify {
		return bad("credentials and TLS options apply to URLs only; the embedded server's logins are EmbeddedUsers")
	}
	if c.EmbeddedMaxMemory < 1<<20 || c.EmbeddedMaxStore < 16<<20 {
		return bad("EmbeddedMaxMemory %d and EmbeddedMaxStore %d: want at least 1 MiB and 16 MiB", c.EmbeddedMaxMemory, c.EmbeddedMaxStore)
	}
	if c.EmbeddedRecoverCheck < 10*time.Millisecond || c.EmbeddedRecoverCheck > time.Hour {
		return bad("EmbeddedRecoverCheck %v: want 10ms to 1h", c.EmbeddedRecoverCheck)
	}
	if c.EmbeddedMinFree < 0 {
		return bad("EmbeddedMinFree %d: must not be negative", c.EmbeddedMinFree)
	}
	if err := checkUsers(c); err != nil {
		if errors.Is(err, ErrInvalidConfig) {
			return err
		}
		return bad("%v", err)
	}
	if c.EmbeddedStoreDir == "" {
		return bad("EmbeddedStoreDir is required for an embedded server")
	}
	if _, _, err := splitListen(c.EmbeddedListen); err != nil {
		return bad("EmbeddedListen %q: %v", c.EmbeddedListen, err)
	}
	clustered := c.EmbeddedClusterName != "" || c.EmbeddedClusterListen != "" || len(c.EmbeddedRoutes) > 0
	if clustered {
		if c.EmbeddedClusterName == "" || c.EmbeddedClusterListen == "" {
			return bad("an embedded cluster needs EmbeddedClusterName and EmbeddedClusterListen")
		}
		if _, _, err := splitListen(c.EmbeddedClusterListen); err != nil {
			return bad("EmbeddedClusterListen %q: %v", c.EmbeddedClusterListen, err)
		}
	}
	return nil
}

// splitListen parses host:port; port 0 and -1 mean a random port and come
// back as -1 (nats-server's RANDOM_PORT; its 0 means the default port).
func splitListen(hostport string) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if port == 0 {
		port = -1
	}
	return host, port, nil
}
