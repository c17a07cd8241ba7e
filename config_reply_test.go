package spangle_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spangledb/spangle"
)

// TestConfigReplyPrefixes: [nats] reply_prefixes sets the reply subjects
// the NATS front door answers; a prefix that could match part of a token
// or names a system subject is refused at load, naming the key.
func TestConfigReplyPrefixes(t *testing.T) {
	load := func(body string) (spangle.Config, error) {
		p := filepath.Join(t.TempDir(), "nats.toml")
		if err := os.WriteFile(p, []byte("[nats]\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := spangle.DefaultConfig()
		return c, spangle.LoadConfig(p, &c)
	}
	c, err := load(`reply_prefixes = ["_INBOX.", "_APP."]` + "\n")
	if err != nil || !slices.Equal(c.NATSReplyPrefixes, []string{"_INBOX.", "_APP."}) {
		t.Fatalf("%q %v", c.NATSReplyPrefixes, err)
	}
	for _, bad := range []string{`[]`, `["_INBOX"]`, `["$KV."]`, `["_INBOX.*."]`} {
		if _, err := load("reply_prefixes = " + bad + "\n"); err == nil || !strings.Contains(err.Error(), "nats.reply_prefixes") {
			t.Errorf("reply_prefixes = %s: %v", bad, err)
		}
	}
}
