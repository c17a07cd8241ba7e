package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/source"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Pins: rollback and deferred activation.
//
// A pin holds a db at one version on this node, whatever newer versions
// its source has: the pinned version is activated at once when the node
// holds it (active, pending, or retired and kept for peers), else built
// from the source and then activated. Pinning an older version than the
// active one is a rollback; pinning a newer one built ahead (a db with
// DBConfig.Activation "manual" builds new versions and waits) is a
// deferred activation. Removing the pin returns the db to the newest
// version of its source.
//
// A pin may name its version, or ask for the newest version older than
// one (Pin.Before): each node resolves that from its source listing, so
// that nodes reading the same source agree without a coordinator.
//
// Pins are kept in <data_dir>/pins.json, so that a restarted node comes
// back on its pinned version. A node's own pins come from Pin (the admin
// API); the cluster's from the versions bucket (kvcluster.PinFeed calls
// SetPins), the same for every node, and win for a db that has both.
//
// Reads stay monotonic per node except across a rollback: a client that
// saw version 2 sees version 1 after the rollback to it, once.

// Pin is a db's pin: Version, or the newest version older than Before.
type Pin struct {
	Version string `json:"version,omitempty"`
	Before  string `json:"before,omitempty"`
	// Force activates Version even if the db's guards refuse it
	// (spangle activate --force; checks.go).
	Force bool `json:"force,omitempty"`
}

// IsZero reports whether p pins nothing.
func (p Pin) IsZero() bool { return p.Version == "" && p.Before == "" }

func (p Pin) String() string {
	if p.Version != "" {
		return p.Version
	}
	return "newest before " + p.Before
}

func (p Pin) validate() error {
	switch {
	case p.Version != "" && p.Before != "":
		return fmt.Errorf("%w: a pin names a version or one to go back from, not both", ErrConfig)
	case p.Force && p.Version == "":
		return fmt.Errorf("%w: a forced pin names its version", ErrConfig)
	case p.Version != "" && !source.ValidName(p.Version), p.Before != "" && !source.ValidName(p.Before):
		return fmt.Errorf("%w: pin %q: a version name must match %s", ErrConfig, p.String(), source.NamePattern)
	}
	return nil
}

// ErrPinnedVersionMissing is a pin that names a version the source does
// not have (any more).
var ErrPinnedVersionMissing = errors.New("node: the pinned version is not in the source")

// pinsFile is where the pins are kept, in the data dir.
const pinsFile = "pins.json"

// pinSet is the node's pins: its own (Pin: the admin API), and the
// cluster's (SetPins: the versions bucket), which win for a db that has
// both. Both are kept in <data_dir>/pins.json.
type pinSet struct {
	Local   map[string]Pin `json:"local,omitempty"`
	Cluster map[string]Pin `json:"cluster,omitempty"`
}

// of returns db's pin.
func (s pinSet) of(db string) Pin {
	if p, ok := s.Cluster[db]; ok {
		return p
	}
	return s.Local[db]
}

// Pin pins db to p on this node (a zero p removes the pin), keeps it in
// the data dir, and looks for the version at once. A pin of the cluster's
// for the same db wins over it.
func (n *Node) Pin(db string, p Pin) error {
	if !source.ValidName(db) {
		return fmt.Errorf("%w: db name %q", ErrConfig, db)
	}
	if err := p.validate(); err != nil {
		return err
	}
	n.pinsMu.Lock()
	next := n.pins
	next.Local = maps.Clone(next.Local)
	if next.Local == nil {
		next.Local = map[string]Pin{}
	}
	if p.IsZero() {
		delete(next.Local, db)
	} else {
		next.Local[db] = p
	}
	err := n.setPinsLocked(next)
	n.pinsMu.Unlock()
	n.kickDB(db)
	return err
}

// SetPins replaces the cluster's pins (by db), as its versions bucket
// lists them; entries that do not validate are skipped. The node's own
// pins of other dbs stay.
func (n *Node) SetPins(pins map[string]Pin) error {
	next := map[string]Pin{}
	for db, p := range pins {
		if source.ValidName(db) && !p.IsZero() && p.validate() == nil {
			next[db] = p
		}
	}
	n.pinsMu.Lock()
	old := n.pins
	if maps.Equal(old.Cluster, next) {
		n.pinsMu.Unlock()
		return nil
	}
	set := pinSet{Local: old.Local, Cluster: next}
	var dbs []string
	for db := range next {
		if old.of(db) != set.of(db) {
			dbs = append(dbs, db)
		}
	}
	for db := range old.Cluster {
		if old.of(db) != set.of(db) {
			dbs = append(dbs, db)
		}
	}
	err := n.setPinsLocked(set)
	n.pinsMu.Unlock()
	for _, db := range dbs {
		n.kickDB(db)
	}
	return err
}

// Pins returns the pins this node follows, by db.
func (n *Node) Pins() map[string]Pin {
	n.pinsMu.Lock()
	defer n.pinsMu.Unlock()
	out := maps.Clone(n.pins.Local)
	if out == nil {
		out = map[string]Pin{}
	}
	maps.Copy(out, n.pins.Cluster)
	return out
}

// pinOf returns db's pin.
func (n *Node) pinOf(db string) Pin {
	n.pinsMu.Lock()
	defer n.pinsMu.Unlock()
	return n.pins.of(db)
}

