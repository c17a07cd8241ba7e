package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/plugins"
)

// deltaSource writes versions of a db into a directory source: full ones
// and deltas, with the _DIGEST of the records each must hold.
type deltaSource struct {
	t        *testing.T
	root, db string
	n        int                          // partitions
	part     string                       // the db's partitioner; "": sequins
	sets     map[string]map[string]string // version → its records
}

func newDeltaSource(t *testing.T, root, db string, n int) *deltaSource {
	return &deltaSource{t: t, root: root, db: db, n: n, sets: map[string]map[string]string{}}
}

// digest is the _DIGEST of a set of records under sequins' partitioner.
func (s *deltaSource) digest(set map[string]string) []byte {
	part, err := plugins.Open(context.Background(), cmp.Or(s.part, "sequins"), plugins.DefaultConfig())
	if err != nil {
		s.t.Fatal(err)
	}
	defer closePartitioner(part)
	dgs := make([]blocks.Digester, s.n)
	for k, v := range set {
		p, _, err := part.Partition([]byte(k), s.n)
		if err != nil {
			s.t.Fatal(err)
		}
		dgs[p].Add([]byte(k), []byte(v))
	}
	parts := make([]blocks.Digest, s.n)
	for p := range dgs {
		parts[p] = dgs[p].Digest
	}
	return blocks.NewVersionDigest(part.Identity(), parts).Marshal()
}

