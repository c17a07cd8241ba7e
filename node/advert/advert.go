package advert

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spangledb/spangle/kvwatch/names"
)

// ErrInvalid is wrapped by every error of the Decode functions.
var ErrInvalid = errors.New("advert: invalid entry")

// Bounds of an entry. Entries come from the KV buckets, which any client
// with write access to them can fill: a Decode function refuses an entry
// outside these bounds before it allocates anything from it.
const (
	// MaxPartitions is the largest partition count of a version (a
	// version's source files).
	MaxPartitions = 65536
	// MaxEntryBytes is the largest entry decoded (NATS's default
	// max_payload). A partitions entry of MaxPartitions partitions takes
	// at most 11 KiB in its bitmap form.
	MaxEntryBytes = 1 << 20
	// MaxNameLen bounds db, version, node and shard names (names.MaxLen).
	MaxNameLen = names.MaxLen
	// maxTextLen bounds the other strings of an entry: addresses,
	// subjects, partitioner names, releases.
	maxTextLen = 512
)

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
	// Pins holds, by db, the node's answer to each db's pin (spangle
	// rollback and activate wait for them). At most MaxPins.
	Pins map[string]PinState `json:"pins,omitempty"`
	// BuildFailed holds, by db, the last version whose build failed on
	// this node and why (build once: peers waiting to copy a version from
	// its builder build their own partitions at once when the builder
	// says so). At most MaxPins.
	BuildFailed map[string]BuildFailure `json:"build_failed,omitempty"`
}

// MaxPins bounds the pins of a node entry, and its failed builds.
const MaxPins = 1024

// BuildFailure is a version whose build failed on a node, and why (at
// most maxTextLen bytes).
type BuildFailure struct {
	Version string `json:"version"`
	Reason  string `json:"reason,omitempty"`
}

