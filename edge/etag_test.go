package edge

import "testing"

func TestNoneMatch(t *testing.T) {
	const tag = `"26c7827d889f6da3"`
	tests := []struct {
		field string
		want  bool
	}{
		{tag, true},
		{"*", true},
		{" * ", true},
		{"W/" + tag, true},
		{`"x", ` + tag, true},
		{`W/"x",W/` + tag, true},
		{"\t" + tag + "\t", true},
		{"", false},
		{`"x"`, false},
		{`"26C7827D889F6DA3"`, false}, // opaque tags compare byte-wise
		{"26c7827d889f6da3", false},
		{`w/` + tag, false},
		{`"x" y ` + tag, false},
		{`"x`, false},
		{`"a b", ` + tag, false}, // a space is not an etagc
		{`W/`, false},
	}
	for _, tt := range tests {
		if got := noneMatch(tt.field, []byte(tag)); got != tt.want {
			t.Errorf("noneMatch(%q) = %v, want %v", tt.field, got, tt.want)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for field, want := range map[string]bool{
		"gzip":                true,
		"GZIP":                true,
		"deflate, gzip;q=0.5": true,
		"*":                   true,
		"gzip;q=0":            false,
		"gzip; q=0.000":       false,
		"gzip;q=0.001":        true,
		"identity":            false,
		"br, x-gzip":          false,
		"":                    false,
		"gzip;q=0, *;q=0":     false,
	} {
		if got := acceptsGzip([]string{field}); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", field, got, want)
		}
	}
}

func TestIfMatch(t *testing.T) {
	const tag = `"26c7827d889f6da3"`
	for field, want := range map[string]bool{
		tag:                  true,
		"*":                  true,
		`"x", ` + tag:        true,
		"W/" + tag:           false, // strong comparison: a weak tag matches nothing
		`W/"x", ` + tag:      true,
		`"x"`:                false,
		"":                   false,
		"26c7827d889f6da3":   false,
		`"x" y ` + tag:       false,
		`W/` + tag + `, "y"`: false,
	} {
		if got := ifMatch(field, []byte(tag)); got != want {
			t.Errorf("ifMatch(%q) = %v, want %v", field, got, want)
		}
	}
}