func (s *deltaSource) write(version, file string, b []byte) {
	s.t.Helper()
	path := filepath.Join(s.root, s.db, version, file)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func sortedRecords(set map[string]string) []nodetest.Record {
	var rs []nodetest.Record
	for _, k := range slices.Sorted(maps.Keys(set)) {
		rs = append(rs, nodetest.Record{Key: []byte(k), Value: []byte(set[k])})
	}
	return rs
}

// full writes a full version of keys key-0…key-(n-1).
func (s *deltaSource) full(version string, keys int) {
	set := map[string]string{}
	for i := range keys {
		set[fmt.Sprint("key-", i)] = fmt.Sprintf("%s:%d", version, i)
	}
	s.fullSet(version, set)
}

// fullSet writes a full version holding set.
func (s *deltaSource) fullSet(version string, set map[string]string) {
	s.sets[version] = set
	s.write(version, blocks.DigestFileName, s.digest(set))
	nodetest.WriteVersion(s.t, s.root, s.db, version, s.n, sortedRecords(set))
}

// delta writes version as a delta over base: upserts and deletes. digest
// false writes a _DIGEST that does not match.
func (s *deltaSource) delta(version, base string, upserts map[string]string, deletes []string, goodDigest bool) {
	s.t.Helper()
	set := maps.Clone(s.sets[base])
	maps.Copy(set, upserts)
	for _, k := range deletes {
		delete(set, k)
	}
	s.sets[version] = set
	s.write(version, blocks.BaseFileName, []byte(base+"\n"))
	if !goodDigest {
		set = maps.Clone(set)
		set["key-0"] += "!"
	}
	s.write(version, blocks.DigestFileName, s.digest(set))
	var w strings.Builder
	dw := blocks.NewDeletesWriter(&w)
	for _, k := range deletes {
		if err := dw.Add([]byte(k)); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := dw.Close(); err != nil {
		s.t.Fatal(err)
	}
	s.write(version, blocks.DeletesFileName, []byte(w.String()))
	nodetest.WriteVersion(s.t, s.root, s.db, version, 1, sortedRecords(upserts))
}

// check reads every key of version's set, and a deleted one, from n.
func (s *deltaSource) check(n *testNode, version string, gone ...string) {
	s.t.Helper()
	for k, v := range s.sets[version] {
		res, err := n.get(s.t, s.db, k)
		if err != nil || !res.Found || string(res.Value) != v {
			s.t.Fatalf("%s: %s = %q, %v; want %q", version, k, res.Value, err, v)
		}
	}
	for _, k := range gone {
		if res, err := n.get(s.t, s.db, k); err != nil || res.Found {
			s.t.Fatalf("%s: deleted %s: %+v, %v", version, k, res, err)
		}
	}
}

func TestDeltaVersions(t *testing.T) {
	root := t.TempDir()
	src := newDeltaSource(t, root, "d", 4)
	src.full("v1", 200)
	n := newTestNode(t, root, nil)
	waitFor(t, "v1", func() bool { return n.activeVersion("d") == "v1" })

	src.delta("v2", "v1", map[string]string{"key-1": "v2:1", "new-1": "v2:new"}, []string{"key-2"}, true)
	n.Refresh()
	waitFor(t, "v2", func() bool { return n.activeVersion("d") == "v2" })
	src.check(n, "v2", "key-2")
	if di := (*n.dbs.Load())["d"].active.Load().data.Manifest().Delta; di == nil || di.Base != "v1" || di.Added != 1 || di.Changed != 1 || di.Deleted != 1 {
		t.Errorf("delta info %+v", di)
	}

	// A digest that does not match: ERROR, v2 keeps serving.
	src.delta("v3", "v2", map[string]string{"key-3": "v3:3"}, nil, false)
	n.Refresh()
	waitFor(t, "v3 to fail", func() bool { return n.state("d", "v3") == StateError })
	if e := n.Status().DBs["d"].Versions["v3"].Nodes[n.Name()].Error; !strings.Contains(e, "digest mismatch") || !strings.Contains(e, "partition") {
		t.Errorf("v3's error: %q", e)
	}
	src.check(n, "v2", "key-2")
	if _, err := os.Stat(filepath.Join(n.data, "dbs", "d", "v3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("v3 left files: %v", err)
	}

	// A chain with a hole: v5's base is nowhere.
	src.write("v5", blocks.BaseFileName, []byte("v4"))
	nodetest.WriteVersion(t, root, "d", "v5", 1, nil)
	n.Refresh()
	waitFor(t, "v5 to fail", func() bool { return n.state("d", "v5") == StateError })
	if e := n.Status().DBs["d"].Versions["v5"].Nodes[n.Name()].Error; !strings.Contains(e, "base v4 is not in the source") {
		t.Errorf("v5's error: %q", e)
	}
	if err := os.RemoveAll(filepath.Join(root, "d", "v5")); err != nil {
		t.Fatal(err)
	}

	// v6 over v2; then a new node follows the chain v1 → v2 → v6.
	src.delta("v6", "v2", map[string]string{"key-6": "v6:6"}, []string{"key-7", "new-1"}, true)
	n.Refresh()
	waitFor(t, "v6", func() bool { return n.activeVersion("d") == "v6" })
	src.check(n, "v6", "key-2", "key-7", "new-1")

	reg := prometheus.NewRegistry()
	fresh := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	waitFor(t, "v6 on a new node", func() bool { return fresh.activeVersion("d") == "v6" })
	src.check(fresh, "v6", "key-2", "key-7", "new-1")
	for _, v := range []string{"v1", "v2"} {
		if _, err := os.Stat(filepath.Join(fresh.data, "dbs", "d", v)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("base %s built for the chain left behind: %v", v, err)
		}
	}
	if got := nodetest.Metric(t, reg, "spangle_delta_builds_total", "db", "d"); got != 2 {
		t.Errorf("delta builds on the new node: %v, want 2 (v2, v6)", got)
	}
}

// TestDeltaLikeFull builds the same next version as a delta over the one
// before and in full, in two dbs configured alike, for every compression
// and a Wasm partitioner: the partitions hold the same records (their
// checksums) and digests, both checked against _DIGEST.
func TestDeltaLikeFull(t *testing.T) {
	root := t.TempDir()
	cases := map[string]DBConfig{
		"none": {}, "s2": {Compression: "s2"}, "zstd": {Compression: "zstd"}, "blocks": {Compression: "s2-blocks"},
		"wasm": {Partitioner: testModule(t, "murmur3.wasm"), Compression: "zstd"},
	}
	dbs := map[string]DBConfig{}
	for name, cfg := range cases {
		src := newDeltaSource(t, root, name, 5)
		src.part = cfg.Partitioner
		src.full("v1", 3000)
		ups := map[string]string{}
		var dels []string
		for i := range 3000 {
			switch {
			case i%50 == 1:
				ups[fmt.Sprint("key-", i)] = fmt.Sprintf("v2:%d", i)
			case i%50 == 2:
				ups[fmt.Sprint("new-", i)] = fmt.Sprintf("v2:new:%d", i)
			case i%500 == 3:
				dels = append(dels, fmt.Sprint("key-", i))
			}
		}
		src.delta("v2", "v1", ups, dels, true)
		full := newDeltaSource(t, root, name+"-full", 5)
		full.part = cfg.Partitioner
		full.fullSet("v2", src.sets["v2"])
		dbs[name], dbs[name+"-full"] = cfg, cfg
	}
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.DBs = dbs; c.Registerer = reg })
	for name := range cases {
		waitFor(t, name+" v2", func() bool { return n.activeVersion(name) == "v2" && n.activeVersion(name+"-full") == "v2" })
		dm := (*n.dbs.Load())[name].active.Load().data.Manifest()
		fm := (*n.dbs.Load())[name+"-full"].active.Load().data.Manifest()
		if dm.Delta == nil || fm.Delta != nil || dm.Records != fm.Records {
			t.Fatalf("%s: delta %+v, %d records; full %+v, %d", name, dm.Delta, dm.Records, fm.Delta, fm.Records)
		}
		for i := range dm.PartitionInfo {
			d, f := dm.PartitionInfo[i], fm.PartitionInfo[i]
			if (d.Checksum != "" && d.Checksum != f.Checksum) || d.Digest != f.Digest || d.Records != f.Records || d.Bytes != f.Bytes {
				t.Errorf("%s partition %d: delta %s %s, full %s %s", name, d.Partition, d.Checksum, d.Digest, f.Checksum, f.Digest)
			}
		}
		if ok := nodetest.Metric(t, reg, "spangle_digest_checks_total", "db", name, "result", "ok"); ok != 2 { // v1, built as v2's base, and v2
			t.Errorf("%s: %v digests checked, want 2", name, ok)
		}
	}
}

// TestDeltaNoSpace: a delta whose partitions (about its base's) do not
// fit on the data dir's disk fails at once, saying so; the base serves.
func TestDeltaNoSpace(t *testing.T) {
	disk := nodetest.SmallDisk(t, "12m")
	root := t.TempDir()
	src := newDeltaSource(t, root, "d", 4)
	set := map[string]string{}
	for i := range 600 {
		set[fmt.Sprint("key-", i)] = strings.Repeat(fmt.Sprint(i), 10<<10/len(fmt.Sprint(i)))
	}
	src.fullSet("v1", set)
	n := newTestNode(t, root, func(c *Config) { c.DataDir = filepath.Join(disk, "data"); c.Compression = "none" })
	waitFor(t, "v1", func() bool { return n.activeVersion("d") == "v1" })
	src.delta("v2", "v1", map[string]string{"key-1": "small"}, nil, true)
	n.Refresh()
	waitFor(t, "v2 to fail", func() bool { return n.state("d", "v2") == StateError })
	if e := n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()].Error; !strings.Contains(e, "the delta over v1 needs about") {
		t.Errorf("v2's error: %q", e)
	}
	if res, err := n.get(t, "d", "key-1"); err != nil || string(res.Value) != set["key-1"] {
		t.Fatalf("v1 after the failed delta: %v", err)
	}
}
