package kvwatch

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/spangledb/spangle/internal/listenaddr"
	"github.com/spangledb/spangle/kvwatch/names"
)

// Authentication of the embedded server. With no users configured it
// accepts any client, so it may listen on loopback only unless
// EmbeddedAllowInsecure says otherwise (ErrInsecure). With users, every
// client must log in as one of them (a password, plain or bcrypt, or an
// NKey), and its role bounds what it may publish and subscribe to
// (RolePermissions: exact lists of spangle's subjects, the same an
// external server gets from PermissionsConfig). The node's own in-process
// connection logs in with an NKey generated at each start, never written
// anywhere.

// Roles of embedded-server users (and of an external server's users, with
// the permissions RolePermissions returns). docs/SECURITY.md gives the
// reason for every subject.
const (
	// RoleNode: another spangle node using this server. It reads and
	// writes the cluster's buckets (creating and updating them, never
	// deleting or purging them), answers lookups, and reads the Object
	// Store buckets of its source; it may not write pins.
	RoleNode = "node"
	// RoleOperator: a person running spangle activate and rollback. It
	// reads the cluster's buckets and writes pins (<db>.pin and region
	// pins <db>.pin.<region> of the versions bucket), nothing else.
	RoleOperator = "operator"
	// RolePublisher: a batch job running spangle publish. It writes its
	// Object Store buckets (User.Buckets) and the version announcements
	// (<db> keys of the versions bucket), and reads and creates (never
	// reconfigures) the versions bucket; it may not read or write the
	// nodes and partitions buckets, write pins, reconfigure, delete or
	// purge any other stream, or look keys up.
	RolePublisher = "publisher"
	// RoleClient: a service doing lookups. It may send requests to the
	// get, part, mget and list subjects and read the cluster's buckets (for
	// partition-aware routing); it may not answer lookups, join their
	// queue groups, or write anything.
	RoleClient = "client"
	// RoleResponder: a spangle node's second login, in the client
	// account (accounts.go), answering the clients' lookups there so that
	// they cross no service import. It subscribes to the cluster's lookup
	// subjects and publishes nothing but one answer to each request it
	// received. Only with accounts.
	RoleResponder = "responder"
)

// User is one login of the embedded server.
type User struct {
	// Name and Password log in with a password; a Password starting with
	// "$2" is a bcrypt hash (nats-server's own convention).
	Name     string
	Password string
	// NKey, instead of Name and Password, is a user's public NKey ("U…"):
	// the client signs a challenge with the seed.
	NKey string
	// Role is RoleNode, RoleOperator, RolePublisher, RoleClient or
	// RoleResponder (another node's login answering lookups in the client
	// account).
	Role string
	// Buckets are the Object Store buckets a publisher writes, or a node
	// reads its versions from. Default none; a publisher needs at least
	// one.
	Buckets []string
}

// Scope is what a role's permissions cover: a cluster's buckets and
// subjects, in the JetStream of one domain, and Object Store buckets;
// with regions, the region's JetStream or the hub's.
type Scope struct {
	// Cluster is the spangle cluster name (Config.ClusterName).
	Cluster string
	// Domain is the JetStream domain whose API the buckets are reached
	// through; "" for the account's own (names.APIPrefix). Exclusive
	// with HubDomain. Default "".
	Domain string
	// ObjectBuckets are the Object Store buckets a publisher writes or a
	// node reads. Default none.
	ObjectBuckets []string
	// HubDomain, when set, gives the permissions of a deployment with
	// regions (kvwatch/region) whose hub has this JetStream domain. A
	// node and a client are then users of a region's NATS server: the
	// node reads the hub's versions and Object Store buckets through the
	// region's mirrors of them, which it creates in the region's own
	// domain, and checks that the hub answers. An operator and a
	// publisher are users of the hub's server: the operator pins at the
	// hub and reads the regions' buckets through it ("$JS.<region>.API").
	// Default "": no regions.
	HubDomain string
	// Accounts: the role's users are in an account of their own
	// (accounts.go), and the permissions name the subjects of that
	// account. Default false: every role in one account.
	Accounts bool
	// Region, with HubDomain, bounds an operator to one region: its pins
	// ("<db>.pin.<region>") and its buckets only; and a node to its
	// region's entry in the hub's bucket of regions (which the hub bounds
	// anyway, region.HubLeafPublish). A client's permissions are the same
	// in every region, and a publisher's has none. Default "": an
	// operator of every region and of the pins for all, a node of any
	// region.
	Region string
}

