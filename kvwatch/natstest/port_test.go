package natstest

import "testing"

// TestFreePortDistinct: ports handed out are never handed out again, even
// though each was closed at once (the kernel may give a closed port
// anew).
func TestFreePortDistinct(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
