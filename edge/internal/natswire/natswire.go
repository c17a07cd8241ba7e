// Package natswire names what spangle's NATS front door and its clients
// share besides the subjects (kvwatch/names): the reply headers. See
// edge's package doc for their meaning.
package natswire

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
