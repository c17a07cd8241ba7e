package listwire_test

import (
	"fmt"

	"github.com/spangledb/spangle/node/listwire"
)

// Example_workedExample checks edge/LIST.md's worked example byte for
// byte.
func Example_workedExample() {
	req := listwire.AppendRequest(nil, listwire.Request{Prefix: []byte("a"), Limit: 2})
	fmt.Printf("% x\n", req)
	rep := listwire.AppendReply(nil, listwire.Reply{Version: "v2", Keys: [][]byte{[]byte("a1"), []byte("a2")}, More: true, Cursor: "AQ..."})
	fmt.Printf("% x\n", rep)
	// Output:
	// 53 4c 51 01 00 02 01 61 00 00 00
	// 53 4c 52 01 02 02 76 32 00 02 02 61 31 02 61 32 05 41 51 2e 2e 2e
}
