// Package natswire names what spangle's NATS front door and its clients
// share: the subjects and the reply headers. See edge's package doc for
// their meaning.
package natswire

import (
	"regexp"
	"strconv"
)

// Reply headers.
const (
	// HeaderStatus carries the HTTP status code of the answer, in decimal:
	// 200, 404, 413, 500, 502, 504...
	HeaderStatus = "Spangle-Status"
	// HeaderVersion names the version that answered; absent when the db is
	// unknown or has no version.
	HeaderVersion = "Spangle-Version"
	// HeaderError is a short human-readable reason, on failures.
	HeaderError = "Spangle-Error"
	// HeaderContentType is the media type of the body.
	HeaderContentType = "Content-Type"
	// HeaderRaw, on a request, set to "1" or "true", asks for values as
	// stored, skipping the db's decoder (HTTP: ?raw=1).
	HeaderRaw = "Spangle-Raw"
)

// Raw reports whether a request header value of HeaderRaw asks for raw
// values.
func Raw(v string) bool { return v == "1" || v == "true" }

var tokenRe = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)

// ValidToken reports whether s can be one subject token: a cluster, db or
// version name.
func ValidToken(s string) bool { return tokenRe.MatchString(s) }

// Prefix returns the subject prefix of a cluster, "spangle.<cluster>".
func Prefix(cluster string) string { return "spangle." + cluster }

// GetSubject returns "spangle.<cluster>.get.<db>": any node answers.
func GetSubject(cluster, db string) string { return Prefix(cluster) + ".get." + db }

// MGetSubject returns "spangle.<cluster>.mget.<db>", the batch lookups.
func MGetSubject(cluster, db string) string { return Prefix(cluster) + ".mget." + db }

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
