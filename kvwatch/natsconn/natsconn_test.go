package natsconn_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/spangledb/spangle/kvwatch/natsconn"
	"github.com/spangledb/spangle/kvwatch/natstest"
)

// TestJetStreamDomain opens JetStream in the server's own domain by name
// and without one, and fails to reach a domain nobody serves.
func TestJetStreamDomain(t *testing.T) {
	s := natstest.RunServer(t, &server.Options{JetStreamDomain: "hub"})
	nc, err := natsconn.Connect(s.ClientURL(), natsconn.Options{Name: "natsconn-test", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	tests := []struct {
		domain string
		ok     bool
	}{
		{"", true},
		{"hub", true},
		{"elsewhere", false},
	}
	for _, tt := range tests {
		t.Run("domain="+tt.domain, func(t *testing.T) {
			js, err := natsconn.JetStream(nc, natsconn.Options{Domain: tt.domain, APITimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			info, err := js.AccountInfo(ctx)
			if tt.ok && (err != nil || info.Domain != "hub") {
				t.Fatalf("AccountInfo = %+v, %v; want domain hub", info, err)
			}
			if !tt.ok && err == nil {
				t.Fatalf("reached JetStream domain %q that no server has", tt.domain)
			}
		})
	}
}

// TestAuthErrors: a seed file that cannot be read fails Connect before
// dialling, naming the file.
func TestAuthErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.nk")
	_, err := natsconn.Connect("nats://127.0.0.1:1", natsconn.Options{NKeySeedFile: missing})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("err = %v, want one naming %s", err, missing)
	}
}