// PinState is a node's answer to a db's pin: the pin as node.Pin.String
// writes it ("7", "newest before 7"), and once the node has answered it,
// the version it resolved to (it serves it, or builds it) or why it
// cannot follow the pin (it keeps serving the version it had).
type PinState struct {
	Pin    string `json:"pin"`
	Target string `json:"target,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Partitions is a node's entry for one version of a db in the partitions
// bucket, key PartitionsKey(DB, Version, NodeID): the partitions of that
// version the node can answer for.
type Partitions struct {
	DB      string `json:"db"`
	Version string `json:"version"`
	NodeID  string `json:"node_id"`
	ShardID string `json:"shard_id,omitempty"`
	// Partitions held, increasing, each in [0, NumPartitions). Encode
	// writes them as Bitmap instead when that is shorter; Decode reads
	// either.
	Partitions []int `json:"partitions,omitempty"`
	// NodeStarted is the Started of the node entry of the run that wrote
	// this entry. Partitions entries outlive their node entry (they are
	// not refreshed every heartbeat), so a reader takes one only from a
	// node whose current entry has the same Started: what an earlier run
	// of a restarted node held is ignored. Zero matches any run.
	NodeStarted time.Time `json:"node_started,omitzero"`
	// Bitmap is the partitions as base64 (standard, padded) of
	// ceil(NumPartitions/8) bytes, partition p being bit p%8 (LSB first)
	// of byte p/8. Set only on the wire: DecodePartitions moves it into
	// Partitions.
	Bitmap        string `json:"bitmap,omitempty"`
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
	// Refused is why the db's guards refuse the version on this node
	// (at most MaxRefusedLen bytes); "" when they do not, or an operator
	// forced it. No node activates a version a holder refuses.
	Refused string `json:"refused,omitempty"`
	// Records are the records of each partition of Partitions, in its
	// order (min_records over the cluster); absent from older nodes.
	Records []int64 `json:"records,omitempty"`
}

// MaxRefusedLen bounds Partitions.Refused.
const MaxRefusedLen = 1024

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

// ValidName reports whether s can be a db, version or node ID: one KV key
// token and one NATS subject token, at most MaxNameLen bytes.
func ValidName(s string) bool { return len(s) <= MaxNameLen && names.Valid(s) }

// NodeKey returns the nodes-bucket key of a node.
func NodeKey(nodeID string) string { return names.NodeKey(nodeID) }

// PartitionsKey returns the partitions-bucket key "<db>.<version>.<nodeID>".
func PartitionsKey(db, version, nodeID string) string { return names.PartitionKey(db, version, nodeID) }

// VersionKey returns the versions-bucket key of a db.
func VersionKey(db string) string { return names.VersionKey(db) }

// ParsePartitionsKey splits a partitions-bucket key; ok is false unless it
// is three valid names.
func ParsePartitionsKey(key string) (db, version, nodeID string, ok bool) {
	db, version, nodeID, ok = names.ParsePartitionKey(key)
	if !ok || !ValidName(db) || !ValidName(version) || !ValidName(nodeID) {
		return "", "", "", false
	}
	return db, version, nodeID, true
}

// Encode returns the JSON of an entry. It fails only for values JSON
// cannot hold. A Partitions entry's list is written as a bitmap when that
// is shorter (sequential assignment gives strided sets that ranges would
// not shorten).
func Encode(entry any) ([]byte, error) {
	switch p := entry.(type) {
	case Partitions:
		return json.Marshal(p.wire())
	case *Partitions:
		return json.Marshal(p.wire())
	}
	return json.Marshal(entry)
}

// wire returns p as written: with Bitmap instead of Partitions when that
// is shorter.
func (p Partitions) wire() Partitions {
	if p.NumPartitions <= 0 || p.NumPartitions > MaxPartitions || checkPartitions(p.Partitions, p.NumPartitions) != nil {
		return p // written as given; readers will refuse it
	}
	bitmapLen := base64.StdEncoding.EncodedLen((p.NumPartitions + 7) / 8)
	listLen := 0
	for _, q := range p.Partitions {
		listLen += 1 + len(strconv.Itoa(q))
	}
	if bitmapLen >= listLen {
		return p
	}
	bits := make([]byte, (p.NumPartitions+7)/8)
	for _, q := range p.Partitions {
		bits[q/8] |= 1 << (q % 8)
	}
	p.Bitmap, p.Partitions = base64.StdEncoding.EncodeToString(bits), nil
	return p
}

// fromBitmap moves p.Bitmap into p.Partitions. NumPartitions must be
// checked already.
func (p *Partitions) fromBitmap() error {
	if p.Bitmap == "" {
		return nil
	}
	if len(p.Partitions) > 0 {
		return errors.New("both partitions and bitmap")
	}
	want := (p.NumPartitions + 7) / 8
	if base64.StdEncoding.DecodedLen(len(p.Bitmap)) > want+3 {
		return fmt.Errorf("bitmap of %d characters for %d partitions", len(p.Bitmap), p.NumPartitions)
	}
	bits, err := base64.StdEncoding.DecodeString(p.Bitmap)
	if err != nil || len(bits) != want {
		return fmt.Errorf("bitmap: %d bytes for %d partitions (%v)", len(bits), p.NumPartitions, err)
	}
	n := 0
	for _, b := range bits {
		n += bitsSet[b]
	}
	ps := make([]int, 0, n)
	for q := range p.NumPartitions {
		if bits[q/8]&(1<<(q%8)) != 0 {
			ps = append(ps, q)
		}
	}
	if len(ps) != n {
		return errors.New("bitmap has bits beyond num_partitions")
	}
	p.Partitions, p.Bitmap = ps, ""
	return nil
}

// bitsSet[b] is the number of bits set in b.
var bitsSet = func() (t [256]int) {
	for b := range t {
		for x := b; x > 0; x >>= 1 {
			t[b] += x & 1
		}
	}
	return t
}()

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
	case n.ShardID != "" && !ValidName(n.ShardID):
		return Node{}, fmt.Errorf("%w: node %q: bad shard ID", ErrInvalid, key)
	}
	if err := checkText(n.Name, n.Address, n.BinaryVersion); err != nil {
		return Node{}, fmt.Errorf("%w: node %q: %v", ErrInvalid, key, err)
	}
	if len(n.Pins) > MaxPins {
		return Node{}, fmt.Errorf("%w: node %q: %d pins, at most %d", ErrInvalid, key, len(n.Pins), MaxPins)
	}
	for db, p := range n.Pins {
		if !ValidName(db) || (p.Target != "" && !ValidName(p.Target)) {
			return Node{}, fmt.Errorf("%w: node %q: bad pin of db %q", ErrInvalid, key, db)
		}
		if err := checkText(p.Pin, p.Error); err != nil {
			return Node{}, fmt.Errorf("%w: node %q: pin of %s: %v", ErrInvalid, key, db, err)
		}
	}
	if len(n.BuildFailed) > MaxPins {
		return Node{}, fmt.Errorf("%w: node %q: %d failed builds, at most %d", ErrInvalid, key, len(n.BuildFailed), MaxPins)
	}
	for db, f := range n.BuildFailed {
		if !ValidName(db) || !ValidName(f.Version) {
			return Node{}, fmt.Errorf("%w: node %q: bad failed build of db %q", ErrInvalid, key, db)
		}
		if err := checkText(f.Reason); err != nil {
			return Node{}, fmt.Errorf("%w: node %q: failed build of %s: %v", ErrInvalid, key, db, err)
		}
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
	if p.ShardID != "" && !ValidName(p.ShardID) {
		return Partitions{}, fmt.Errorf("%w: partitions %q: bad shard ID", ErrInvalid, key)
	}
	if err := checkText(p.Partitioner, p.Address, p.Subjects); err != nil {
		return Partitions{}, fmt.Errorf("%w: partitions %q: %v", ErrInvalid, key, err)
	}
	if p.NumPartitions < 0 || p.NumPartitions > MaxPartitions {
		return Partitions{}, fmt.Errorf("%w: partitions %q: num_partitions %d out of [0, %d]", ErrInvalid, key, p.NumPartitions, MaxPartitions)
	}
	if err := p.fromBitmap(); err != nil {
		return Partitions{}, fmt.Errorf("%w: partitions %q: %v", ErrInvalid, key, err)
	}
	if err := checkPartitions(p.Partitions, p.NumPartitions); err != nil {
		return Partitions{}, fmt.Errorf("%w: partitions %q: %v", ErrInvalid, key, err)
	}
	if len(p.Records) > 0 && len(p.Records) != len(p.Partitions) || slices.ContainsFunc(p.Records, func(r int64) bool { return r < 0 }) {
		return Partitions{}, fmt.Errorf("%w: partitions %q: %d records counts for %d partitions, or a negative one", ErrInvalid, key, len(p.Records), len(p.Partitions))
	}
	if len(p.Refused) > MaxRefusedLen {
		return Partitions{}, fmt.Errorf("%w: partitions %q: refused: %d bytes, want at most %d", ErrInvalid, key, len(p.Refused), MaxRefusedLen)
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
	case v.NumPartitions < 0 || v.NumPartitions > MaxPartitions:
		return Version{}, fmt.Errorf("%w: version %q: num_partitions %d out of [0, %d]", ErrInvalid, key, v.NumPartitions, MaxPartitions)
	case v.NodeID != "" && !ValidName(v.NodeID):
		return Version{}, fmt.Errorf("%w: version %q: bad node ID", ErrInvalid, key)
	}
	if err := checkText(v.Partitioner); err != nil {
		return Version{}, fmt.Errorf("%w: version %q: %v", ErrInvalid, key, err)
	}
	return v, nil
}

// decode unmarshals an entry of at most MaxEntryBytes. The JSON decoder
// allocates in proportion to the input only, which the cap bounds.
func decode(b []byte, v any) error {
	if len(b) > MaxEntryBytes {
		return fmt.Errorf("%d bytes, at most %d", len(b), MaxEntryBytes)
	}
	return json.Unmarshal(b, v)
}

// checkText checks that each of an entry's free-text fields is at most
// maxTextLen bytes.
func checkText(fields ...string) error {
	for _, f := range fields {
		if len(f) > maxTextLen {
			return fmt.Errorf("a field of %d bytes, at most %d", len(f), maxTextLen)
		}
	}
	return nil
}

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

// SameRun reports whether partitions entry p was written by the run of
// its node that wrote node entry n (see Partitions.NodeStarted).
func SameRun(n Node, p Partitions) bool {
	return p.NodeStarted.IsZero() || n.Started.IsZero() || p.NodeStarted.Equal(n.Started)
}

// Pin is a db's pin in the versions bucket, key PinKey(DB), written by
// `spangle activate` and `spangle rollback`: every node holds the db at
// Version, or at the newest version of its source older than Before (a
// rollback from Before), until the entry is deleted. See node.Pin.
type Pin struct {
	DB      string `json:"db"`
	Version string `json:"version,omitempty"`
	Before  string `json:"before,omitempty"`
	// Force activates Version even if the db's guards refuse it
	// (spangle activate --force).
	Force bool      `json:"force,omitempty"`
	At    time.Time `json:"at"`           // when it was written
	By    string    `json:"by,omitempty"` // who wrote it: user@host, for the status
}

// PinKey returns the versions-bucket key of a db's pin (names.PinKey):
// ".pin" cannot be part of a db name, so a pin key never collides with a
// version key (and version readers skip it).
func PinKey(db string) string { return names.PinKey(db) }

// IsPinKey reports whether key is a pin's key.
func IsPinKey(key string) bool { return names.IsPinKey(key) }

// RegionPinKey returns the versions-bucket key of a db's pin in one
// region (names.RegionPinKey).
func RegionPinKey(db, region string) string { return names.RegionPinKey(db, region) }

// ParsePinKey splits a pin key, PinKey or RegionPinKey, into its db and
// region ("" for PinKey), checking both names (at most MaxNameLen). ok is
// false for any other key.
func ParsePinKey(key string) (db, region string, ok bool) {
	db, region, ok = names.ParsePinKey(key)
	if !ok || !ValidName(db) || region != "" && !ValidName(region) {
		return "", "", false
	}
	return db, region, true
}

// DecodePin decodes and checks the pin entry at key, a PinKey or a
// RegionPinKey.
func DecodePin(key string, b []byte) (Pin, error) {
	db, _, ok := ParsePinKey(key)
	if !ok {
		return Pin{}, fmt.Errorf("%w: pin key %q", ErrInvalid, key)
	}
	var p Pin
	if err := decode(b, &p); err != nil {
		return Pin{}, fmt.Errorf("%w: pin %q: %v", ErrInvalid, key, err)
	}
	fill(&p.DB, db)
	switch {
	case p.DB != db:
		return Pin{}, fmt.Errorf("%w: pin %q: entry names db %q", ErrInvalid, key, p.DB)
	case (p.Version == "") == (p.Before == ""):
		return Pin{}, fmt.Errorf("%w: pin %q: want version or before, one of them", ErrInvalid, key)
	case p.Version != "" && !ValidName(p.Version), p.Before != "" && !ValidName(p.Before):
		return Pin{}, fmt.Errorf("%w: pin %q: bad version name", ErrInvalid, key)
	case p.Force && p.Version == "":
		return Pin{}, fmt.Errorf("%w: pin %q: a forced pin names its version", ErrInvalid, key)
	}
	if err := checkText(p.By); err != nil {
		return Pin{}, fmt.Errorf("%w: pin %q: %v", ErrInvalid, key, err)
	}
	return p, nil
}
