package names

import "strings"

// Kinds of a cluster's KV buckets, as they appear in bucket names.
const (
	// Nodes holds one TTL'd entry per live node, key NodeKey(nodeID).
	Nodes = "nodes"
	// Partitions holds one TTL'd entry per node and version it serves, key
	// PartitionKey(db, version, nodeID).
	Partitions = "partitions"
	// Versions holds one permanent entry per db, key VersionKey(db), and
	// its pin, key PinKey(db).
	Versions = "versions"
)

// Regions is the kind of the hub's bucket of regions, in a deployment
// with regions: one TTL'd entry per region, key RegionKey(region),
// written by the region's nodes through the leafnode, so that the hub
// knows its regions. It is not one of Kinds: no node watches it.
const Regions = "regions"

// RegionKey returns the Regions key of a region: its name itself.
func RegionKey(region string) string { return region }

// Kinds lists the bucket kinds, in the order kvwatch numbers them.
var Kinds = [...]string{Nodes, Partitions, Versions}

// KVBucket returns the KV bucket of kind in a cluster:
// "spangle_<cluster>_<kind>", invalid characters of the cluster name
// replaced by '_'. kind may be "*" in a subject pattern.
func KVBucket(cluster, kind string) string {
	return "spangle_" + Sanitize(cluster) + "_" + kind
}

// KVStream returns the stream behind a KV bucket, "KV_<bucket>".
func KVStream(bucket string) string { return "KV_" + bucket }

// KVSubject returns the subject of a key in a KV bucket,
// "$KV.<bucket>.<key>": puts, deletes and purges of the key are all
// published there.
func KVSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// ObjectStream returns the stream behind an Object Store bucket,
// "OBJ_<bucket>".
func ObjectStream(bucket string) string { return "OBJ_" + bucket }

// ObjectSubjects returns the subject pattern of an Object Store bucket's
// chunks and metadata, "$O.<bucket>.>".
func ObjectSubjects(bucket string) string { return "$O." + bucket + ".>" }

// APIPrefix returns the prefix of JetStream's API subjects in a domain:
// "$JS.API" for "" (the account's own JetStream), "$JS.<domain>.API"
// otherwise.
func APIPrefix(domain string) string {
	if domain == "" {
		return "$JS.API"
	}
	return "$JS." + domain + ".API"
}

// NodeKey returns the Nodes key of a node: the node ID itself.
func NodeKey(nodeID string) string { return nodeID }

// PartitionKey returns the Partitions key "<db>.<version>.<nodeID>".
func PartitionKey(db, version, nodeID string) string {
	return db + "." + version + "." + nodeID
}

// PartitionPrefix returns the key prefix "<db>.<version>." shared by the
// Partitions keys of one version.
func PartitionPrefix(db, version string) string { return db + "." + version + "." }

// ParsePartitionKey splits a Partitions key into its names. ok is false
// unless key is exactly three valid names.
func ParsePartitionKey(key string) (db, version, nodeID string, ok bool) {
	db, rest, ok1 := strings.Cut(key, ".")
	version, nodeID, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !Valid(db) || !Valid(version) || !Valid(nodeID) {
		return "", "", "", false
	}
	return db, version, nodeID, true
}

// VersionKey returns the Versions key of a db: the db name itself, one
// token.
func VersionKey(db string) string { return db }

// PinSuffix ends the Versions key of a pin. A db name has no dot, so a
// pin key (two tokens) never collides with a version key (one), and
// subject permissions can tell them apart.
const PinSuffix = ".pin"

// PinKey returns the Versions key of a db's pin, "<db>.pin".
func PinKey(db string) string { return db + PinSuffix }

// RegionPinKey returns the Versions key of a db's pin in one region,
// "<db>.pin.<region>": written at the hub, carried to every region by its
// mirror of the versions bucket, taken by the nodes of that region only,
// before the db's pin for all (PinKey). It does not end in PinSuffix, so
// readers that know no regions skip it.
func RegionPinKey(db, region string) string { return db + PinSuffix + "." + region }

// ParsePinKey splits a pin key, PinKey or RegionPinKey, into its db and
// region ("" for PinKey). ok is false for any other key.
func ParsePinKey(key string) (db, region string, ok bool) {
	if db, ok := strings.CutSuffix(key, PinSuffix); ok && Valid(db) {
		return db, "", true
	}
	db, region, ok = strings.Cut(key, PinSuffix+".")
	if !ok || !Valid(db) || !Valid(region) {
		return "", "", false
	}
	return db, region, true
}

// IsPinKey reports whether key is a pin's key.
func IsPinKey(key string) bool { return strings.HasSuffix(key, PinSuffix) }
