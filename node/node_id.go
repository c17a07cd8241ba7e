package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/spangledb/spangle/node/source"
	"os"
	"path/filepath"
	"strings"
)

// nodeIDFile holds the node's ID in the data dir.
const nodeIDFile = "node_id"

// loadNodeID returns the node ID stored in dir, creating it (16 random hex
// digits, written atomically) on first use. The data dir's lock is held.
func loadNodeID(dir string) (string, error) {
	path := filepath.Join(dir, nodeIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !source.ValidName(id) {
			return "", fmt.Errorf("node: %s holds %q, not a valid node ID (%s)", path, id, source.NamePattern)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("node: read node ID: %w", err)
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("node: generate node ID: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	tmp := path + ".tmp"
	if err := writeFileSync(tmp, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("node: write node ID: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("node: write node ID: %w", err)
	}
	return id, nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
