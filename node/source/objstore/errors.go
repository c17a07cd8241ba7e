package objstore

import "errors"

// ErrURL is returned for a source URL that is not nats-object://<bucket>.
var ErrURL = errors.New("objstore: bad source URL")
