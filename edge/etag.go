package edge

// noneMatch reports whether an If-None-Match field value lists etag (a
// quoted strong tag) or is "*", with the weak comparison RFC 9110 §13.1.2
// prescribes for GET and HEAD: "W/" prefixes are ignored. Parsing stops at
// the first malformed element, which matches nothing.
func noneMatch(field string, etag []byte) bool { return listsTag(field, etag, false) }

// ifMatch reports whether an If-Match field value lists etag or is "*"
// (the representation exists: it is only asked of a 200), with the
// strong comparison of RFC 9110 §13.1.1: a weak tag ("W/…") matches
// nothing. Parsing stops at the first malformed element, which matches
// nothing.
func ifMatch(field string, etag []byte) bool { return listsTag(field, etag, true) }

// listsTag reports whether field, a "*" or a list of entity tags, holds
// etag; with strong, weak tags are skipped instead of compared.
func listsTag(field string, etag []byte, strong bool) bool {
	for i := 0; i < len(field); {
		switch c := field[i]; {
		case c == ' ' || c == '\t' || c == ',':
			i++
			continue
		case c == '*':
			return true
		}
		weak := false
		if len(field)-i >= 2 && field[i] == 'W' && field[i+1] == '/' {
			i, weak = i+2, true
		}
		if i >= len(field) || field[i] != '"' {
			return false
		}
		j := i + 1
		for j < len(field) && field[j] != '"' {
			// etagc = %x21 / %x23-7E / obs-text
			if c := field[j]; c < 0x21 || c == 0x7f {
				return false
			}
			j++
		}
		if j >= len(field) {
			return false
		}
		if field[i:j+1] == string(etag) && !(strong && weak) {
			return true
		}
		i = j + 1
	}
	return false
}
