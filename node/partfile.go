package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spangledb/spangle/blocks"
)

// PartFile is a built partition file opened for a peer to copy (issue
// 35): the caller reads it and closes File.
type PartFile struct {
	File *os.File
	// Size and Checksum are the manifest's StoredBytes and FileChecksum.
	Size     int64
	Checksum string
}

// OpenPartFile opens partition p's file of db's version (active, pending
// or retired, or staged: built here in full for the peers) for a peer
// copying it. ErrUnknownDB, ErrUnknownVersion, or
// ErrPartitionNotHeld when this node does not hold it.
func (n *Node) OpenPartFile(db, version string, p int) (PartFile, error) {
	data := n.staged(db, version) // build once: every partition (peercopy_once.go)
	if data == nil || !data.Holds(p) {
		v, err := n.heldVersion(db, version)
		if err != nil {
			return PartFile{}, err
		}
		data = v.data
	}
	f, pi, err := data.OpenPartitionFile(p)
	switch {
	case errors.Is(err, blocks.ErrPartitionNotHeld):
		return PartFile{}, fmt.Errorf("%w: %s/%s partition %d", ErrPartitionNotHeld, db, version, p)
	case errors.Is(err, blocks.ErrClosed):
		return PartFile{}, fmt.Errorf("%w: %s/%s", ErrUnknownVersion, db, version)
	case err != nil:
		return PartFile{}, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return PartFile{}, err
	}
	size := pi.StoredBytes
	if size <= 0 {
		size = st.Size()
	}
	return PartFile{File: f, Size: size, Checksum: pi.FileChecksum}, nil
}

// PartManifest returns the manifest of db's version held here, as JSON,
// for a peer copying its partition files.
func (n *Node) PartManifest(db, version string) ([]byte, error) {
	if sv := n.staged(db, version); sv != nil { // build once: every partition
		return json.Marshal(sv.Manifest())
	}
	v, err := n.heldVersion(db, version)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v.data.Manifest())
}

// heldVersion returns db's version called name held here: active,
// pending or retired (a peer copy does not restart a retired version's
// retention timer).
func (n *Node) heldVersion(db, name string) (*version, error) {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return nil, ErrUnknownDB
	}
	v, _ := d.named(name)
	if v == nil {
		return nil, fmt.Errorf("%w: %s/%s", ErrUnknownVersion, db, name)
	}
	return v, nil
}
