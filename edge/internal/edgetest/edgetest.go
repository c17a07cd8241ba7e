// Package edgetest runs real spangle nodes for the tests of edge and
// edge/client: a source root of SequenceFiles, an embedded NATS server
// (kvwatch), node.Node, the NATS front door and the HTTP front door over
// loopback. Everything shuts down at test cleanup, in the order spangle
// serve uses. Timings are short and configurable; nothing sleeps to wait.
//
// The source is written by node/nodetest; Record, WriteVersion,
// WriteDelta and Numbered pass through to it, so that these tests import
// one helper package.
package edgetest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/cluster"
	"github.com/spangledb/spangle/node/kvcluster"
	"github.com/spangledb/spangle/node/nodetest"
)

// Timeout bounds every wait of these helpers.
const Timeout = 30 * time.Second

// Cluster is the spangle cluster name the helpers use.
const Cluster = "test"

// Logger discards unless SPANGLE_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("SPANGLE_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Record is one key and value of a SequenceFile.
type Record = nodetest.Record

// WriteVersion writes version of db under root as files SequenceFiles
// (records dealt round robin), then _SUCCESS: node/nodetest.WriteVersion.
func WriteVersion(t testing.TB, root, db, version string, files int, records []Record) {
	t.Helper()
	nodetest.WriteVersion(t, root, db, version, files, records)
}

// WriteDelta writes version of db under root as a delta over base (the
// upserts, the deletes in _DELETES, _BASE), complete at once:
// node/nodetest.WriteDelta.
func WriteDelta(t testing.TB, root, db, version, base string, upserts []Record, deletes ...string) {
	t.Helper()
	nodetest.WriteDelta(t, root, db, version, base, upserts, deletes...)
}

// Numbered returns n records key-<i> → <version>:<i>:
// node/nodetest.Numbered.
func Numbered(version string, n int) []Record { return nodetest.Numbered(version, n) }

// NATSConfig returns a kvwatch configuration with short timings. With no
// urls it runs an embedded server on a random port under a temp dir.
func NATSConfig(t testing.TB, urls ...string) kvwatch.Config {
	c := kvwatch.DefaultConfig()
	c.URLs = urls
	c.EmbeddedListen = "127.0.0.1:-1"
	c.EmbeddedStoreDir = t.TempDir()
	c.ClusterName = Cluster
	c.EntryTTL = 2 * time.Second
	c.Heartbeat = 300 * time.Millisecond
	c.OpTimeout = time.Second
	c.ReconnectWait = 50 * time.Millisecond
	c.Logger = Logger()
	return c
}

