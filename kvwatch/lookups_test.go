package kvwatch

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a
// logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLookupConnRefused: a lookups login the server refuses (a seed of
// no responder user) leaves the clients without a responder, so the node
// says so, once, while it keeps trying; before, nothing was logged.
func TestLookupConnRefused(t *testing.T) {
	c := testConfig(t)
	c.EmbeddedUsers = []User{
		{Name: "node", Password: "pw", Role: RoleNode},
		{Name: "client", Password: "pw", Role: RoleClient},
	}
	serverLogs := &syncBuffer{}
	c.Logger = slog.New(slog.NewTextHandler(serverLogs, nil))
	k := startKV(t, c)
	stranger, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := stranger.Seed()
	nc := testConfig(t, strings.Replace(k.ClientURL(), "nats://", "nats://node:pw@", 1))
	nc.LookupNKeySeedFile = writeFile(t, t.TempDir(), "lookups.nk", seed)
	logs := &syncBuffer{}
	nc.Logger = slog.New(slog.NewTextHandler(logs, nil))
	n := startKV(t, nc)
	lookups, err := n.LookupConn()
	if err != nil || lookups == nil {
		t.Fatalf("LookupConn: %v %v", lookups, err)
	}
	defer lookups.Close()
	waitFor(t, 5*time.Second, "the refusal logged", func() error {
		if !strings.Contains(logs.String(), "NATS lookups connection failed") {
			return fmt.Errorf("not yet:\n%s", logs)
		}
		return nil
	})
	// Three more refusals by the server: still one line.
	refusals := func() int { return strings.Count(serverLogs.String(), "authentication error") }
	seen := refusals()
	waitFor(t, 5*time.Second, "three more attempts refused", func() error {
		if n := refusals(); n < seen+3 {
			return fmt.Errorf("%d refusals, was %d:\n%s", n, seen, serverLogs)
		}
		return nil
	})
	if got := strings.Count(logs.String(), "NATS lookups connection failed"); got != 1 || lookups.IsConnected() {
		t.Errorf("%d lines, connected %v:\n%s", got, lookups.IsConnected(), logs)
	}
}
