package node

import (
	"errors"
	"testing"
	"time"
)

// TestPinRollback: a node on v2 pinned to v1 builds v1 again and serves
// it; the pin survives a restart; a pin to "the newest before v2" is the
// same; removing the pin returns the db to v2; a pin naming a version the
// source lacks keeps the active version, with the reason in the status.
func TestPinRollback(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 2, 20)
	writeVersion(t, root, "d", "v2", 2, 20)
	n := newTestNode(t, root, nil)
	waitFor(t, "v2 active", func() bool { return n.activeVersion("d") == "v2" })

	if err := n.Pin("d", Pin{Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "rolled back to v1", func() bool { return n.activeVersion("d") == "v1" })
	if right, _ := readAllKeys(t, n, "d", "v1", 20); right != 20 {
		t.Fatalf("%d of 20 keys read v1's values", right)
	}
	if st := n.Status().DBs["d"]; st.Pinned != "v1" {
		t.Errorf("status: pinned %q, want v1", st.Pinned)
	}
	// A new version does not move a pinned db.
	writeVersion(t, root, "d", "v3", 2, 20)
	n.Refresh()
	waitFor(t, "the refresh seen", func() bool { return n.activeVersion("d") == "v1" })

	// Restart on the same data dir: still v1.
	cfg := n.cfg
	if err := n.Shutdown(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	n = startTestNode(t, cfg)
	if v := n.activeVersion("d"); v != "v1" {
		t.Fatalf("after a restart the node serves %q, want the pinned v1", v)
	}

	if err := n.Pin("d", Pin{Before: "v3"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the newest before v3", func() bool { return n.activeVersion("d") == "v2" })

	if err := n.Pin("d", Pin{Version: "v9"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pin error in the status", func() bool { return n.Status().DBs["d"].PinError != "" })
	if v := n.activeVersion("d"); v != "v2" {
		t.Errorf("a pin to a missing version moved the db to %q", v)
	}

	if err := n.Pin("d", Pin{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "back to the newest, v3", func() bool { return n.activeVersion("d") == "v3" })
	if st := n.Status().DBs["d"]; st.Pinned != "" || st.PinError != "" {
		t.Errorf("status after unpinning: %+v", st)
	}
	if err := n.Pin("d", Pin{Version: "v1", Before: "v2"}); !errors.Is(err, ErrConfig) {
		t.Errorf("a pin with a version and a before: %v", err)
	}
}

// TestManualActivation: a manual db builds each new version and keeps
// serving the one activated, until a pin names the new one.
func TestManualActivation(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 2, 20)
	n := newTestNode(t, root, func(c *Config) {
		c.DBs = map[string]DBConfig{"d": {Activation: ActivationManual}}
	})
	waitFor(t, "v1 built", func() bool { return n.state("d", "v1") == StateAvailable })
	if v := n.activeVersion("d"); v != "" {
		t.Fatalf("a manual db activated %s on its own", v)
	}
	if err := n.Pin("d", Pin{Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v1 activated", func() bool { return n.activeVersion("d") == "v1" })

	writeVersion(t, root, "d", "v2", 2, 20)
	n.Refresh()
	waitFor(t, "v2 built", func() bool { return n.state("d", "v2") == StateAvailable })
	if v := n.activeVersion("d"); v != "v1" {
		t.Fatalf("v2 went active on its own: %s", v)
	}
	if st := n.Status().DBs["d"]; st.Activation != ActivationManual {
		t.Errorf("status: activation %q", st.Activation)
	}
	start := time.Now()
	if err := n.Pin("d", Pin{Version: "v2"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v2 activated", func() bool { return n.activeVersion("d") == "v2" })
	t.Logf("v2, built ahead, active %v after the activation", time.Since(start))
	if right, _ := readAllKeys(t, n, "d", "v2", 20); right != 20 {
		t.Fatalf("%d of 20 keys read v2's values", right)
	}
}

// TestPinSources: the cluster's pins (SetPins) win over the node's own
// (Pin) for the same db, and replacing them leaves the node's own pins
// of other dbs, and of the same db once the cluster's is gone, in place.
func TestPinSources(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"v1", "v2", "v3"} {
		writeVersion(t, root, "d", v, 2, 10)
	}
	n := newTestNode(t, root, nil)
	waitFor(t, "v3", func() bool { return n.activeVersion("d") == "v3" })
	if err := n.Pin("d", Pin{Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node's own pin: v1", func() bool { return n.activeVersion("d") == "v1" })
	if err := n.SetPins(map[string]Pin{}); err != nil { // a cluster without pins
		t.Fatal(err)
	}
	if got := n.Pins()["d"]; got.Version != "v1" {
		t.Fatalf("an empty cluster set removed the node's own pin: %+v", got)
	}
	if err := n.SetPins(map[string]Pin{"d": {Version: "v2"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster's pin: v2", func() bool { return n.activeVersion("d") == "v2" })
	if err := n.SetPins(nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node's own pin again: v1", func() bool { return n.activeVersion("d") == "v1" })

	// A pin of a db the node does not serve shows in its status.
	if err := n.SetPins(map[string]Pin{"ghost": {Before: "v9"}}); err != nil {
		t.Fatal(err)
	}
	if got := n.Status().OtherPins; len(got) != 1 || got["ghost"] != "newest before v9" {
		t.Errorf("status of a pin of a db not served: %v", got)
	}
}
