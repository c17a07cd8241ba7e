package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/listwire"
)

// pagePeer answers every listing with a page of keys of version v,
// checking the request's form and the peer token.
func pagePeer(t testing.TB, v string, keys ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/d/" || q.Get("proxy") != v || q.Get("parts") != "1,3" || q.Get("limit") != "10" ||
			q.Get("start") != "a/\xff" || r.Header.Get(PeerTokenHeader) != "tok" {
			http.Error(w, "bad listing request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		rep := listwire.Reply{Version: v, More: true}
		for _, k := range keys {
			rep.Keys = append(rep.Keys, []byte(k))
		}
		w.Write(listwire.AppendReply(nil, rep)) //nolint:errcheck // test peer
	}
}

// TestList: a page is asked of one peer, then, after StageTimeout without
// an answer, of the next (a staged backup); a peer answering another
// version or an error is skipped; every peer stalled is ErrTimeout after
// ListTimeout, every peer failed ErrNoReplica.
func TestList(t *testing.T) {
	release := newRelease(t)
	stalled := startPeer(t, hang(release))
	good := startPeer(t, pagePeer(t, "v1", "a/1", "a/2"))
	otherVersion := startPeer(t, pagePeer(t, "v0", "x"))
	failing := startPeer(t, status(http.StatusInternalServerError))
	p := newProxy(t, func(c *Config) {
		c.PeerToken = "tok"
		c.StageTimeout = 50 * time.Millisecond
		c.ListTimeout = 2 * time.Second
		c.Rand = zeroSource{} // two peers are tried in reverse order
	})
	req := ListRequest{DB: "d", Version: "v1", Partitions: []int{1, 3}, Start: []byte("a/\xff"), Limit: 10}
	for _, peers := range [][]string{{good.addr, stalled.addr}, {good.addr, otherVersion.addr}, {good.addr, failing.addr}} {
		r := req
		r.Peers = peers
		start := time.Now()
		res, err := p.List(context.Background(), r)
		if err != nil || res.Peer != good.addr || len(res.Page.Keys) != 2 || !res.Page.More {
			t.Fatalf("peers %v: %+v, %v", peers, res, err)
		}
		if peers[1] == stalled.addr && (stalled.hits.Load() != 1 || time.Since(start) < 50*time.Millisecond) {
			t.Errorf("the backup came before the stage timeout, or the stalled peer was not asked first (%d hits)", stalled.hits.Load())
		}
	}
	if otherVersion.hits.Load() != 1 || failing.hits.Load() != 1 {
		t.Errorf("the other version's peer asked %d times, the failing one %d: want once each, first", otherVersion.hits.Load(), failing.hits.Load())
	}

	r := req
	r.Peers = []string{stalled.addr}
	p2 := newProxy(t, func(c *Config) { c.PeerToken, c.ListTimeout = "tok", 200*time.Millisecond })
	start := time.Now()
	if _, err := p2.List(context.Background(), r); !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "[1 3]") {
		t.Errorf("a stalled peer: %v, want ErrTimeout naming the partitions", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a stalled peer held the listing %v, ListTimeout 200ms", d)
	}
	r.Peers = []string{failing.addr, otherVersion.addr}
	if _, err := p.List(context.Background(), r); !errors.Is(err, ErrNoReplica) {
		t.Errorf("every peer failed: %v, want ErrNoReplica", err)
	}
	r.Peers = nil
	if _, err := p.List(context.Background(), r); !errors.Is(err, ErrNoReplica) {
		t.Errorf("no peer: %v, want ErrNoReplica", err)
	}
	if _, err := p.List(context.Background(), ListRequest{DB: "d"}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("an invalid request: %v", err)
	}
}

// zeroSource is a rand.Source that always returns 0: Shuffle reverses
// two elements.
type zeroSource struct{}

func (zeroSource) Uint64() uint64 { return 0 }
