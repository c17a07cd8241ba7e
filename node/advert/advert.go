package advert

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every error of the Decode functions.
var ErrInvalid = errors.New("advert: invalid entry")

// Node states, in the order a node goes through them.
const (
	// StateStarting: the node is up and loading its local versions.
	StateStarting = "STARTING"
	// StateServing: the node has processed its first source listing.
	StateServing = "SERVING"
	// StateDraining: the node is shutting down; it finishes in-flight
	// requests and should get no new ones.
	StateDraining = "DRAINING"
)

// Node is a node's entry in the nodes bucket, key NodeKey(ID).
type Node struct {
	ID      string    `json:"id"`
	Name    string    `json:"name,omitempty"`    // the node's name in status pages
	ShardID string    `json:"shard_id"`          // nodes sharing one hold the same partitions
	Address string    `json:"address,omitempty"` // HTTP host:port peers and clients reach
	State   string    `json:"state"`             // StateStarting, StateServing or StateDraining
	Started time.Time `json:"started"`           // when the node started
	// BinaryVersion is the spangle release the node runs.
	BinaryVersion string `json:"binary_version,omitempty"`
}

// Partitions is a node's entry for one version of a db in the partitions
// bucket, key PartitionsKey(DB, Version, NodeID): the partitions of that
// version the node can answer for.
type Partitions struct {
	DB      string `json:"db"`
	Version string `json:"version"`
	NodeID  string `json:"node_id"`
	ShardID string `json:"shard_id,omitempty"`
	// Partitions held, increasing, each in [0, NumPartitions).
	Partitions    []int  `json:"partitions"`
	NumPartitions int    `json:"num_partitions"`
	Partitioner   string `json:"partitioner"` // "sequins", "murmur3", "wasm:sha256:<hex>", ...
	Address       string `json:"address,omitempty"`
	// Subjects is the NATS subject prefix of the node's front door,
	// "spangle.<cluster>": it answers <Subjects>.part.<db>.<version>.<p>
	// for each p in Partitions. Empty when the node has no NATS front door.
	Subjects string `json:"subjects,omitempty"`
	// Active is true for the version the node answers unpinned lookups
	// from; false for one kept only for requests naming it.
	Active bool `json:"active"`
}

// Version is a db's entry in the versions bucket, key VersionKey(DB): the
// version clients should read, as the node that wrote it last saw it.
// `spangle publish` writes an announcement of a version it uploaded: only
// DB and Version set (NumPartitions 0, no NodeID); nodes reading the NATS
// Object Store take it as the change feed, clients ignore it until a node
// that activated the version overwrites it.
type Version struct {
	DB            string    `json:"db"`
	Version       string    `json:"version"`
	NumPartitions int       `json:"num_partitions"`
	Partitioner   string    `json:"partitioner"`
	NodeID        string    `json:"node_id,omitempty"` // the writer
	ActiveAt      time.Time `json:"active_at"`         // when the writer activated it
}

var nameRe = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)

// ValidName reports whether s can be a db, version or node ID: one KV key
// token and one NATS subject token.
func ValidName(s string) bool { return nameRe.MatchString(s) }

// NodeKey returns the nodes-bucket key of a node.
func NodeKey(nodeID string) string { return nodeID }

// PartitionsKey returns the partitions-bucket key "<db>.<version>.<nodeID>".
func PartitionsKey(db, version, nodeID string) string { return db + "." + version + "." + nodeID }

// VersionKey returns the versions-bucket key of a db.
func VersionKey(db string) string { return db }

// ParsePartitionsKey splits a partitions-bucket key; ok is false unless it
// is three valid names.
func ParsePartitionsKey(key string) (db, version, nodeID string, ok bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || !ValidName(parts[0]) || !ValidName(parts[1]) || !ValidName(parts[2]) {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// Encode returns the JSON of an entry. It fails only for values JSON
// cannot hold.
func Encode(entry any) ([]byte, error) { return json.Marshal(entry) }

// DecodeNode decodes the nodes-bucket entry stored under key. An entry
// without an ID takes the key's.
func DecodeNode(key string, b []byte) (Node, error) {
	var n Node
	if err := decode(b, &n); err != nil {
		return Node{}, fmt.Errorf("%w: node %q: %v", ErrInvalid, key, err)
	}
	if !ValidName(key) {
		return Node{}, fmt.Errorf("%w: node key %q", ErrInvalid, key)
	}
	if n.ID == "" {
		n.ID = key
	}
	switch {
	case n.ID != key:
		return Node{}, fmt.Errorf("%w: node %q: entry names node %q", ErrInvalid, key, n.ID)
	case n.State != StateStarting && n.State != StateServing && n.State != StateDraining:
		return Node{}, fmt.Errorf("%w: node %q: unknown state %q", ErrInvalid, key, n.State)
	}
	return n, nil
}

// DecodePartitions decodes the partitions-bucket entry stored under key.
// Names missing from the entry are taken from the key.
func DecodePartitions(key string, b []byte) (Partitions, error) {
	db, version, nodeID, ok := ParsePartitionsKey(key)
	if !ok {
		return Partitions{}, fmt.Errorf("%w: partitions key %q", ErrInvalid, key)
	}
	var p Partitions
	if err := decode(b, &p); err != nil {
		return Partitions{}, fmt.Errorf("%w: partitions %q: %v", ErrInvalid, key, err)
	}
	fill(&p.DB, db)
	fill(&p.Version, version)
	fill(&p.NodeID, nodeID)
	if p.DB != db || p.Version != version || p.NodeID != nodeID {
		return Partitions{}, fmt.Errorf("%w: partitions %q: entry names %s.%s.%s", ErrInvalid, key, p.DB, p.Version, p.NodeID)
	}
	if err := checkPartitions(p.Partitions, p.NumPartitions); err != nil {
		return Partitions{}, fmt.Errorf("%w: partitions %q: %v", ErrInvalid, key, err)
	}
	return p, nil
}

// DecodeVersion decodes the versions-bucket entry stored under key.
func DecodeVersion(key string, b []byte) (Version, error) {
	if !ValidName(key) {
		return Version{}, fmt.Errorf("%w: version key %q", ErrInvalid, key)
	}
	var v Version
	if err := decode(b, &v); err != nil {
		return Version{}, fmt.Errorf("%w: version %q: %v", ErrInvalid, key, err)
	}
	fill(&v.DB, key)
	switch {
	case v.DB != key:
		return Version{}, fmt.Errorf("%w: version %q: entry names db %q", ErrInvalid, key, v.DB)
	case !ValidName(v.Version):
		return Version{}, fmt.Errorf("%w: version %q: bad version name %q", ErrInvalid, key, v.Version)
	case v.NumPartitions < 0:
		return Version{}, fmt.Errorf("%w: version %q: num_partitions %d", ErrInvalid, key, v.NumPartitions)
	}
	return v, nil
}

func decode(b []byte, v any) error { return json.Unmarshal(b, v) }

func fill(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}

// checkPartitions checks that ps is increasing and within [0, n).
func checkPartitions(ps []int, n int) error {
	if n < 0 {
		return fmt.Errorf("num_partitions %d", n)
	}
	if !slices.IsSorted(ps) {
		return errors.New("partitions not in increasing order")
	}
	for i, p := range ps {
		if p < 0 || p >= n {
			return fmt.Errorf("partition %d out of [0, %d)", p, n)
		}
		if i > 0 && ps[i-1] == p {
			return fmt.Errorf("partition %d listed twice", p)
		}
	}
	return nil
}
