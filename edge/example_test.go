package edge_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
)

// mapBackend serves one db, "greetings", from a map.
type mapBackend map[string]string

func (m mapBackend) Get(_ context.Context, db string, key []byte, _ node.GetOptions) (node.Result, error) {
	if db != "greetings" {
		return node.Result{}, node.ErrUnknownDB
	}
	v, ok := m[string(key)]
	return node.Result{Value: []byte(v), Found: ok, Version: "20260301"}, nil
}
func (m mapBackend) Status() node.Status { return node.Status{} }
func (m mapBackend) Ready() bool         { return true }

func ExampleNewServer() {
	cfg := edge.DefaultConfig()
	cfg.Backend = mapBackend{"en/hello": "Hello, world"}
	srv, err := edge.NewServer(cfg)
	if err != nil {
		panic(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()

	for _, path := range []string{"/greetings/en/hello", "/greetings/en%2Fhello", "/greetings/fr/bonjour", "/nope/x"} {
		resp, err := http.Get("http://" + l.Addr().String() + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s: %d %q version=%q\n", path, resp.StatusCode, body, resp.Header.Get("X-Spangle-Version"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fmt.Println(srv.Shutdown(ctx), <-done)
	// Output:
	// /greetings/en/hello: 200 "Hello, world" version="20260301"
	// /greetings/en%2Fhello: 200 "Hello, world" version="20260301"
	// /greetings/fr/bonjour: 404 "" version="20260301"
	// /nope/x: 404 "unknown db: this node serves no db of that name\n" version=""
	// <nil> <nil>
}
