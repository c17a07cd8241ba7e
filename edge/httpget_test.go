package edge_test

import (
	"io"
	"net/http"
	"testing"
)

// httpGet GETs url and returns the response, its body read and closed,
// and the body; a failed request or read fails t.
func httpGet(t testing.TB, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp, string(body)
}
