package kvwatch

import (
	"regexp"
	"strconv"
	"strings"
)

// Bucket names one of the cluster's KV buckets.
type Bucket uint8

const (
	// Nodes holds one TTL'd entry per live node, key NodeKey(nodeID).
	Nodes Bucket = iota
	// Partitions holds one TTL'd entry per node and version it serves, key
	// PartitionKey(db, version, nodeID).
	Partitions
	// Versions holds one permanent entry per db, key VersionKey(db): the
	// newest published version.
	Versions

	numBuckets = 3
)

// allBuckets lists every bucket, in order.
var allBuckets = [numBuckets]Bucket{Nodes, Partitions, Versions}

// String returns "nodes", "partitions" or "versions".
func (b Bucket) String() string {
	switch b {
	case Nodes:
		return "nodes"
	case Partitions:
		return "partitions"
	case Versions:
		return "versions"
	}
	return "Bucket(" + strconv.Itoa(int(b)) + ")"
}

// TTL reports whether the bucket holds TTL'd entries, written with Publish.
func (b Bucket) TTL() bool { return b == Nodes || b == Partitions }

func (b Bucket) valid() bool { return b < numBuckets }

// bucketName returns the JetStream KV bucket name of b for a cluster.
func bucketName(cluster string, b Bucket) string {
	return "spangle_" + sanitize(cluster) + "_" + b.String()
}

// sanitize replaces every character that is not valid in a bucket name.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

var nameRe = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)

// ValidName reports whether s is a valid db, version or node ID name
// (^[-_a-zA-Z0-9]+$), and so a valid KV key token.
func ValidName(s string) bool { return nameRe.MatchString(s) }

// ValidKey reports whether key is one or more dot-separated valid names.
func ValidKey(key string) bool {
	if key == "" {
		return false
	}
	for tok := range strings.SplitSeq(key, ".") {
		if !ValidName(tok) {
			return false
		}
	}
	return true
}

// NodeKey returns the Nodes key of a node: the node ID itself.
func NodeKey(nodeID string) string { return nodeID }

// PartitionKey returns the Partitions key "<db>.<version>.<nodeID>".
func PartitionKey(db, version, nodeID string) string {
	return db + "." + version + "." + nodeID
}

// PartitionPrefix returns the key prefix "<db>.<version>." shared by the
// Partitions keys of one version, for Snapshot.Range.
func PartitionPrefix(db, version string) string { return db + "." + version + "." }

// ParsePartitionKey splits a Partitions key into its names. ok is false when
// key does not have exactly three valid names.
func ParsePartitionKey(key string) (db, version, nodeID string, ok bool) {
	db, rest, ok1 := strings.Cut(key, ".")
	version, nodeID, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ValidName(db) || !ValidName(version) || !ValidName(nodeID) {
		return "", "", "", false
	}
	return db, version, nodeID, true
}

// VersionKey returns the Versions key of a db: the db name itself.
func VersionKey(db string) string { return db }