// check reports the first problem of s.
func (s Scope) check() error {
	for _, b := range s.ObjectBuckets {
		if !names.Valid(b) {
			return fmt.Errorf("kvwatch: object store bucket %q must match %s", b, names.Pattern)
		}
	}
	switch {
	case s.Domain != "" && !names.Valid(s.Domain):
		return fmt.Errorf("kvwatch: domain %q must match %s", s.Domain, names.Pattern)
	case s.HubDomain != "" && !names.Valid(s.HubDomain):
		return fmt.Errorf("kvwatch: hub domain %q must match %s", s.HubDomain, names.Pattern)
	case s.Region != "" && !names.Valid(s.Region):
		return fmt.Errorf("kvwatch: region %q must match %s", s.Region, names.Pattern)
	case s.Domain != "" && s.HubDomain != "":
		return fmt.Errorf("kvwatch: a domain (%q) and a hub domain (%q) are exclusive: with regions, a region's users reach its own JetStream and the hub's users the hub's", s.Domain, s.HubDomain)
	case s.Region != "" && s.HubDomain == "":
		return fmt.Errorf("kvwatch: region %q needs the hub's domain", s.Region)
	case s.Region != "" && s.Region == s.HubDomain:
		return fmt.Errorf("kvwatch: region %q is the hub's domain", s.Region)
	}
	return nil
}

// RolePermissions returns the exact subject permissions of role in scope.
// Every allow list names whole subjects or whole-token wildcards of
// spangle's own names, so no deny list is needed: what is not listed is
// refused. Replies to lookups go through the response permission (a
// node may answer the requests it received, and nothing else of
// _INBOX). docs/SECURITY.md gives the reason for every subject.
func RolePermissions(role string, s Scope) (*server.Permissions, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if role == RoleRegion {
		return regionLeafPermissions(s)
	}
	api := names.APIPrefix(s.Domain)
	regions := s.HubDomain != ""
	bucket := func(kind string) string { return names.KVBucket(s.Cluster, kind) }
	versions := bucket(names.Versions)
	// pub starts with what the role reads where it logs in: the
	// cluster's buckets, or only the versions bucket for a publisher.
	var pub []string
	for _, kind := range names.Kinds {
		if role != RolePublisher || kind == names.Versions {
			pub = append(pub, readStream(api, names.KVStream(bucket(kind)))...)
		}
	}
	sub := []string{"_INBOX.>"}
	var resp *server.ResponsePermission
	switch role {
	case RoleNode:
		// Creating a KV bucket starts with the account's information
		// (nats.go checks the API level that TTL markers need): the
		// buckets at a first start and after a loss, the mirrors.
		pub = append(pub, api+".INFO")
		for _, kind := range []string{names.Nodes, names.Partitions} {
			st := names.KVStream(bucket(kind))
			pub = append(pub, api+".STREAM.CREATE."+st, api+".STREAM.UPDATE."+st, names.KVSubject(bucket(kind), ">"))
		}
		if regions {
			// The versions bucket and the Object Store buckets are the
			// region's mirrors of the hub's: the node creates them in its
			// own domain, never updates or writes them (the region's
			// server, not the node, asks the hub for the mirrors'
			// consumers, under the region's leafnode login:
			// region.HubLeafPublish). It checks its server's domain (the
			// account information above) and that the hub answers (the
			// hub's).
			pub = append(pub, api+".STREAM.CREATE."+names.KVStream(versions))
			for _, b := range s.ObjectBuckets {
				st := names.ObjectStream(b)
				pub = append(pub, readStream(api, st)...)
				pub = append(pub, api+".STREAM.CREATE."+st)
			}
			// Through the hub's API prefix: the hub check, and the
			// region's entry in the hub's bucket of regions
			// (region.Announce; the hub lets each region write its own
			// entry only, region.HubLeafPublish).
			hub := names.APIPrefix(s.HubDomain)
			regionsBucket := bucket(names.Regions)
			region := s.Region
			if region == "" {
				region = "*"
			}
			pub = append(pub, hub+".INFO",
				hub+".STREAM.INFO."+names.KVStream(regionsBucket), hub+".STREAM.CREATE."+names.KVStream(regionsBucket),
				hub+"."+names.KVSubject(regionsBucket, region))
			// With [region] hub_consumers, a mirror made anew first resets
			// the region's consumer at the hub to the first message
			// (region.resetSource); the hub's account for the region
			// lets it reset its own consumers only (HubAccountsConfig).
			pub = append(pub, hub+".CONSUMER.RESET.*."+regionConsumer(s.Region))
		} else {
			st := names.KVStream(versions)
			pub = append(pub, api+".STREAM.CREATE."+st, api+".STREAM.UPDATE."+st, names.KVSubject(versions, "*"))
			for _, b := range s.ObjectBuckets {
				pub = append(pub, readStream(api, names.ObjectStream(b))...)
			}
		}
		sub = append(sub, names.Prefix(s.Cluster)+".>")
		resp = &server.ResponsePermission{MaxMsgs: 1, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION}
	case RoleOperator, RolePublisher, RoleClient:
		if !s.Accounts {
			return legacyPermissions(role, s, pub, sub)
		}
		// Users of the role's own account (accounts.go): what they may
		// publish is what the account imports, and a client its lookups,
		// which the nodes answer in its account (RoleResponder).
		imp, err := RoleImports(role, s)
		if err != nil {
			return nil, err
		}
		pub = pub[:0]
		for _, si := range imp {
			pub = append(pub, si.local)
		}
		if role == RoleClient {
			pub = append(pub, lookupSubjects(s.Cluster)...)
		}
		if role == RoleOperator && regions {
			// At a hub with accounts: its regions' buckets, read through
			// the regions' accounts (HubAccountsConfig).
			r := s.Region
			if r == "" {
				r = "*"
			}
			pub = append(pub, operatorRegionsList(s.Cluster).local)
			for _, im := range regionReads(s.Cluster, r) {
				pub = append(pub, im.local)
			}
		}
	case RoleResponder:
		if !s.Accounts {
			return nil, fmt.Errorf("a %s answers lookups in the client account: only with accounts", RoleResponder)
		}
		// The lookup subjects, and one answer to each request: nothing
		// else (an empty allow list, not none, which would allow all).
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{}},
			Subscribe: &server.SubjectPermission{Allow: []string{names.Prefix(s.Cluster) + ".>"}},
			Response:  &server.ResponsePermission{MaxMsgs: 1, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION},
		}, nil
	default:
		return nil, fmt.Errorf("unknown role %q (want %s, %s, %s, %s or %s)", role, RoleNode, RoleOperator, RolePublisher, RoleClient, RoleResponder)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: unique(pub)},
		Subscribe: &server.SubjectPermission{Allow: sub},
		Response:  resp,
	}, nil
}

