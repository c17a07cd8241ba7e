package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/spangledb/spangle/node/proxy"
)

// A lookup proxied to the one replica of its partition.
func Example() {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A spangle peer: GET /<db>/<key>?proxy=<version>.
		w.Header().Set("X-Spangle-Version", r.URL.Query().Get("proxy"))
		fmt.Fprintf(w, "value of %s", strings.TrimPrefix(r.URL.Path, "/baby-names/"))
	}))
	defer peer.Close()

	p, err := proxy.New(proxy.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer p.Shutdown(context.Background())

	res, err := p.Get(context.Background(), proxy.Request{
		DB: "baby-names", Version: "1", Key: []byte("1881/boy"),
		Peers: []string{strings.TrimPrefix(peer.URL, "http://")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Version, string(res.Body))
	// Output:
	// 200 1 value of 1881/boy
}
