package objsource

import "errors"

// ErrURL is returned for a source URL that is not nats-object://<bucket>.
var ErrURL = errors.New("objsource: bad source URL")
