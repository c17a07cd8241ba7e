package edge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node/cluster"
	"github.com/spangledb/spangle/node/nodetest"
)

// Build once over real NATS and HTTP (issue 35): 3 nodes, replication 2,
// a new version d/v1 no node holds. With build once, one node (the
// version's builder) reads the source and builds every partition; the
// two others copy theirs from it: the cluster reads the source once.
// Without it, each node reads the whole source (hash partitioning: every
// partition draws records from every file).

// startOnceCluster starts 3 nodes with replication 2, healing off,
// build once as told, on an empty source; once every node sees the three
// and has converged, it writes d/v1 and has them look for it (so that
// they agree on the builder however slowly each started), and waits
// until each serves it. It returns them and the source's size.
func startOnceCluster(t *testing.T, buildOnce bool) ([]*healNode, float64) {
	t.Helper()
	opts := healOpts{replication: 2, disable: true, noBuildOnce: !buildOnce}
	root := t.TempDir()
	nodes := startNodesOn(t, func(int) string { return root }, []string{"1", "2", "3"}, func(int) healOpts { return opts })
	size := writeOnceVersion(t, root)
	var cns []*clusterNode
	for _, n := range nodes {
		n.Refresh()
		cns = append(cns, n.clusterNode)
	}
	waitActive(t, cns, "d", "v1")
	return nodes, size
}

// startNodesOn starts a node per shard, the i-th on the source root(i)
// with opts(i), and waits until each has processed its first listing and
// sees every node live.
func startNodesOn(t *testing.T, root func(i int) string, shards []string, opts func(i int) healOpts) []*healNode {
	t.Helper()
	kvs, views := startClusterNATS(t, len(shards))
	var nodes []*healNode
	for i, sh := range shards {
		hn := &healNode{clusterNode: &clusterNode{shard: sh, view: views[i]}, root: root(i), data: t.TempDir(), kv: kvs[i], opts: opts(i)}
		hn.start(t)
		nodes = append(nodes, hn)
	}
	for _, n := range nodes {
		edgetest.WaitLoaded(t, n.Node)
		edgetest.WaitFor(t, n.ID()+" sees every node", func() error {
			s, _ := n.view.Cluster()
			if s == nil || len(s.Live()) != len(shards) {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	return nodes
}

// writeOnceVersion writes d/v1 (copyKeys keys, healParts files) under
// root and returns its files' total size.
func writeOnceVersion(t *testing.T, root string) float64 {
	t.Helper()
	recs := make([]nodetest.Record, copyKeys)
	for i := range recs {
		recs[i] = nodetest.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte(copyValue(i))}
	}
	edgetest.WriteVersion(t, root, "d", "v1", healParts, recs)
	var size int64
	files, err := os.ReadDir(filepath.Join(root, "d", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if fi, err := f.Info(); err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
	}
	return float64(size)
}

// sourceReads sums spangle_source_read_bytes_total over nodes.
func sourceReads(t *testing.T, nodes []*healNode) float64 {
	t.Helper()
	sum := 0.0
	for _, n := range nodes {
		sum += n.metric(t, "spangle_source_read_bytes_total")
	}
	return sum
}

// outcomes counts spangle_build_once_total by outcome over nodes,
// leaving out outcomes that never happened.
func outcomes(t *testing.T, nodes []*healNode) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, n := range nodes {
		mfs, err := n.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "spangle_build_once_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if v := m.GetCounter().GetValue(); l.GetName() == "outcome" && v != 0 {
						out[l.GetValue()] += v // a db's series start at 0, for dashboards
					}
				}
			}
		}
	}
	return out
}

// TestBuildOnce: the cluster reads the source once in total (today: once
// per node), one node built, two copied, and every node serves every key.
// It fails without build once (3 times the source read).
func TestBuildOnce(t *testing.T) {
	nodes, size := startOnceCluster(t, true)
	if got := sourceReads(t, nodes); got < size || got > 1.2*size {
		t.Errorf("the cluster read %v bytes of the source (%v bytes): want about once", got, size)
	}
	if got := outcomes(t, nodes); got["built"] != 1 || got["copied"] != 2 || got["fallback"] != 0 {
		t.Errorf("build once outcomes %v: want 1 built, 2 copied", got)
	}
	copied := 0
	for _, n := range nodes {
		if copyMetric(t, n, "ok") > 0 {
			copied++
		}
		checkCopyKeys(t, n)
	}
	if copied != 2 {
		t.Errorf("%d nodes copied files: want 2", copied)
	}
}

