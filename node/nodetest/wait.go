package nodetest

import (
	"errors"
	"testing"
	"time"
)

// Poll is the interval at which WaitFor calls its condition: a polling
// interval, never a wait for an outcome.
const Poll = 2 * time.Millisecond

// WaitFor calls cond every Poll until it returns nil, and fails t with
// cond's last error once timeout has passed. It is the one polling loop
// of the project's tests.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v: %v", what, timeout, err)
		}
		time.Sleep(Poll)
	}
}

// errNotYet is the error of a boolean condition that does not hold.
var errNotYet = errors.New("not yet")

// True turns a boolean condition into one for WaitFor.
func True(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}
}
