package sparkey

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// component releases what it started (docs/ARCHITECTURE.md, "Lifecycle").
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