// TestBuildOnceOff: with build_once false every node builds its own
// partitions, each reading the whole source (the baseline).
func TestBuildOnceOff(t *testing.T) {
	nodes, size := startOnceCluster(t, false)
	if got := sourceReads(t, nodes); got < 3*size {
		t.Errorf("the cluster read %v bytes of the source (%v bytes): want 3 times", got, size)
	}
	if got := outcomes(t, nodes); len(got) != 0 {
		t.Errorf("build once outcomes %v with build once off", got)
	}
	for _, n := range nodes {
		checkCopyKeys(t, n)
	}
}

// TestBuildOnceBuilderAbsent: the version's builder is a live node that
// never builds it (its source has no db d): the three others wait
// build_once_wait (1s here), then each builds its own partitions from the
// source, and serve every key. It fails if they wait for the builder
// without end, or build before it had its chance (the outcome would not
// be fallback).
func TestBuildOnceBuilderAbsent(t *testing.T) {
	shards := []string{"1", "2", "3"}
	for i := 10; ; i++ { // a fourth node that would build d/v1
		if id := fmt.Sprint(i); cluster.Builder([]string{"node1", "node2", "node3", "node" + id}, "d", "v1") == "node"+id {
			shards = append(shards, id)
			break
		}
	}
	root, empty := t.TempDir(), t.TempDir() // the fourth node's has no dbs
	nodes := startNodesOn(t, func(i int) string {
		if i == 3 {
			return empty
		}
		return root
	}, shards, func(int) healOpts {
		return healOpts{replication: 2, disable: true, cluster: func(c *cluster.Config) { c.BuildOnceWait = time.Second }}
	})
	nodes = nodes[:3]
	writeOnceVersion(t, root)
	var cns []*clusterNode
	for _, n := range nodes {
		n.Refresh()
		cns = append(cns, n.clusterNode)
	}
	waitActive(t, cns, "d", "v1")
	if got := outcomes(t, nodes); got["fallback"] != 3 || got["built"] != 0 || got["copied"] != 0 {
		t.Errorf("build once outcomes %v: want 3 fallbacks", got)
	}
	for _, n := range nodes {
		checkCopyKeys(t, n)
	}
}

// TestBuildOnceBuilderLeaves: the version's builder is a live node
// without the db (as in TestBuildOnceBuilderAbsent) that stops while the
// three others wait for it (build_once_wait 10m): at the view's change
// they agree on the next builder, which builds every partition, and the
// two others copy from it, long before build_once_wait.
func TestBuildOnceBuilderLeaves(t *testing.T) {
	shards := []string{"1", "2", "3"}
	for i := 10; ; i++ {
		if id := fmt.Sprint(i); cluster.Builder([]string{"node1", "node2", "node3", "node" + id}, "d", "v1") == "node"+id {
			shards = append(shards, id)
			break
		}
	}
	root, empty := t.TempDir(), t.TempDir()
	all := startNodesOn(t, func(i int) string {
		if i == 3 {
			return empty
		}
		return root
	}, shards, func(int) healOpts {
		return healOpts{replication: 2, disable: true, cluster: func(c *cluster.Config) { c.BuildOnceWait = 10 * time.Minute }}
	})
	nodes, ghost := all[:3], all[3]
	writeOnceVersion(t, root)
	var cns []*clusterNode
	for _, n := range nodes {
		n.Refresh()
		cns = append(cns, n.clusterNode)
	}
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" builds d/v1 (waits for the builder)", func() error {
			if _, ok := n.Status().DBs["d"].Versions["v1"]; !ok {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	ghost.Node.Stop(t)
	waitActive(t, cns, "d", "v1")
	if got := outcomes(t, nodes); got["built"] != 1 || got["copied"] != 2 || got["fallback"] != 0 {
		t.Errorf("build once outcomes %v: want 1 built, 2 copied", got)
	}
	for _, n := range nodes {
		checkCopyKeys(t, n)
	}
}

// TestBuildOnceSmall: a version smaller than build_once_min_size is built
// by every node, as without build once.
func TestBuildOnceSmall(t *testing.T) {
	root := t.TempDir()
	nodes := startNodesOn(t, func(int) string { return root }, []string{"1", "2", "3"}, func(int) healOpts {
		return healOpts{replication: 2, disable: true, cluster: func(c *cluster.Config) { c.BuildOnceMinBytes = 1 << 30 }}
	})
	size := writeOnceVersion(t, root)
	var cns []*clusterNode
	for _, n := range nodes {
		n.Refresh()
		cns = append(cns, n.clusterNode)
	}
	waitActive(t, cns, "d", "v1")
	if got := sourceReads(t, nodes); got < 3*size {
		t.Errorf("the cluster read %v bytes of the source (%v bytes): want 3 times", got, size)
	}
	if got := outcomes(t, nodes); len(got) != 0 {
		t.Errorf("build once outcomes %v for a version under build_once_min_size", got)
	}
}
