// Package errtext turns an error's text into what a person reads: the
// Go package prefixes that wrapping stacks up ("node: invalid config:
// blocks: invalid build spec: …") are dropped, so that an operator reads
// "invalid config: invalid build spec: …". It changes only the text
// printed (by the CLI, in an HTTP or NATS answer's body): the error
// itself, and errors.Is on it, are untouched. It is a leaf.
package errtext

import "strings"

// packages are the prefixes dropped: the names of this module's packages
// that start their errors with "name: ".
var packages = []string{
	"advert", "assign", "avroin", "batchwire", "blocks", "boltpack", "client", "cluster", "edge",
	"kvwatch", "listwire", "natsconn", "natswire", "node", "objstore", "parquetin",
	"partition", "plugins", "proxy", "region", "s3", "seqfile", "source", "sparkey", "toml", "wasmbuild", "wire",
}

// Strip returns s without the package prefixes that start it or any of
// its parts: after ": ", "; ", "(" or a newline (errors.Join's).
func Strip(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	start := true // at the start of a part
	for i := 0; i < len(s); {
		if start {
			if n := prefixLen(s[i:]); n > 0 {
				i += n
				continue
			}
		}
		c := s[i]
		b.WriteByte(c)
		i++
		start = c == '\n' || c == '(' || (c == ' ' && i >= 2 && (s[i-2] == ':' || s[i-2] == ';'))
	}
	return b.String()
}

// prefixLen is the length of the package prefix ("node: ") s starts
// with, or 0.
func prefixLen(s string) int {
	for _, p := range packages {
		if len(s) > len(p)+2 && s[:len(p)] == p && s[len(p)] == ':' && s[len(p)+1] == ' ' {
			return len(p) + 2
		}
	}
	return 0
}
