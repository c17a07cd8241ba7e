package region

import "errors"

// ErrHub is wrapped by CheckHub's errors: the hub's JetStream does not
// answer through the region's NATS server.
var ErrHub = errors.New("region: hub unreachable")
