package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
)

// verdictPoll is how often the cluster map is read for the nodes' answers
// to a pin.
const verdictPoll = 100 * time.Millisecond

// errPinRefused is a pin that a node cannot follow.
var errPinRefused = errors.New("the pin cannot be followed")

// pinAnswer is one node's answer to a pin.
type pinAnswer struct {
	node, state string // state: "switched to 7", "building 7", an error
	refused     bool
}

// applyPin writes pin p and waits, within ctx, for the nodes' verdict: it
// returns nil once every node serving p.DB follows p (it switched to the
// version, or builds it), printing each node's answer. If a node cannot
// follow it, the pin is withdrawn (the previous one, if any, put back) and
// the error says which node and why; if ctx ends first, the pin stays and
// the error names the nodes that have not answered.
func applyPin(ctx context.Context, kv jetstream.KeyValue, nc *nats.Conn, pf *pinFlags, p advert.Pin, stdout io.Writer) error {
	cluster, region := pf.cluster, pf.region
	c, err := newMapClient(nc, cluster, region)
	if err != nil {
		return err
	}
	defer c.Close(context.Background()) //nolint:errcheck // closes the watcher only
	if err := dbExists(ctx, kv, c, p.DB); err != nil {
		return err
	}
	key := pinKey(p.DB, region)
	prev, err := kv.Get(ctx, key)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%s: the current pin: %w", p.DB, err)
	}
	if err := putPin(ctx, kv, key, p); err != nil {
		return err
	}
	if region == "" && noNodes(ctx, nc, cluster) {
		fmt.Fprintf(stdout, "  written; no node uses this NATS server's buckets to answer (a hub of regions?): every region's nodes follow it through their mirror (spangle status --regions shows them)\n")
		return nil
	}
	want := node.Pin{Version: p.Version, Before: p.Before}
	answers, err := awaitPinAnswers(ctx, c, p.DB, want.String())
	switch {
	case errors.Is(err, errPinRefused):
		undo := withdrawPin(kv, key, p.DB, prev, pf.unpin(p.DB))
		return errors.Join(fmt.Errorf("%s: %w", p.DB, err), undo)
	case err != nil:
		return fmt.Errorf("%s: pinned to %s, but %w; the pin stays (spangle status shows the nodes; `%s` removes it)",
			p.DB, want, err, pf.unpin(p.DB))
	}
	for _, a := range answers {
		fmt.Fprintf(stdout, "  %s: %s\n", a.node, a.state)
	}
	return nil
}

// dbExists returns nil when db is one the cluster knows: the versions
// bucket names it (a node serves it, or spangle publish announced it) or
// a node holds a version of it (a manual db's, built ahead). Otherwise a
// pin would wait for nodes that never answer, and pin the db silently
// should it appear later: the error says so, and nothing is written.
// Whether the version exists is each node's to say (its source listing:
// applyPin's verdict), as a version need not be built anywhere yet.
func dbExists(ctx context.Context, kv jetstream.KeyValue, c *client.Client, db string) error {
	_, err := kv.Get(ctx, advert.VersionKey(db))
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%s: the versions bucket: %w", db, err)
	}
	select {
	case <-c.Ready():
	case <-ctx.Done():
		return fmt.Errorf("%s: is it a db of the cluster? the versions bucket does not name it, and the cluster map was not read within --timeout", db)
	}
	for _, p := range c.Map().Partitions {
		if p.DB == db {
			return nil
		}
	}
	return fmt.Errorf("%s: no such db: no node serves or holds it and no version of it was published (spangle status --nats lists the dbs); nothing pinned", db)
}

