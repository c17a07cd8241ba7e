package listenaddr

import "testing"

// TestLoopback: the embedded NATS server runs without users, and the
// admin API answers without a token, only on these.
func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:6060": true, "127.0.0.2:4222": true, "localhost:6060": true, "LOCALHOST:1": true, "[::1]:6060": true,
		":6060": false, "0.0.0.0:6060": false, "[::]:4222": false, "10.0.0.1:6060": false, "example.com:80": false,
		"6060": false, "": false, "127.0.0.1": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
