package spangle

import "testing"

// TestLoopbackAddr: the admin API answers without a token only on these.
func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:6060": true, "localhost:6060": true, "[::1]:6060": true,
		":6060": false, "0.0.0.0:6060": false, "10.0.0.1:6060": false, "6060": false,
	} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
