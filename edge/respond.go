package edge

import (
	"net/http"
	"strconv"
)

// writeBody writes a complete response with a known body: status, the
// content type, nosniff and Content-Length, and the body unless r is HEAD.
func writeBody(w http.ResponseWriter, r *http.Request, status int, contentType []string, body []byte) {
	h := w.Header()
	h[hdrContentType] = contentType
	h[hdrNoSniff] = valNoSniff
	h[hdrContentLength] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	if r.Method != http.MethodHead && len(body) > 0 {
		w.Write(body) //nolint:errcheck // the client went away; nothing to do
	}
}

// writeText writes a plain-text response.
func writeText(w http.ResponseWriter, r *http.Request, status int, text string) {
	writeBody(w, r, status, valText, []byte(text))
}
