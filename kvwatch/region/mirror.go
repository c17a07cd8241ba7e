package region

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natsconn"
)

// ObjectMirror returns the configuration of a region's mirror of the
// hub's Object Store bucket: a stream of the same name, OBJ_<bucket>,
// mirroring the hub's through "$JS.<hubDomain>.API". nats.go's Object
// Store binds it by name, so the region's nodes read the mirror as they
// would the bucket itself; the mirror itself has no subjects, so nothing
// published in the region lands in it.
func ObjectMirror(bucket, hubDomain string, replicas int) jetstream.StreamConfig {
	return Config{HubDomain: hubDomain}.ObjectMirror(bucket, replicas)
}

// ObjectMirror is ObjectMirror in c's hub domain; with c.HubConsumers the
// mirror uses the hub's consumer for c.Name (HubConsumer) instead of
// making its own.
func (c Config) ObjectMirror(bucket string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        names.ObjectStream(bucket),
		Description: "spangle region mirror of Object Store " + bucket + " in domain " + c.HubDomain,
		Mirror:      c.mirrorSource(names.ObjectStream(bucket)),
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Discard:     jetstream.DiscardNew,
		AllowRollup: true,
		AllowDirect: true,
	}
}

// VersionsMirror returns the configuration of a region's mirror of the
// hub's versions KV bucket, under the same bucket name in the region's
// domain. Its watchers read the hub's entries (announcements, pins,
// region pins); a write to it would go to the hub (nats.go sends a
// mirror's puts to its origin), so a region's nodes never write it.
func VersionsMirror(bucket, hubDomain, description string, replicas int) jetstream.KeyValueConfig {
	return Config{HubDomain: hubDomain}.VersionsMirror(bucket, description, replicas)
}

// VersionsMirror is VersionsMirror in c's hub domain, with the hub's
// consumer for c.Name when c.HubConsumers.
func (c Config) VersionsMirror(bucket, description string, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: description,
		History:     1,
		Replicas:    replicas,
		Storage:     jetstream.FileStorage,
		Mirror:      c.mirrorSource(names.KVStream(bucket)),
	}
}

// mirrorSource is the source of a mirror of the hub's stream: through
// the hub's API prefix, and with c.HubConsumers through the durable
// consumer the hub keeps for region c.Name, delivering to its own
// subject (HubConsumer).
func (c Config) mirrorSource(stream string) *jetstream.StreamSource {
	s := &jetstream.StreamSource{
		Name:     stream,
		External: &jetstream.ExternalStream{APIPrefix: names.APIPrefix(c.HubDomain)},
	}
	if c.HubConsumers {
		s.Consumer = &jetstream.StreamConsumerSource{Name: ConsumerName(c.Name), DeliverSubject: DeliverSubject(c.Name, stream)}
	}
	return s
}

// ErrNotMirror is wrapped when a region's stream exists but is not the
// mirror of the hub's that a region needs: a bucket of the region's own
// from before it was a region, or a mirror of something else.
var ErrNotMirror = errors.New("region: not a mirror of the hub")

// IsMirrorOf reports whether a stream configuration mirrors the stream
// named source in hubDomain.
func IsMirrorOf(cfg jetstream.StreamConfig, source, hubDomain string) bool {
	return isMirror(cfg, Config{HubDomain: hubDomain}.mirrorSource(source))
}

// isMirror reports whether cfg mirrors want's stream, through want's API
// prefix and consumer (a mirror making its own consumers is not one
// using the hub's, nor the reverse: a mirror's source cannot change).
func isMirror(cfg jetstream.StreamConfig, want *jetstream.StreamSource) bool {
	m := cfg.Mirror
	if m == nil || m.Name != want.Name || m.External == nil || m.External.APIPrefix != want.External.APIPrefix {
		return false
	}
	if m.Consumer == nil || want.Consumer == nil {
		return m.Consumer == nil && want.Consumer == nil
	}
	return *m.Consumer == *want.Consumer
}

// EnsureObjectMirror creates the region's mirror of the hub's Object Store
// bucket, or checks the one there: idempotent, and safe when several
// nodes of a region do it at once (the one that loses the race finds the
// winner's). It needs only the region's own JetStream (js): a mirror is
// created while the hub is unreachable, and fills when it is back —
// except through the hub's consumer (Config.HubConsumers), which a new
// mirror first resets at the hub to the first message (resetSource), so
// that such a mirror is made only once the hub answers.
func EnsureObjectMirror(ctx context.Context, js jetstream.JetStream, bucket, hubDomain string, replicas int) error {
	return Config{HubDomain: hubDomain}.EnsureObjectMirror(ctx, js, bucket, replicas)
}

