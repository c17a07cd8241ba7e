package assign

import "errors"

// ErrUnknownStrategy is returned by ByName for a name it does not know.
var ErrUnknownStrategy = errors.New("assign: unknown strategy")