// setPinsLocked makes pins current and writes them to the data dir
// (atomically: a temporary file renamed). n.pinsMu is held.
func (n *Node) setPinsLocked(pins pinSet) error {
	n.pins = pins
	b, err := json.MarshalIndent(pins, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(n.cfg.DataDir, pinsFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("node: keep pins: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("node: keep pins: %w", err)
	}
	n.log.Info("pins changed", "local", pins.Local, "cluster", pins.Cluster)
	return nil
}

// loadPins reads the pins kept in the data dir; a missing file is none.
func (n *Node) loadPins() error {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, pinsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var set pinSet
	if err := json.Unmarshal(b, &set); err != nil {
		return fmt.Errorf("node: %s: %w", pinsFile, err)
	}
	for _, m := range []map[string]Pin{set.Local, set.Cluster} {
		for db, p := range m {
			if !source.ValidName(db) || p.validate() != nil || p.IsZero() {
				delete(m, db)
			}
		}
	}
	n.pinsMu.Lock()
	n.pins = set
	n.pinsMu.Unlock()
	return nil
}

// kickDB asks db, if the node serves it, to look at its versions again.
func (n *Node) kickDB(name string) {
	dbs := n.dbs.Load()
	if dbs == nil {
		return
	}
	if d := (*dbs)[name]; d != nil {
		d.kick(true)
	}
}

// resolve returns the version p pins among the source's versions
// (sorted), or "" with ErrPinnedVersionMissing.
func (p Pin) resolve(versions []string) (string, error) {
	if p.Version != "" {
		if !slices.Contains(versions, p.Version) {
			return "", fmt.Errorf("%w: %s", ErrPinnedVersionMissing, p.Version)
		}
		return p.Version, nil
	}
	i, _ := slices.BinarySearch(versions, p.Before)
	if i == 0 {
		return "", fmt.Errorf("%w: no version older than %s", ErrPinnedVersionMissing, p.Before)
	}
	return versions[i-1], nil
}

// manual reports whether the db waits for an activation (a pin) before
// switching to a new version.
func (d *db) manual() bool { return d.cfg.Activation == ActivationManual }

// updatePinned brings the db to the version its pin names: at once when
// this node holds it, else by building it. versions is the source's
// listing. Called on the db's loop.
func (d *db) updatePinned(pin Pin, versions []string) {
	name, err := pin.resolve(versions)
	if err != nil {
		// A version the source lost may still be held here.
		if held, _ := d.named(pin.Version); pin.Version == "" || held == nil {
			d.setPinResult(pin, "", err.Error())
			d.node.log.Error("cannot follow the pin; the active version keeps serving", "db", d.name, "pin", pin.String(), "err", err)
			return
		}
		name = pin.Version
	}
	d.pinTarget = name
	d.setPinResult(pin, name, d.pinRefusal(pin, name))
	if cur := d.active.Load(); cur != nil && cur.name == name {
		if p := d.pending.Load(); p != nil && p.name != name && !d.manual() {
			d.dropPending(p) // built ahead for an activation that a rollback replaced
		}
		return
	}
	if p := d.pending.Load(); p != nil && p.name == name {
		d.trySwitch()
		return
	}
	if d.reactivate(name, "switching to a version kept here, as pinned") {
		return
	}
	d.node.log.Info("building the pinned version", "db", d.name, "version", name, "pin", pin.String())
	if err := d.build(name); err != nil && d.ctx.Err() == nil {
		d.setPinResult(pin, name, fmt.Sprintf("the pinned version %s failed to build: %v", name, err))
		d.node.log.Error("the pinned version failed to build; the active version keeps serving", "db", d.name, "version", name, "err", err)
	}
}

// setPinResult records the db's answer to pin: the version it resolved
// to, or why it cannot follow it (msg). A change is published: the node
// entry carries it (pinStates). Called on the loop.
func (d *db) setPinResult(pin Pin, target, msg string) {
	d.mu.Lock()
	changed := d.pinFor != pin || d.pinResolved != target || d.pinErr != msg
	d.pinFor, d.pinResolved, d.pinErr = pin, target, msg
	d.mu.Unlock()
	if changed {
		d.node.nodeEntryChanged()
	}
}

// maxPinErrorLen bounds a pin error in the node entry.
const maxPinErrorLen = 256

// pinStates returns each pinned db's answer to its pin, for the node
// entry: the pin, and once the db has answered it the version it resolved
// to or why it cannot follow it. Nil without pins.
func (n *Node) pinStates() map[string]advert.PinState {
	dbs := n.dbs.Load()
	if dbs == nil {
		return nil
	}
	var out map[string]advert.PinState
	for name, d := range *dbs {
		pin := n.pinOf(name)
		if pin.IsZero() {
			continue
		}
		st := advert.PinState{Pin: pin.String()}
		d.mu.Lock()
		if d.pinFor == pin {
			st.Target, st.Error = d.pinResolved, d.pinErr
		}
		d.mu.Unlock()
		if len(st.Error) > maxPinErrorLen {
			st.Error = st.Error[:maxPinErrorLen]
		}
		if out == nil {
			out = map[string]advert.PinState{}
		}
		out[name] = st
	}
	return out
}
