package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReady checks the probe of the container image's HEALTHCHECK: an
// error (exit 1) naming the answer until /readyz answers 200.
func TestReady(t *testing.T) {
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !up.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	if err := ready([]string{"--http", srv.URL}, io.Discard); err == nil || !strings.Contains(err.Error(), "503 Service Unavailable not ready") {
		t.Fatalf("not ready: %v", err)
	}
	up.Store(true)
	if err := ready([]string{"--http", srv.URL + "/"}, io.Discard); err != nil {
		t.Fatalf("ready: %v", err)
	}
	srv.Close()
	if err := ready([]string{"--http", srv.URL}, io.Discard); err == nil {
		t.Fatal("no error from a closed port")
	}
	// HTTPS: the node's certificate is verified unless --insecure.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer tlsSrv.Close()
	if err := ready([]string{"--http", tlsSrv.URL}, io.Discard); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("https to an unknown certificate: %v", err)
	}
	if err := ready([]string{"--http", tlsSrv.URL, "--insecure"}, io.Discard); err != nil {
		t.Fatalf("https --insecure: %v", err)
	}
	if err := ready([]string{"extra"}, io.Discard); err == nil {
		t.Fatal("no error for an argument")
	}
}
