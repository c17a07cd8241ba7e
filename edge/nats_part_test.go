package edge_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/plugins"
)

// partSubject returns the part subject of key in a db version of n
// sequins partitions, and the key's partition.
func partSubject(t *testing.T, db, version string, n int, key []byte) (string, int) {
	t.Helper()
	p, _, err := must(plugins.Builtin("sequins")).Partition(key, n)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("spangle.%s.part.%s.%s.%d", edgetest.Cluster, db, version, p), p
}

// TestNATSPartWrongPartition (issue 32): a part subject answers only the
// keys of its partition: another partition's key is 400, saying which
// partition holds it, where every key of every partition was answered
// (the node holds all four here). It fails without the check.
func TestNATSPartWrongPartition(t *testing.T) {
	env := startNATSEnv(t)
	key := []byte("key-7")
	right, p := partSubject(t, "d", "v1", 4, key)
	if m := env.request(t, right, key); m.Header.Get("Spangle-Status") != "200" || string(m.Data) != "v1:7" {
		t.Fatalf("%s: %v %q", right, m.Header, m.Data)
	}
	for q := range 4 {
		if q == p {
			continue
		}
		subject := fmt.Sprintf("spangle.%s.part.d.v1.%d", edgetest.Cluster, q)
		m := env.request(t, subject, key)
		if m.Header.Get("Spangle-Status") != "400" || len(m.Data) != 0 ||
			!strings.Contains(m.Header.Get("Spangle-Error"), fmt.Sprintf("partition %d", p)) {
			t.Errorf("%s answered key-7 (partition %d): %v %q", subject, p, m.Header, m.Data)
		}
	}
}

// TestNATSPartNotActivated (issue 32): a version built but not activated
// (activation "manual") is readable on its part subjects by no one but
// peers over HTTP with the peer token: a part request naming it is
// answered from the active version, as a plain lookup is. Before, it
// answered from the version waiting for its activation. It fails without
// the check.
func TestNATSPartNotActivated(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "m", "v1", 2, edgetest.Numbered("v1", 50))
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	n := edgetest.StartNode(t, kv, root, edgetest.Options{
		Node: func(c *node.Config) {
			c.DBs = map[string]node.DBConfig{"m": {Activation: node.ActivationManual}}
		},
	})
	if err := n.Pin("m", node.Pin{Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	nc := edgetest.Connect(t, kv.ClientURL())
	key := []byte("key-3")
	v1, _ := partSubject(t, "m", "v1", 2, key)
	edgetest.WaitFor(t, "v1 active", func() error {
		m, err := nc.Request(v1, key, time.Second)
		if err != nil {
			return err
		}
		if string(m.Data) != "v1:3" {
			return fmt.Errorf("%v %q", m.Header, m.Data)
		}
		return nil
	})

	edgetest.WriteVersion(t, root, "m", "v2", 2, edgetest.Numbered("v2", 50))
	n.Refresh()
	v2, _ := partSubject(t, "m", "v2", 2, key)
	edgetest.WaitFor(t, "v2 built ahead", func() error {
		_, err := nc.Request(v2, key, time.Second) // subscribed once held
		return err
	})
	if st := n.Status().DBs["m"].Versions["v2"].Nodes[n.Name()].State; st != node.StateAvailable {
		t.Fatalf("v2 is %s here, want %s (waiting for its activation)", st, node.StateAvailable)
	}
	m, err := nc.Request(v2, key, edgetest.Timeout)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Spangle-Version") != "v1" || string(m.Data) != "v1:3" {
		t.Errorf("%s: %v %q, want v1's answer", v2, m.Header, m.Data)
	}
}