// StartKV starts a kvwatch.KV with cfg and waits until it is ready. It is
// shut down at cleanup (after the nodes using it: cleanups run last in,
// first out).
func StartKV(t testing.TB, cfg kvwatch.Config) *kvwatch.KV {
	t.Helper()
	kv, err := kvwatch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		if err := kv.Shutdown(ctx); err != nil {
			t.Errorf("kvwatch shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := kv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-kv.Ready():
	case <-ctx.Done():
		t.Fatal("kvwatch not ready")
	}
	return kv
}

// Node is a running node with both front doors.
type Node struct {
	*node.Node
	KV      *kvwatch.KV
	NATS    *edge.NATSServer
	HTTP    *edge.Server
	HTTPURL string // http://127.0.0.1:port

	stopped bool
}

// Options adjust StartNode.
type Options struct {
	// Node and NATS adjust the configurations before use.
	Node func(*node.Config)
	// Cluster, when set, runs the node in cluster mode with the cluster
	// configuration it adjusts (it must set View).
	Cluster func(*cluster.Config)
	NATS    func(*edge.NATSConfig)
	HTTP    func(*edge.Config)
	// NoWait returns without waiting for Loaded (cluster nodes wait for
	// their peers before loading).
	NoWait bool
}

// StartNode starts a node serving the source root, advertising through kv
// and answering on kv's connection and on a loopback HTTP listener. It
// waits until the node has loaded its first listing. Stop (or cleanup)
// shuts it down.
func StartNode(t testing.TB, kv *kvwatch.KV, root string, opts Options) *Node {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.Source = root
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RequireSuccessFile = true
	cfg.Logger = Logger()
	cfg.Advertiser = kvcluster.NewAdvertiser(kv)
	cfg.AdvertiseSubjects = names.Prefix(Cluster)
	cfg.AdvertiseRetry = 50 * time.Millisecond
	cfg.WatchError = kv.WatchError // as spangle.Start wires it
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.AdvertiseAddress = l.Addr().String()
	if opts.Node != nil {
		opts.Node(&cfg)
	}
	if opts.Cluster != nil {
		cc := cluster.DefaultConfig()
		cc.Logger, cc.Registerer = cfg.Logger, cfg.Registerer
		opts.Cluster(&cc)
		c, err := cluster.New(cc)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Cluster = c
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hcfg := edge.DefaultConfig()
	hcfg.Backend, hcfg.Batch, hcfg.SourceError, hcfg.List = n, n, n.SourceError, n // as spangle.Start wires them
	hcfg.NodeName = n.Name()                                                       // as spangle serve sets it
	hcfg.WatchError = n.WatchError
	if opts.Cluster != nil {
		hcfg.PartFiles = n // as spangle.Start wires it in cluster mode: peers copy partition files
	}
	hcfg.Logger = Logger()
	if opts.HTTP != nil {
		opts.HTTP(&hcfg)
	}
	hs, err := edge.NewServer(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	ncfg := edge.DefaultNATSConfig()
	ncfg.Conn = kv.Conn()
	// As spangle serve does: with accounts, the node's login in the
	// clients' account answers their lookups (closed after Stop).
	lookups, err := kv.LookupConn()
	if err != nil {
		t.Fatal(err)
	}
	if lookups != nil {
		ncfg.ClientConn = lookups
		t.Cleanup(lookups.Close)
	}
	ncfg.Backend, ncfg.List = n, n
	ncfg.ClusterName = Cluster
	ncfg.Logger = Logger()
	ncfg.RetryInterval = 50 * time.Millisecond
	if opts.NATS != nil {
		opts.NATS(&ncfg)
	}
	ns, err := edge.NewNATSServer(ncfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	tn := &Node{Node: n, KV: kv, NATS: ns, HTTP: hs, HTTPURL: "http://" + l.Addr().String()}
	t.Cleanup(func() {
		tn.Stop(t)
		if err := <-served; err != nil {
			t.Errorf("HTTP serve: %v", err)
		}
	})
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	if !opts.NoWait {
		WaitLoaded(t, tn)
	}
	return tn
}

// WaitLoaded waits until n has processed its first source listing.
func WaitLoaded(t testing.TB, n *Node) {
	t.Helper()
	select {
	case <-n.Loaded():
	case <-time.After(Timeout):
		t.Fatal("node did not load")
	}
}

// Stop shuts the node down as spangle serve does: drain, NATS front door,
// HTTP, node. It is idempotent.
func (n *Node) Stop(t testing.TB) {
	t.Helper()
	if n.stopped {
		return
	}
	n.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := n.Drain(ctx); err != nil {
		t.Errorf("drain: %v", err)
	}
	if err := n.NATS.Shutdown(ctx); err != nil {
		t.Errorf("NATS shutdown: %v", err)
	}
	if err := n.HTTP.Shutdown(ctx); err != nil {
		t.Errorf("HTTP shutdown: %v", err)
	}
	if err := n.Shutdown(ctx); err != nil {
		t.Errorf("node shutdown: %v", err)
	}
}

// Connect returns a new NATS connection to url, closed at cleanup.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// WaitFor polls cond until it returns nil, failing the test with its last
// error after Timeout.
func WaitFor(t testing.TB, what string, cond func() error) {
	t.Helper()
	nodetest.WaitFor(t, Timeout, what, cond)
}
