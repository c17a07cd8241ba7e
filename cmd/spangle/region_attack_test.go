package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/kvwatch/region"
)

// legacyHub runs TestRegionAttacks against the hub of before the
// regions' accounts (every login in the hub's one account, regions with
// region.HubLeafPublish and HubLeafSubscribe, mirrors making their own
// consumers): the attacks then succeed and the test fails, which shows
// that it can.
var legacyHub = flag.Bool("attacks.legacy", false, "TestRegionAttacks: run against the hub's one-account configuration of before (expected to fail)")

// hubAttackSetup is a hub and regions ra and rb as nats-server
// processes.
type hubAttackSetup struct {
	hub, ra, rb *natsProc
	leafPort    int
}

// fillAccount puts user entries into account acct's users list of an
// accounts block.
func fillAccount(t *testing.T, block, acct string, users ...string) string {
	t.Helper()
	head := fmt.Sprintf("  %q: {\n", acct)
	i := strings.Index(block, head)
	if i < 0 {
		t.Fatalf("no account %s in:\n%s", acct, block)
	}
	j := i + strings.Index(block[i:], "users: [\n") + len("users: [\n")
	return block[:j] + strings.Join(users, "\n") + "\n" + block[j:]
}

// hubUser is a user entry, password "<name>-pw", with the permissions
// spangle nats-permissions prints for args.
func hubUser(t *testing.T, bin, name string, args ...string) string {
	return fmt.Sprintf("{ user: %s, password: %s-pw\n%s }", name, name, permissionsBlock(t, bin, args...))
}

// hubConfig is the hub's configuration: the accounts block spangle
// nats-permissions --accounts --hub-domain hub --regions ra,rb prints,
// with an administrator (admin) in the cluster's account, each region's
// leafnode login (ra, rb) in its account, an operator of every region
// (ops), one of ra (ops-ra) and a publisher (etl); or, legacy, every
// login in one account as before.
func hubConfig(t *testing.T, bin string, legacy bool) string {
	if legacy {
		quoted := func(subjects []string) string {
			q := make([]string, len(subjects))
			for i, s := range subjects {
				q[i] = fmt.Sprintf("%q", s)
			}
			return strings.Join(q, ", ")
		}
		users := []string{"{ user: admin, password: admin-pw }"}
		for _, r := range []string{"ra", "rb"} {
			users = append(users, fmt.Sprintf("{ user: %s, password: %s-pw, permissions: { publish: { allow: [ %s ] }, subscribe: { allow: [ %s ] } } }",
				r, r, quoted(region.HubLeafPublish("hub", "spangle", r)), quoted(region.HubLeafSubscribe(r))))
		}
		users = append(users, hubUser(t, bin, "ops", "--hub-domain", "hub", "operator"),
			hubUser(t, bin, "ops-ra", "--hub-domain", "hub", "--region", "ra", "operator"),
			hubUser(t, bin, "etl", "--hub-domain", "hub", "publisher"))
		return "authorization {\n  users: [\n" + strings.Join(users, "\n") + "\n  ]\n}\n"
	}
	block := permissionsBlock(t, bin, "--accounts", "--hub-domain", "hub", "--regions", "ra,rb")
	block = fillAccount(t, block, names.ClusterAccount("spangle"), "{ user: admin, password: admin-pw }")
	for _, r := range []string{"ra", "rb"} {
		block = fillAccount(t, block, names.RegionAccount("spangle", r), hubUser(t, bin, r, "--accounts", "--hub-domain", "hub", "--region", r, "region"))
	}
	block = fillAccount(t, block, names.RoleAccount("spangle", "operator", ""), hubUser(t, bin, "ops", "--accounts", "--hub-domain", "hub", "operator"))
	block = fillAccount(t, block, names.RoleAccount("spangle", "operator", "ra"), hubUser(t, bin, "ops-ra", "--accounts", "--hub-domain", "hub", "--region", "ra", "operator"))
	block = fillAccount(t, block, names.RoleAccount("spangle", "publisher", "data"), hubUser(t, bin, "etl", "--accounts", "--hub-domain", "hub", "publisher"))
	return block
}