// EnsureObjectMirror is EnsureObjectMirror of c.ObjectMirror.
func (c Config) EnsureObjectMirror(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) error {
	want := c.ObjectMirror(bucket, replicas)
	return ensureMirror(ctx, js, want.Name, want.Name, want.Mirror,
		func() error {
			return fmt.Errorf("%w: stream %s exists in this region and is not a mirror of %s in domain %s%s (a bucket of the region's own, or a mirror made before region.hub_consumers changed: delete it, e.g. nats stream rm %s)",
				ErrNotMirror, want.Name, want.Name, c.HubDomain, through(want.Mirror), want.Name)
		},
		func() (bool, error) {
			if err := resetSource(ctx, js, want.Mirror); err != nil {
				return false, err
			}
			_, err := js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return true, nil
			}
			if err != nil {
				return false, fmt.Errorf("region: create mirror %s of domain %s: %w", want.Name, c.HubDomain, err)
			}
			return false, nil
		})
}

// through names the hub's consumer a mirror uses, if any, for errors.
func through(m *jetstream.StreamSource) string {
	if m.Consumer == nil {
		return ""
	}
	return " through the hub's consumer " + m.Consumer.Name
}

// EnsureVersionsMirror creates the region's mirror of the hub's versions
// bucket (want, from VersionsMirror), or binds the one there after
// checking it is that mirror. Idempotent, as EnsureObjectMirror.
func EnsureVersionsMirror(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, hubDomain string) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue // the one created here, if any
	err := ensureMirror(ctx, js, names.KVStream(want.Bucket), want.Bucket, want.Mirror,
		func() error {
			return fmt.Errorf("%w: bucket %s exists in this region and is not a mirror of the hub's in domain %s%s (left from before the node was in a region, or made before region.hub_consumers changed: delete it, e.g. nats kv del %s)",
				ErrNotMirror, want.Bucket, hubDomain, through(want.Mirror), want.Bucket)
		},
		func() (bool, error) {
			if err := resetSource(ctx, js, want.Mirror); err != nil {
				return false, err
			}
			created, err := js.CreateKeyValue(ctx, want)
			if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return true, nil
			}
			if err != nil {
				return false, fmt.Errorf("region: create mirror of bucket %s of domain %s: %w", want.Bucket, hubDomain, err)
			}
			kv = created
			return false, nil
		})
	if err != nil || kv != nil {
		return kv, err
	}
	return js.KeyValue(ctx, want.Bucket)
}

// ensureMirror is the loop of both Ensure functions: the region's stream
// (what names it in errors) is looked up; one there must mirror source
// (notMirror returns the error when it does not); none there is created
// (create), and a create that lost the race to another node (create
// reports lost) looks again, once.
func ensureMirror(ctx context.Context, js jetstream.JetStream, stream, what string, source *jetstream.StreamSource, notMirror func() error, create func() (lost bool, err error)) error {
	for range 2 {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			if !isMirror(s.CachedInfo().Config, source) {
				return notMirror()
			}
			return nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("region: mirror %s: %w", what, err)
		}
		lost, err := create()
		if !lost {
			return err
		}
		// Another node created it meanwhile: check it.
	}
	return fmt.Errorf("region: mirror %s: created and deleted meanwhile", what)
}

// Mirror is the state of a region's mirror, as the region reports it.
type Mirror struct {
	// Connected: the mirror heard from its source within the last
	// ActiveWithin and reports no error.
	Connected bool
	// Pending is how many of the source's messages the mirror has yet to
	// receive (its lag).
	Pending uint64
	// Active is how long ago the mirror last heard from its source; -1
	// if never.
	Active time.Duration
	// Error is the mirror's last error, if any ("stream not found" while
	// the hub's bucket does not exist, say).
	Error string
}

// ActiveWithin is how recently a connected mirror heard from its source:
// nats-server's mirrors get a heartbeat every second and count as stalled
// after 10 s.
const ActiveWithin = 10 * time.Second

// MirrorState asks the JetStream of domain (a region, across the
// leafnode) for the state of its mirror stream: a read-only request,
// answered by the region itself. An error means the region did not
// answer (cut off, stopped) or has no such stream.
func MirrorState(ctx context.Context, nc *nats.Conn, domain, stream string) (Mirror, error) {
	js, err := natsconn.JetStream(nc, natsconn.Options{Domain: domain})
	if err != nil {
		return Mirror{}, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return Mirror{}, fmt.Errorf("region %s: stream %s: %w", domain, stream, err)
	}
	si := s.CachedInfo().Mirror
	if si == nil {
		return Mirror{}, fmt.Errorf("%w: region %s: stream %s is not a mirror", ErrNotMirror, domain, stream)
	}
	m := Mirror{Pending: si.Lag, Active: si.Active}
	if si.Error != nil {
		m.Error = si.Error.Error()
	}
	m.Connected = m.Error == "" && si.Active >= 0 && si.Active < ActiveWithin
	return m, nil
}