// noNodes reports whether the nodes bucket nc reaches is missing or
// empty: a hub of regions (its nodes live in the regions' domains), where
// there is nobody to wait for. It asks for the bucket's first key with a
// batched direct get (an operator's account imports those, and no
// consumer creation).
func noNodes(ctx context.Context, nc *nats.Conn, cluster string) bool {
	bucket := names.KVBucket(cluster, names.Nodes)
	req := []byte(`{"multi_last":["` + names.KVSubject(bucket, ">") + `"],"batch":1}`)
	m, err := nc.RequestWithContext(ctx, names.APIPrefix("")+".DIRECT.GET."+names.KVStream(bucket), req)
	if errors.Is(err, nats.ErrNoResponders) {
		return true
	}
	if err != nil {
		return false
	}
	return m.Header.Get("Status") == "404" || m.Header.Get("Status") == "204"
}

// newMapClient returns a started client on nc that reads the cluster map:
// the cluster's, or with a region that region's, through the hub.
func newMapClient(nc *nats.Conn, cluster, region string) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Conn, cfg.ClusterName, cfg.Domain = nc, cluster, region
	c, err := client.New(cfg)
	if err == nil {
		err = c.Start()
	}
	return c, err
}

// withdrawPin puts back the pin entry prev, or deletes the pin when there
// was none.
func withdrawPin(kv jetstream.KeyValue, key, db string, prev jetstream.KeyValueEntry, unpin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if prev != nil {
		_, err = kv.Put(ctx, key, prev.Value())
	} else {
		err = kv.Purge(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("%s: and the pin could not be withdrawn: %w (`%s` removes it)", db, err, unpin)
	}
	return nil
}

// awaitPinAnswers polls the cluster map until every live node serving db
// (a partitions entry for it, or a pin state) has answered the pin
// written as want: the answers, errPinRefused naming a node that cannot
// follow it, or, once ctx ends, an error naming the nodes still silent.
func awaitPinAnswers(ctx context.Context, c *client.Client, db, want string) ([]pinAnswer, error) {
	t := time.NewTicker(verdictPoll)
	defer t.Stop()
	var silent []string
	for {
		m := c.Map()
		if m.Loaded {
			var answers []pinAnswer
			answers, silent = pinAnswers(m, db, want)
			var refused []string
			for _, a := range answers {
				if a.refused {
					refused = append(refused, a.node+": "+a.state)
				}
			}
			switch {
			case len(refused) > 0:
				return nil, fmt.Errorf("%w: %s; the pin is withdrawn, the nodes keep the version they served", errPinRefused, strings.Join(refused, "; "))
			case len(answers) > 0 && len(silent) == 0:
				return answers, nil
			}
		}
		select {
		case <-ctx.Done():
			if len(silent) == 0 {
				return nil, fmt.Errorf("no node serving %s answered within --timeout", db)
			}
			return nil, fmt.Errorf("no answer within --timeout from %s", strings.Join(silent, ", "))
		case <-t.C:
		}
	}
}

// pinAnswers reads the answers to the pin want of db from the map: those
// given, and the nodes (serving db) that have not answered yet.
func pinAnswers(m client.Map, db, want string) (answers []pinAnswer, silent []string) {
	active := map[string]string{} // node ID → its active version of db
	serves := map[string]bool{}
	for _, p := range m.Partitions {
		if p.DB == db {
			serves[p.NodeID] = true
			if p.Active {
				active[p.NodeID] = p.Version
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(m.Nodes)) {
		n := m.Nodes[id]
		st, pinned := n.Pins[db]
		if n.State == advert.StateDraining || (!pinned && !serves[id]) {
			continue
		}
		name := id
		if n.Name != "" && n.Name != id {
			name = n.Name + " (" + id + ")"
		}
		switch {
		case !pinned || st.Pin != want || (st.Target == "" && st.Error == ""):
			silent = append(silent, name)
		case st.Error != "":
			answers = append(answers, pinAnswer{node: name, state: st.Error, refused: true})
		case active[id] == st.Target:
			answers = append(answers, pinAnswer{node: name, state: "serves " + st.Target})
		default:
			answers = append(answers, pinAnswer{node: name, state: "builds " + st.Target + "; it switches once built (spangle status shows the progress)"})
		}
	}
	return answers, silent
}