// startHubAndRegions starts the hub with hubConfig and regions ra and rb
// as its leafnodes (their own servers, without users, on loopback: the
// attacks are made with the regions' logins at the hub).
func startHubAndRegions(t *testing.T, bin, natsBin string, legacy bool) *hubAttackSetup {
	dir := t.TempDir()
	hubPort, leafPort := natstest.FreePort(t), natstest.FreePort(t)
	s := &hubAttackSetup{leafPort: leafPort}
	s.hub = &natsProc{name: "hub", url: fmt.Sprintf("nats://127.0.0.1:%d", hubPort),
		storeDir: filepath.Join(dir, "hub"), logPath: filepath.Join(dir, "hub.log")}
	s.hub.args = []string{"-c", writeFile(t, dir, "hub.conf", fmt.Sprintf(`server_name: hub
listen: "127.0.0.1:%d"
jetstream { domain: hub, store_dir: %q }
leafnodes { listen: "127.0.0.1:%d", no_advertise: true }
%s`, hubPort, s.hub.storeDir, leafPort, hubConfig(t, bin, legacy)))}
	s.hub.start(t, natsBin)
	s.hub.cleanup(t)
	for _, r := range []string{"ra", "rb"} {
		port := natstest.FreePort(t)
		p := &natsProc{name: r, url: fmt.Sprintf("nats://127.0.0.1:%d", port),
			storeDir: filepath.Join(dir, r), logPath: filepath.Join(dir, r+".log")}
		p.args = []string{"-c", writeFile(t, dir, r+".conf", fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:%d"
jetstream { domain: %s, store_dir: %q }
leafnodes {
  reconnect: "100ms"
  remotes: [ { url: "nats-leaf://%s:%s-pw@127.0.0.1:%d", deny_imports: ["spangle.>", "$KV.>"], deny_exports: ["spangle.>", "$KV.>"] } ]
}
`, r, port, r, p.storeDir, r, r, leafPort))}
		p.start(t, natsBin)
		p.cleanup(t)
		if r == "ra" {
			s.ra = p
		} else {
			s.rb = p
		}
	}
	return s
}

// as is p's URL with user's login (password "<user>-pw").
func (p *natsProc) as(user string) string {
	return strings.Replace(p.url, "nats://", "nats://"+user+":"+user+"-pw@", 1)
}

// connectWait connects to url, waiting for the server to come up. The
// refusals the attacks meet are read from LastError, not printed.
func connectWait(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	var nc *nats.Conn
	opts = append([]nats.Option{nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)
	waitFor(t, "connect to "+url, func() (err error) {
		nc, err = nats.Connect(url, opts...)
		return err
	})
	t.Cleanup(nc.Close)
	return nc
}

// hubState is what an attack must not change at the hub: every stream
// with its messages and last sequence, every consumer, and the entries
// of the versions and regions buckets (revision and value).
func hubState(ctx context.Context, js jetstream.JetStream) (string, error) {
	var b strings.Builder
	l := js.ListStreams(ctx)
	var streams []*jetstream.StreamInfo
	for si := range l.Info() {
		streams = append(streams, si)
	}
	if err := l.Err(); err != nil {
		return "", err
	}
	slices.SortFunc(streams, func(a, b *jetstream.StreamInfo) int { return strings.Compare(a.Config.Name, b.Config.Name) })
	for _, si := range streams {
		fmt.Fprintf(&b, "stream %s msgs=%d last=%d consumers=%d\n", si.Config.Name, si.State.Msgs, si.State.LastSeq, si.State.Consumers)
		st, err := js.Stream(ctx, si.Config.Name)
		if err != nil {
			return "", err
		}
		cl := st.ListConsumers(ctx)
		var cs []string
		for ci := range cl.Info() {
			cs = append(cs, ci.Name+"→"+ci.Config.DeliverSubject)
		}
		if err := cl.Err(); err != nil {
			return "", err
		}
		slices.Sort(cs)
		fmt.Fprintf(&b, "  consumers %v\n", cs)
	}
	for _, bucket := range []string{names.KVBucket("spangle", names.Versions), names.KVBucket("spangle", names.Regions)} {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			return "", err
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return "", err
		}
		var ks []string
		for k := range keys.Keys() {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for _, k := range ks {
			e, err := kv.Get(ctx, k)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%s %s rev=%d %q\n", bucket, k, e.Revision(), e.Value())
		}
	}
	return b.String(), nil
}

// regionState is what an attack must not change in a region: its
// streams (the mirrors) and their configurations' sources.
func regionState(ctx context.Context, js jetstream.JetStream) (string, error) {
	var out []string
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		src := ""
		if m := si.Config.Mirror; m != nil {
			src = m.Name
			if m.Consumer != nil {
				src += "/" + m.Consumer.Name
			}
		}
		out = append(out, si.Config.Name+"←"+src)
	}
	slices.Sort(out)
	return strings.Join(out, " "), l.Err()
}

// TestRegionAttacks runs a hub and two regions, ra and rb, as nats-server
// processes, configured with exactly what spangle nats-permissions
// --accounts --hub-domain hub --regions ra,rb prints (each region's
// leafnode login in an account of its own, the hub's operators and
// publisher in theirs), the hub's consumers for the regions made by
// spangle region-consumers and each region's mirrors of the hub using
// them ([region] hub_consumers). Then, from ra's login on rb (at the hub,
// and through ra's own server and the leafnode), from the publisher's and
// from ra's operator's, and from rb's login on ra, it replays the attacks of issue 32 (items 1, 2,
// 3 and 6): requests it may make with replies naming a stream's
// deletion, a stream's creation, a pin, rb's entry, rb's consumer's
// deletion; direct gets (copies) onto the same; consumer creation,
// deletion and reset of rb's consumers; rb's JetStream; listening on
// rb's deliveries, its consumers' answers and every inbox. It checks
// that every forbidden publish is refused and logged by the hub, that
// nothing at the hub or in either region changed (streams, messages,
// consumers, entries), that ra heard nothing of rb's, and that both
// regions' mirrors still follow the hub (a put at the hub reaches rb
// within natstest.MirrorWait).
//
// With -attacks.legacy it runs against the hub of before (one account):
// it fails there: ra hears rb's consumer answers (learning its consumers'
// names) and rb's deliveries, and a crafted reply sent through ra's
// server deletes the hub's versions bucket.
func TestRegionAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	legacy := *legacyHub
	bin, natsBin := buildBinary(t), buildNATSServer(t)
	s := startHubAndRegions(t, bin, natsBin, legacy)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	defer cancel()

	// The hub's buckets, as the first spangle publish makes them, an
	// announcement and a pin.
	admin := connectWait(t, s.hub.as("admin"))
	hjs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	versions := names.KVBucket("spangle", names.Versions)
	hkv, err := hjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: versions})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := hjs.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "data"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "d/v1/part-00000", []byte("data of v1")); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"d": "v1", "d.pin": `{"version":"v1"}`} {
		if _, err := hkv.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if !legacy {
		code, stdout, stderr := runCLI(t, bin, "region-consumers", "--nats", s.hub.as("admin"), "--buckets", "data", "ra", "rb")
		if code != 0 || strings.Count(stdout, "created ") != 4 {
			t.Fatalf("region-consumers: exit %d\n%s%s", code, stdout, stderr)
		}
	}
	// ra's leafnode login, at the hub: it listens everywhere it may
	// (every inbox of its account, consumer answers, its deliveries) and
	// tries to listen on rb's.
	raLogin := connectWait(t, s.hub.as("ra"))
	heard := make(chan *nats.Msg, 4096)
	for _, sub := range []string{"_INBOX.>", "$JSC.R.>", "spangle_mirror.>", "$JS.M.>", "$JS.rb.API.>", "_R_.>"} {
		if _, err := raLogin.ChanSubscribe(sub, heard); err != nil {
			t.Fatal(err)
		}
	}
	raLogin.Flush() //nolint:errcheck // the subscriptions are refused or not: heard says

	// Each region's mirrors, as its nodes make them, and its entry in
	// the hub's bucket of regions.
	rjs := map[string]jetstream.JetStream{}
	for _, p := range []*natsProc{s.ra, s.rb} {
		nc := connectWait(t, p.url, nats.CustomInboxPrefix(region.InboxPrefix(p.name)))
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		rjs[p.name] = js
		c := region.DefaultConfig()
		c.Name, c.HubConsumers = p.name, !legacy
		// A new mirror first resets its consumer at the hub: nodes retry
		// until the leafnode carries it, as here.
		waitMirror(t, p.name+"'s mirrors made", func() error {
			if err := c.EnsureObjectMirror(ctx, js, "data", 1); err != nil {
				return err
			}
			_, err := region.EnsureVersionsMirror(ctx, js, c.VersionsMirror(versions, "", 1), "hub")
			return err
		})
		waitMirror(t, p.name+" announces itself at the hub", func() error { return region.Announce(ctx, nc, c, "spangle", time.Hour) })
	}
	// mirrored reports whether region r's mirror of the versions bucket
	// holds want for key d.
	mirrored := func(r, want string) func() error {
		return func() error {
			kv, err := rjs[r].KeyValue(ctx, versions)
			if err != nil {
				return err
			}
			e, err := kv.Get(ctx, "d")
			if err != nil {
				return err
			}
			if string(e.Value()) != want {
				return fmt.Errorf("%s's mirror has d=%q, want %q", r, e.Value(), want)
			}
			return nil
		}
	}
	for _, r := range []string{"ra", "rb"} {
		waitMirror(t, r+"'s mirror of the versions bucket", mirrored(r, "v1"))
	}
	// rb's consumers at the hub, the attacks' targets: the hub's, by
	// name; legacy, the mirrors' own, which ra learns from their answers
	// (heard on "$JSC.R.>": that alone is a leak).
	var rbConsumers []string // "<stream>.<consumer>"
	if !legacy {
		for _, st := range region.MirroredStreams("spangle", []string{"data"}) {
			rbConsumers = append(rbConsumers, st+"."+region.ConsumerName("rb"))
		}
	} else {
		waitMirror(t, "ra learns rb's consumers", func() error {
			for {
				select {
				case m := <-heard:
					var r struct {
						Stream string `json:"stream_name"`
						Name   string `json:"name"`
						Config struct {
							Metadata map[string]string `json:"metadata"`
						} `json:"config"`
					}
					if json.Unmarshal(m.Data, &r) == nil && r.Config.Metadata["_nats.mirror.domain"] == "rb" && !slices.Contains(rbConsumers, r.Stream+"."+r.Name) {
						t.Errorf("ra heard rb's consumer answer on %s: %s.%s", m.Subject, r.Stream, r.Name)
						rbConsumers = append(rbConsumers, r.Stream+"."+r.Name)
					}
					continue
				default:
				}
				if len(rbConsumers) < 2 {
					return fmt.Errorf("%d of rb's consumers heard", len(rbConsumers))
				}
				return nil
			}
		})
	}
	// A stream configuration, as the payload of a copy onto
	// STREAM.CREATE: one capturing rb's deliveries.
	evil := []byte(`{"name":"EVIL","subjects":["spangle_mirror.>","$JSC.>"]}`)
	if _, err := hkv.Put(ctx, "evil", evil); err != nil {
		t.Fatal(err)
	}
	hkv.Delete(ctx, "evil") //nolint:errcheck // only its message is wanted
	// refusedLogged checks that nc's publish of subject is refused: the
	// client gets the violation, and the hub logs it.
	refusedLogged := func(who string, nc *nats.Conn, subject, reply string, body []byte) {
		t.Helper()
		before := nc.LastError()
		m := nats.NewMsg(subject)
		m.Reply, m.Data = reply, body
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		nc.Flush() //nolint:errcheck // the violation is what is awaited
		waitFor(t, who+" refused and logged "+subject, func() error {
			if err := nc.LastError(); err == nil || err == before || !strings.Contains(err.Error(), "Permissions Violation") {
				return fmt.Errorf("%s: publish to %s not refused (last error %v)", who, subject, err)
			}
			// The hub logs a region's "$JS.hub.API.…" under the name its
			// account maps it to.
			logged := subject
			if rest, ok := strings.CutPrefix(subject, "$JS.hub.API.$KV."); ok {
				logged = "$KV." + rest
			} else if rest, ok := strings.CutPrefix(subject, "$JS.hub.API."); ok && (who == "ra" || who == "rb") {
				logged = "$JS.API." + rest
			}
			b, _ := os.ReadFile(s.hub.logPath)
			if !strings.Contains(string(b), `Violation - Subject "`+logged+`"`) {
				return fmt.Errorf("%s: the hub did not log the refusal of %s", who, subject)
			}
			return nil
		})
	}
	// attack replays the attacks from region a's leafnode login (aLogin,
	// whose subscriptions deliver to heard) on region v, whose consumers
	// at the hub are vConsumers, and checks what they did.
	procs := map[string]*natsProc{"ra": s.ra, "rb": s.rb}
	attack := func(a, v string, aLogin *nats.Conn, heard chan *nats.Msg, vConsumers []string) {
		t.Logf("%s's login attacks %s", a, v)
		before, err := hubState(ctx, hjs)
		if err != nil {
			t.Fatal(err)
		}
		regionsBefore := map[string]string{}
		for r, js := range rjs {
			if regionsBefore[r], err = regionState(ctx, js); err != nil {
				t.Fatal(err)
			}
		}

		// What the attacks aim at, as reply subjects, direct get copies'
		// destinations and deliver subjects.
		targets := []string{
			"$JS.API.STREAM.DELETE.OBJ_data",
			"$JS.API.STREAM.DELETE." + names.KVStream(versions),
			"$JS.API.STREAM.CREATE.EVIL",
			names.KVSubject(versions, "d.pin"),
			names.KVSubject(versions, "d.pin."+v),
			names.KVSubject(names.KVBucket("spangle", names.Regions), v),
		}
		for _, c := range vConsumers {
			targets = append(targets, "$JS.API.CONSUMER.DELETE."+c)
		}
		// Item 1 and 6: what ra's login may send, with every crafted
		// reply; the rest refused.
		hub := names.APIPrefix("hub")
		allowed := []string{hub + ".INFO", hub + ".STREAM.INFO.KV_spangle_spangle_regions",
			hub + "." + names.KVSubject(names.KVBucket("spangle", names.Regions), a)}
		if !legacy {
			for _, st := range region.MirroredStreams("spangle", []string{"data"}) {
				allowed = append(allowed, hub+".CONSUMER.RESET."+st+"."+region.ConsumerName(a))
			}
		} else {
			allowed = append(allowed, hub+".DIRECT.GET."+names.KVStream(versions)+"."+names.KVSubject(versions, "d"))
		}
		for _, sub := range allowed {
			for _, reply := range targets {
				body := []byte("ra")
				if strings.HasSuffix(reply, "EVIL") {
					body = evil
				}
				if err := aLogin.PublishRequest(sub, reply, body); err != nil {
					t.Fatal(err)
				}
			}
		}
		if legacy {
			for _, c := range vConsumers {
				aLogin.Request(hub+".CONSUMER.DELETE."+c, nil, time.Second) //nolint:errcheck // legacy: allowed
			}
		}
		if !legacy {
			for _, c := range vConsumers {
				refusedLogged(a, aLogin, hub+".CONSUMER.DELETE."+c, aLogin.NewRespInbox(), nil)
				st, name, _ := strings.Cut(c, ".")
				refusedLogged(a, aLogin, hub+".CONSUMER.RESET."+st+"."+name, aLogin.NewRespInbox(), nil)
				refusedLogged(a, aLogin, hub+".CONSUMER.INFO."+c, aLogin.NewRespInbox(), nil)
			}
			refusedLogged(a, aLogin, hub+".CONSUMER.CREATE.OBJ_data.x", aLogin.NewRespInbox(),
				[]byte(`{"stream_name":"OBJ_data","config":{"name":"x","deliver_subject":"$KV.spangle_spangle_versions.d.pin"}}`))
			refusedLogged(a, aLogin, hub+".DIRECT.GET."+names.KVStream(versions), names.KVSubject(versions, "d.pin"),
				[]byte(`{"last_by_subj":"$KV.spangle_spangle_versions.evil"}`))
			refusedLogged(a, aLogin, hub+".STREAM.DELETE.OBJ_data", aLogin.NewRespInbox(), nil)
			refusedLogged(a, aLogin, hub+"."+names.KVSubject(names.KVBucket("spangle", names.Regions), v), aLogin.NewRespInbox(), []byte("rb"))
			refusedLogged(a, aLogin, "$JS."+v+".API.STREAM.DELETE."+names.KVStream(versions), aLogin.NewRespInbox(), nil)
			refusedLogged(a, aLogin, "spangle_mirror."+v+".OBJ_data", "", []byte("forged"))
		}

		// The same through ra's own server and the leafnode: a client of
		// the region asks the hub for copies and deletions.
		raClient := connectWait(t, procs[a].url)
		for _, sub := range allowed {
			for _, reply := range targets {
				body := []byte("ra")
				if strings.HasSuffix(reply, "EVIL") {
					body = evil
				}
				raClient.PublishRequest(sub, reply, body) //nolint:errcheck // what the hub does with it is checked below
			}
		}
		for _, sub := range []string{hub + ".DIRECT.GET." + names.KVStream(versions), hub + ".STREAM.DELETE.OBJ_data",
			hub + ".CONSUMER.DELETE." + vConsumers[0], "$JS." + v + ".API.STREAM.DELETE." + names.KVStream(versions)} {
			raClient.PublishRequest(sub, names.KVSubject(versions, "d.pin"), []byte(`{"last_by_subj":"$KV.spangle_spangle_versions.evil"}`)) //nolint:errcheck // refused at the hub
		}
		// A barrier: the hub answers a request that followed the attacks on
		// the same path only once it has taken them (JetStream's API answers
		// in order), so that what they do is done before the hub is read.
		barrier := func(who string, nc *nats.Conn, subject string) {
			t.Helper()
			if _, err := nc.Request(subject, nil, testTimeout); err != nil && !legacy {
				t.Errorf("%s: the barrier request %s: %v", who, subject, err)
			}
		}
		barrier(a+"'s server", raClient, hub+".INFO")
		if !legacy { // legacy: ra's login may not subscribe to its own inboxes' form
			barrier(a, aLogin, hub+".INFO")
		}

		// Item 2: the hub's publisher and ra's operator, each through what
		// its account imports, with the same crafted replies.
		if !legacy && a == "ra" {
			etl := connectWait(t, s.hub.as("etl"))
			opsRA := connectWait(t, s.hub.as("ops-ra"))
			ops := connectWait(t, s.hub.as("ops"))
			imported := names.ImportedAPI
			for _, reply := range targets {
				etl.PublishRequest(imported+".DIRECT.GET."+names.KVStream(versions)+"."+names.KVSubject(versions, "d"), reply, nil)                                //nolint:errcheck
				etl.PublishRequest(imported+".INFO", reply, nil)                                                                                                   //nolint:errcheck
				opsRA.PublishRequest(imported+".DIRECT.GET."+names.KVStream(versions)+".>", reply, []byte(`{"last_by_subj":"$KV.spangle_spangle_versions.evil"}`)) //nolint:errcheck
				opsRA.PublishRequest("$JS.ra.API.DIRECT.GET."+names.KVStream(versions), reply, []byte(`{"last_by_subj":"$KV.spangle_spangle_versions.d"}`))        //nolint:errcheck
				ops.PublishRequest("$JS."+v+".API.STREAM.INFO."+names.KVStream(versions), reply, nil)                                                              //nolint:errcheck
			}
			refusedLogged("etl", etl, names.KVSubject(versions, "d.pin"), "", []byte(`{"version":"v0"}`))
			refusedLogged("etl", etl, imported+"."+names.KVSubject(versions, "d.pin"), etl.NewRespInbox(), []byte(`{"version":"v0"}`))
			refusedLogged("etl", etl, imported+".CONSUMER.CREATE.OBJ_data", etl.NewRespInbox(), nil)
			refusedLogged("etl", etl, "$JS."+v+".API.STREAM.INFO."+names.KVStream(versions), etl.NewRespInbox(), nil)
			refusedLogged("ops-ra", opsRA, imported+"."+names.KVSubject(versions, "d.pin."+v), opsRA.NewRespInbox(), []byte(`{"version":"v0"}`))
			refusedLogged("ops-ra", opsRA, imported+"."+names.KVSubject(versions, "d.pin"), opsRA.NewRespInbox(), []byte(`{"version":"v0"}`))
			refusedLogged("ops-ra", opsRA, "$JS."+v+".API.STREAM.INFO."+names.KVStream(versions), opsRA.NewRespInbox(), nil)
			refusedLogged("ops-ra", opsRA, imported+".CONSUMER.DELETE."+vConsumers[0], opsRA.NewRespInbox(), nil)
			for who, nc := range map[string]*nats.Conn{"etl": etl, "ops-ra": opsRA, "ops": ops} {
				barrier(who, nc, imported+".INFO")
			}
		}

		// rb's mirror keeps following the hub, as does ra's.
		if _, err := hkv.Put(ctx, "d", []byte("v2-"+a)); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{v, a} {
			waitMirror(t, r+"'s mirror follows the hub after "+a+"'s attacks", mirrored(r, "v2-"+a))
		}
		// Nothing else changed, at the hub or in a region: the put of v2 (the
		// versions stream's counts, d's entry) and ra's own entry in the
		// bucket of regions (ra may write it) aside.
		after, err := hubState(ctx, hjs)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := unchanged(after, versions, a), unchanged(before, versions, a); got != want {
			t.Errorf("the hub changed by %s's attacks:\nbefore\n%s\nafter\n%s", a, before, after)
		}
		for r, js := range rjs {
			got, err := regionState(ctx, js)
			if err != nil {
				t.Fatal(err)
			}
			if got != regionsBefore[r] {
				t.Errorf("region %s changed by %s's attacks: %s, was %s", r, a, got, regionsBefore[r])
			}
		}
		// ra heard nothing of rb's.
		for {
			select {
			case m := <-heard:
				if strings.Contains(m.Subject, "."+v+".") || strings.Contains(m.Subject, "region_"+v) || strings.Contains(m.Reply, "region_"+v) ||
					strings.Contains(m.Subject, "$JS.M.") || strings.HasPrefix(m.Subject, "$JS."+v+".") {
					t.Errorf("%s heard %s's %s (reply %s)", a, v, m.Subject, m.Reply)
				}
				continue
			default:
			}
			break
		}
	}
	attack("ra", "rb", raLogin, heard, rbConsumers)
	if !legacy {
		// And the other way round.
		rbLogin := connectWait(t, s.hub.as("rb"))
		rbHeard := make(chan *nats.Msg, 4096)
		for _, sub := range []string{"_INBOX.>", "$JSC.R.>", "spangle_mirror.>", "$JS.M.>", "$JS.ra.API.>", "_R_.>"} {
			if _, err := rbLogin.ChanSubscribe(sub, rbHeard); err != nil {
				t.Fatal(err)
			}
		}
		rbLogin.Flush() //nolint:errcheck // the subscriptions are refused or not: rbHeard says
		var raConsumers []string
		for _, st := range region.MirroredStreams("spangle", []string{"data"}) {
			raConsumers = append(raConsumers, st+"."+region.ConsumerName("ra"))
		}
		attack("rb", "ra", rbLogin, rbHeard, raConsumers)
	}
	b, _ := os.ReadFile(s.hub.logPath)
	if n := strings.Count(string(b), "Violation"); n == 0 {
		t.Errorf("the hub logged no violation")
	}
}

// unchanged is a hubState without what TestRegionAttacks changes itself:
// the counts of the versions and regions streams, the versions bucket's
// entry d, and the attacking region a's entry (a may write it).
func unchanged(state, versions, a string) string {
	var out []string
	for _, line := range strings.Split(state, "\n") {
		if strings.HasPrefix(line, "stream KV_"+versions+" ") || strings.HasPrefix(line, "stream KV_spangle_spangle_regions ") ||
			strings.HasPrefix(line, versions+" d rev=") || strings.HasPrefix(line, "spangle_spangle_regions "+a+" rev=") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
