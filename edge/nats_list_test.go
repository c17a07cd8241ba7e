package edge_test

import (
	"strings"
	"testing"

	"github.com/spangledb/spangle/node/listwire"
)

// TestNATSList: the list subject answers pages in listwire, following
// cursors to the complete listing; hostile requests are 400 with a
// reason, a page whose one value passes max_payload 413, an unknown db
// 404.
func TestNATSList(t *testing.T) {
	env := startNATSEnv(t)
	const subject = "spangle.test.list.d"
	var keys []string
	req := listwire.Request{Prefix: []byte("key-"), Limit: 7}
	for pages := 0; ; pages++ {
		m := env.request(t, subject, listwire.AppendRequest(nil, req))
		if got := m.Header.Get("Spangle-Status"); got != "200" {
			t.Fatalf("page %d: status %s: %s", pages, got, m.Header.Get("Spangle-Error"))
		}
		page, err := listwire.DecodeReply(m.Data, 7)
		if err != nil || page.Version != "v1" || m.Header.Get("Spangle-Version") != "v1" {
			t.Fatalf("page %d: %+v, %v", pages, page, err)
		}
		for _, k := range page.Keys {
			keys = append(keys, string(k))
		}
		if page.Cursor == "" {
			break
		}
		req.Cursor = page.Cursor
	}
	if len(keys) != 100 || !strings.HasPrefix(keys[0], "key-0") {
		t.Fatalf("%d keys, first %q", len(keys), keys[:1])
	}
	for _, tc := range []struct {
		name, subject string
		data          []byte
		status, error string
	}{
		{"garbage", subject, []byte("not a listing"), "400", "not a listing request"},
		{"limit over max_list_keys", subject, listwire.AppendRequest(nil, listwire.Request{Limit: 1001}), "400", "max_list_keys"},
		{"garbage cursor", subject, listwire.AppendRequest(nil, listwire.Request{Cursor: "garbage"}), "400", "bad cursor"},
		{"a value over max_payload", subject, listwire.AppendRequest(nil, listwire.Request{Prefix: []byte("huge"), Values: true}), "413", "over the page's"},
		{"unknown db", "spangle.test.list.nope", listwire.AppendRequest(nil, listwire.Request{}), "404", ""},
	} {
		m := env.request(t, tc.subject, tc.data)
		if got := m.Header.Get("Spangle-Status"); got != tc.status || !strings.Contains(m.Header.Get("Spangle-Error"), tc.error) {
			t.Errorf("%s: %s %q, want %s with %q", tc.name, got, m.Header.Get("Spangle-Error"), tc.status, tc.error)
		}
	}
}
