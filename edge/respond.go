package edge

import "net/http"

// writeBody writes a complete response with a known body: status, the
// content type, nosniff and Content-Length, and the body unless r is HEAD.
func writeBody(w http.ResponseWriter, r *http.Request, status int, contentType []string, body []byte) {
	writeBodyOn(httpSink{w, r}, status, contentType, body)
}

// writeText writes a plain-text response.
func writeText(w http.ResponseWriter, r *http.Request, status int, text string) {
	writeBodyOn(httpSink{w, r}, status, valText, []byte(text))
}
