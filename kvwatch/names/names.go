package names

import (
	"regexp"
	"strings"
)

// Pattern is what db, version, node, shard and cluster names match.
const Pattern = `^[-_a-zA-Z0-9]+$`

// MaxLen bounds the names decoded from KV entries (node/advert): longer
// ones are refused there.
const MaxLen = 128

var nameRe = regexp.MustCompile(Pattern)

// Valid reports whether s matches Pattern: one KV key token, one NATS
// subject token and one path element.
func Valid(s string) bool { return nameRe.MatchString(s) }

// ValidKey reports whether key is one or more dot-separated valid names.
func ValidKey(key string) bool {
	if key == "" {
		return false
	}
	for tok := range strings.SplitSeq(key, ".") {
		if !Valid(tok) {
			return false
		}
	}
	return true
}

// Sanitize replaces every character of s that is not valid in a name
// with '_'.
func Sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
