package edge

import (
	"regexp"
	"strings"
	"testing"
)

// TestPathsRegex: {paths_regex} matches exactly the batch's paths, whatever
// bytes the keys hold, and holds nothing but letters, digits, "/%-_~()|^$\"
// (no space, "&&" or quote that could end a Varnish ban expression).
func TestPathsRegex(t *testing.T) {
	keys := [][]byte{[]byte("plain-1"), []byte("a b&&obj.http.x ~ ."), []byte(`q"u'o.t*e+d?`), []byte("é/ü"), {0, 0xff}}
	paths := keyPaths("d", keys)
	re := expand("{paths_regex}", placeholders{db: "d", paths: paths}, false)
	if strings.Trim(re, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/%-_~()|^$\\") != "" {
		t.Errorf("regex %q holds other bytes", re)
	}
	rx := regexp.MustCompile(re)
	for _, p := range paths {
		if !rx.MatchString(p) {
			t.Errorf("%q does not match %q", re, p)
		}
	}
	for _, p := range []string{"/d/plain-10", "/d/plain-", "/e/plain-1", "/d/plain-1/x", "x/d/plain-1"} {
		if rx.MatchString(p) {
			t.Errorf("%q matches %q", re, p)
		}
	}
}