// unique returns subjects without repeats, in their first order.
func unique(subjects []string) []string {
	seen := make(map[string]bool, len(subjects))
	out := subjects[:0]
	for _, s := range subjects {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// readStream is what reading a stream through the API at prefix api
// takes: bind (INFO), watch or list (an ordered consumer: CREATE in both
// forms, its clean-up DELETE, INFO), gets (DIRECT.GET, MSG.GET) and the
// consumer's flow control.
func readStream(api, stream string) []string {
	return []string{
		api + ".STREAM.INFO." + stream,
		api + ".CONSUMER.CREATE." + stream, api + ".CONSUMER.CREATE." + stream + ".>",
		api + ".CONSUMER.DELETE." + stream + ".*",
		api + ".CONSUMER.INFO." + stream + ".*",
		api + ".DIRECT.GET." + stream, api + ".DIRECT.GET." + stream + ".>",
		api + ".STREAM.MSG.GET." + stream,
		// Flow control replies: $JS.FC.<stream>.… and, with the
		// server's v2 reply format, $JS.FC.<domain>.<account>.<stream>.…
		"$JS.FC." + stream + ".>", "$JS.FC.*.*." + stream + ".>",
	}
}

// addUsers puts c's users, and the node's own NKey users, into o.
func addUsers(o *server.Options, c Config, self selfKeys) error {
	if len(c.EmbeddedUsers) == 0 {
		return nil
	}
	return addAccounts(o, c, self)
}

// userScope is the scope of an embedded-server user: the cluster's
// buckets and its Object Store buckets, in a region the region's.
func (c Config) userScope(u User) Scope {
	s := Scope{Cluster: c.ClusterName, ObjectBuckets: u.Buckets, Accounts: true}
	if c.Region.Enabled() {
		s.HubDomain = c.Region.HubDomain
	}
	return s
}

// selfAuth returns the connection option that logs the node in with its
// generated NKey.
func selfAuth(self nkeys.KeyPair) (nats.Option, error) {
	pub, err := self.PublicKey()
	if err != nil {
		return nil, err
	}
	return nats.Nkey(pub, self.Sign), nil
}

// checkUsers validates the users and the listen address's exposure.
func checkUsers(c Config) error {
	for i, u := range c.EmbeddedUsers {
		switch {
		case u.NKey != "" && (u.Name != "" || u.Password != ""):
			return fmt.Errorf("user %d: an NKey user has no name or password", i+1)
		case u.NKey != "" && !nkeys.IsValidPublicUserKey(u.NKey):
			return fmt.Errorf("user %d: %q is not a public user NKey (U…)", i+1, u.NKey)
		case u.NKey == "" && (u.Name == "" || u.Password == ""):
			return fmt.Errorf("user %d: want a name and a password, or an nkey", i+1)
		}
		if c.Region.Enabled() && (u.Role == RoleOperator || u.Role == RolePublisher) {
			return fmt.Errorf("user %d: role %s: a region's NATS server takes %s and %s logins; publishers and operators log in at the hub (domain %s), where versions and pins live",
				i+1, u.Role, RoleNode, RoleClient, c.Region.HubDomain)
		}
		if _, err := RolePermissions(u.Role, c.userScope(u)); err != nil {
			return fmt.Errorf("user %d: %w", i+1, err)
		}
	}
	if len(c.EmbeddedUsers) == 0 && !c.EmbeddedAllowInsecure && !listenaddr.Loopback(c.EmbeddedListen) {
		return fmt.Errorf("%w: the embedded NATS server would listen on %s with no users: anyone who reaches it reads every value and can forge answers; configure users, listen on loopback, or set allow_insecure",
			ErrInsecure, c.EmbeddedListen)
	}
	return nil
}

// PermissionsConfig returns the permissions of role in scope as a block
// of nats-server's configuration ("permissions: {…}"), for a user of an
// external server: the same lists the embedded server applies.
func PermissionsConfig(role string, s Scope) (string, error) {
	p, err := RolePermissions(role, s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	list := func(indent string, subjects []string) {
		b.WriteString("[\n")
		for _, sub := range subjects {
			fmt.Fprintf(&b, "%s  %q\n", indent, sub)
		}
		b.WriteString(indent + "]\n")
	}
	b.WriteString("permissions: {\n")
	// An empty allow list parses as none, which allows everything:
	// allow_responses alone closes publishing to all but the answers.
	if len(p.Publish.Allow) > 0 || p.Response == nil {
		b.WriteString("  publish: {\n    allow: ")
		list("    ", p.Publish.Allow)
		b.WriteString("  }\n")
	}
	b.WriteString("  subscribe: {\n    allow: ")
	list("    ", p.Subscribe.Allow)
	b.WriteString("  }\n")
	if p.Response != nil {
		fmt.Fprintf(&b, "  allow_responses: { max: %d, expires: %q }\n", p.Response.MaxMsgs, p.Response.Expires.String())
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// legacyPermissions are the permissions of role in scope s for a server
// whose roles share one account (Scope.Accounts false: an external
// server configured before accounts). They bound what a login publishes,
// not what a responder publishes for it: docs/SECURITY.md says what they
// leave open.
func legacyPermissions(role string, s Scope, pub, sub []string) (*server.Permissions, error) {
	api := names.APIPrefix(s.Domain)
	regions := s.HubDomain != ""
	bucket := func(kind string) string { return names.KVBucket(s.Cluster, kind) }
	versions := bucket(names.Versions)
	if role != RoleClient {
		// The tools ask it to learn whether their account imports the
		// cluster's API (natsconn.ToolJetStream); in a shared account
		// nobody answers it.
		pub = append(pub, names.ImportedAPI+".INFO")
	}
	switch role {
	case RoleOperator:
		if !regions {
			pub = append(pub, names.KVSubject(versions, "*"+names.PinSuffix), names.KVSubject(versions, "*"+names.PinSuffix+".*"))
			break
		}
		// At the hub: the pins of its region (or of every region, and
		// the pins for all), and the region's buckets read through the
		// hub, for the pin's verdict and spangle status --regions.
		region := s.Region
		if region == "" {
			region = "*"
			pub = append(pub, names.KVSubject(versions, "*"+names.PinSuffix))
		}
		pub = append(pub, names.KVSubject(versions, "*"+names.PinSuffix+"."+region))
		pub = append(pub, readStream(api, names.KVStream(bucket(names.Regions)))...) // the list of regions
		for _, kind := range names.Kinds {
			pub = append(pub, readStream(names.APIPrefix(region), names.KVStream(bucket(kind)))...)
		}
	case RolePublisher:
		if len(s.ObjectBuckets) == 0 {
			return nil, fmt.Errorf("a %s needs the Object Store buckets it writes (buckets)", RolePublisher)
		}
		// The versions bucket: created when missing (a hub of regions has
		// no node to create it; an existing stream is never changed by a
		// create), and the announcements.
		pub = append(pub, api+".INFO", api+".STREAM.CREATE."+names.KVStream(versions), names.KVSubject(versions, "*"))
		for _, b := range s.ObjectBuckets {
			st := names.ObjectStream(b)
			pub = append(pub, readStream(api, st)...)
			pub = append(pub, api+".STREAM.CREATE."+st, api+".STREAM.PURGE."+st, names.ObjectSubjects(b))
		}
	case RoleClient:
		pub = append(pub, lookupSubjects(s.Cluster)...)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: unique(pub)},
		Subscribe: &server.SubjectPermission{Allow: sub},
	}, nil
}
