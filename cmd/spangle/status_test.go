package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
)

// TestStatusShowsPins: status over HTTP and over NATS shows each db's pin
// and why a node cannot follow it (issue 29: it showed neither).
func TestStatusShowsPins(t *testing.T) {
	var out bytes.Buffer
	printStatus(&out, "http://n1", node.Status{Release: "v1.2.3", DBs: map[string]node.DBStatus{
		"d": {Pinned: "v9", PinError: "node: the pinned version is not in the source: v9"},
		"e": {},
	}, OtherPins: map[string]string{"ghost": "v1"}})
	for _, want := range []string{"(spangle v1.2.3)", "d: pinned to v9", "d: cannot follow the pin: the pinned version is not in the source: v9",
		"ghost: pinned to v1, a db this node does not serve"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status --http lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "e: pinned") {
		t.Errorf("status --http shows a pin of an unpinned db:\n%s", out.String())
	}

	out.Reset()
	printMap(&out, client.Map{Loaded: true, Nodes: map[string]advert.Node{
		"n1": {ID: "n1", State: advert.StateServing, Pins: map[string]advert.PinState{
			"d": {Pin: "v9", Error: "node: the pinned version is not in the source: v9"},
			"e": {Pin: "newest before v3", Target: "v2"},
			"f": {Pin: "v4"},
		}},
	}, Partitions: []advert.Partitions{
		{DB: "g", Version: "v2", NodeID: "n1", NumPartitions: 1, Partitions: []int{0}, Refused: "min_records: 3 records, fewer than min_records 5"},
	}})
	for _, want := range []string{"PINNED TO", "cannot follow the pin: the pinned version is not in the source: v9", "newest before v3  v2", "(not answered yet)",
		"REFUSED BY ITS GUARDS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status --nats lacks %q:\n%s", want, out.String())
		}
	}
	if !regexp.MustCompile(`\ng +v2 +n1 +min_records: 3 records, fewer than min_records 5\n`).MatchString(out.String()) {
		t.Errorf("status --nats lacks g's refusal:\n%s", out.String())
	}
}

// TestStatusShowsBuildFailed: status --nats shows each node's last
// failed build of a db, and why.
func TestStatusShowsBuildFailed(t *testing.T) {
	var out bytes.Buffer
	printMap(&out, client.Map{Loaded: true, Nodes: map[string]advert.Node{
		"n1": {ID: "n1", State: advert.StateServing, BuildFailed: map[string]advert.BuildFailure{"d": {Version: "v4", Reason: "node: unexpected EOF"}}},
	}})
	if !regexp.MustCompile(`LAST BUILD FAILED\nd +v4 +n1 +unexpected EOF\n`).MatchString(out.String()) {
		t.Errorf("status --nats lacks n1's failed build of d:\n%s", out.String())
	}
}

// TestStatusShowsBuilder: a version a node waits for its builder to
// build (build once) says so, naming the builder, instead of a 0 %
// build.
func TestStatusShowsBuilder(t *testing.T) {
	var out bytes.Buffer
	printStatus(&out, "http://n1", node.Status{DBs: map[string]node.DBStatus{"d": {Versions: map[string]node.VersionStatus{
		"v1": {NumPartitions: 6, Build: &node.BuildProgress{WaitingForBuilder: "10.0.0.3:9599"},
			Nodes: map[string]node.NodeVersionStatus{"n1": {State: node.StateBuilding}}},
	}}}})
	if want := "waiting for its builder 10.0.0.3:9599 (build once)"; !strings.Contains(out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, out.String())
	}
}
