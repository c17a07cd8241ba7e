package names

import "strconv"

// Prefix returns the NATS front door's subject prefix of a cluster,
// "spangle.<cluster>".
func Prefix(cluster string) string { return "spangle." + cluster }

// GetSubject returns "spangle.<cluster>.get.<db>": any node answers.
func GetSubject(cluster, db string) string { return Prefix(cluster) + ".get." + db }

// MGetSubject returns "spangle.<cluster>.mget.<db>", the batch lookups.
func MGetSubject(cluster, db string) string { return Prefix(cluster) + ".mget." + db }

// ListSubject returns "spangle.<cluster>.list.<db>", the key listings
// (node/listwire): any node answers.
func ListSubject(cluster, db string) string { return Prefix(cluster) + ".list." + db }

// PartPrefix returns "spangle.<cluster>.part.<db>.<version>.", to which a
// partition number is appended.
func PartPrefix(cluster, db, version string) string {
	return Prefix(cluster) + ".part." + db + "." + version + "."
}

// PartSubject returns "spangle.<cluster>.part.<db>.<version>.<p>": only
// nodes holding partition p of that version answer.
func PartSubject(cluster, db, version string, p int) string {
	return PartPrefix(cluster, db, version) + strconv.Itoa(p)
}
