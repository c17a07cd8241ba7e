package node

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// Refused versions across a restart: a version its guards refused
// (checks.go) is listed in <data_dir>/refused.json until it is discarded
// or forced active, so that a restarted node keeps serving the version
// it served and holds the refused one, still refused, instead of taking
// the newest version on disk (reuseLocalVersions).

// refusedFile lists the refused versions held, by db then version: the
// reasons.
const refusedFile = "refused.json"

// loadRefusals reads refused.json; nil when missing or unreadable (a
// damaged file costs the refusals, logged, not the start).
func (n *Node) loadRefusals() map[string]map[string]string {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, refusedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var out map[string]map[string]string
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		n.log.Error("cannot read the refused versions; reopened versions are checked again", "file", refusedFile, "err", err)
		return nil
	}
	return out
}

// keepRefusal records that version of db is refused for reason, or with
// reason "" that it no longer is, in refused.json (a temporary file
// renamed).
func (n *Node) keepRefusal(db, version, reason string) {
	n.refusedMu.Lock()
	defer n.refusedMu.Unlock()
	all := n.loadRefusals()
	if reason == "" && all[db][version] == "" {
		return
	}
	if all == nil {
		all = map[string]map[string]string{}
	}
	if reason == "" {
		delete(all[db], version)
		if len(all[db]) == 0 {
			delete(all, db)
		}
	} else {
		if all[db] == nil {
			all[db] = map[string]string{}
		}
		all[db][version] = reason
	}
	b, _ := json.MarshalIndent(all, "", "  ") // maps of strings: cannot fail
	path := filepath.Join(n.cfg.DataDir, refusedFile)
	err := os.WriteFile(path+".tmp", b, 0o644)
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		n.log.Error("cannot keep the refused versions; a restart checks them again", "db", db, "version", version, "err", err)
	}
}
