package kvwatch

import (
	"fmt"
	"net"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

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
	// (<db> keys of the versions bucket), and reads the cluster's buckets;
	// it may not write pins or node and partitions entries, reconfigure,
	// delete or purge any other stream, or look keys up.
	RolePublisher = "publisher"
	// RoleClient: a service doing lookups. It may send requests to the
	// get, part, mget and list subjects and read the cluster's buckets (for
	// partition-aware routing); it may not answer lookups, join their
	// queue groups, or write anything.
	RoleClient = "client"
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
	// Role is RoleNode, RoleOperator, RolePublisher or RoleClient.
	Role string
	// Buckets are the Object Store buckets a publisher writes, or a node
	// reads its versions from. Default none; a publisher needs at least
	// one.
	Buckets []string
}

// Scope is what a role's permissions cover: a cluster's buckets and
// subjects, in the JetStream of one domain, and Object Store buckets.
type Scope struct {
	// Cluster is the spangle cluster name (Config.ClusterName).
	Cluster string
	// Domain is the JetStream domain whose API the buckets are reached
	// through; "" for the account's own (names.APIPrefix).
	Domain string
	// ObjectBuckets are the Object Store buckets a publisher writes or a
	// node reads.
	ObjectBuckets []string
}

// RolePermissions returns the exact subject permissions of role in scope.
// Every allow list names whole subjects or whole-token wildcards of
// spangle's own names, so no deny list is needed: what is not listed is
// refused. Replies to lookups go through the response permission (a
// node may answer the requests it received, and nothing else of
// _INBOX).
func RolePermissions(role string, s Scope) (*server.Permissions, error) {
	api := names.APIPrefix(s.Domain)
	var kvStreams []string
	for _, kind := range names.Kinds {
		kvStreams = append(kvStreams, names.KVStream(names.KVBucket(s.Cluster, kind)))
	}
	versions := names.KVBucket(s.Cluster, names.Versions)
	// read is what reading a stream takes: bind (INFO), watch or list (an
	// ordered consumer: CREATE in both forms, its clean-up DELETE, INFO),
	// gets (DIRECT.GET, MSG.GET) and the consumer's flow control.
	read := func(stream string) []string {
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
	var pub []string
	for _, st := range kvStreams {
		pub = append(pub, read(st)...)
	}
	sub := []string{"_INBOX.>"}
	var resp *server.ResponsePermission
	switch role {
	case RoleNode:
		for _, kind := range names.Kinds {
			b := names.KVBucket(s.Cluster, kind)
			pub = append(pub, api+".STREAM.CREATE."+names.KVStream(b), api+".STREAM.UPDATE."+names.KVStream(b))
			if kind != names.Versions {
				pub = append(pub, names.KVSubject(b, ">"))
			}
		}
		pub = append(pub, names.KVSubject(versions, "*"))
		for _, b := range s.ObjectBuckets {
			pub = append(pub, read(names.ObjectStream(b))...)
		}
		sub = append(sub, names.Prefix(s.Cluster)+".>")
		resp = &server.ResponsePermission{MaxMsgs: 1, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION}
	case RoleOperator:
		pub = append(pub, names.KVSubject(versions, "*"+names.PinSuffix), names.KVSubject(versions, "*"+names.PinSuffix+".*"))
	case RolePublisher:
		if len(s.ObjectBuckets) == 0 {
			return nil, fmt.Errorf("a %s needs the Object Store buckets it writes (buckets)", RolePublisher)
		}
		pub = append(pub, names.KVSubject(versions, "*"))
		for _, b := range s.ObjectBuckets {
			st := names.ObjectStream(b)
			pub = append(pub, read(st)...)
			pub = append(pub, api+".STREAM.CREATE."+st, api+".STREAM.PURGE."+st, names.ObjectSubjects(b))
		}
	case RoleClient:
		p := names.Prefix(s.Cluster)
		pub = append(pub, p+".get.>", p+".part.>", p+".mget.>", p+".list.>")
	default:
		return nil, fmt.Errorf("unknown role %q (want %s, %s, %s or %s)", role, RoleNode, RoleOperator, RolePublisher, RoleClient)
	}
	for _, b := range s.ObjectBuckets {
		if !names.Valid(b) {
			return nil, fmt.Errorf("kvwatch: object store bucket %q must match %s", b, names.Pattern)
		}
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: sub},
		Response:  resp,
	}, nil
}

// addUsers puts c's users, and the node's own NKey user, into o.
func addUsers(o *server.Options, c Config, self nkeys.KeyPair) error {
	if len(c.EmbeddedUsers) == 0 {
		return nil
	}
	for i, u := range c.EmbeddedUsers {
		perms, err := RolePermissions(u.Role, Scope{Cluster: c.ClusterName, ObjectBuckets: u.Buckets})
		if err != nil {
			return fmt.Errorf("user %d: %w", i+1, err)
		}
		if u.NKey != "" {
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: perms})
		} else {
			o.Users = append(o.Users, &server.User{Username: u.Name, Password: u.Password, Permissions: perms})
		}
	}
	pub, err := self.PublicKey()
	if err != nil {
		return err
	}
	o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: pub})
	return nil
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
		if _, err := RolePermissions(u.Role, Scope{Cluster: c.ClusterName, ObjectBuckets: u.Buckets}); err != nil {
			return fmt.Errorf("user %d: %w", i+1, err)
		}
	}
	if len(c.EmbeddedUsers) == 0 && !c.EmbeddedAllowInsecure && !loopback(c.EmbeddedListen) {
		return fmt.Errorf("%w: the embedded NATS server would listen on %s with no users: anyone who reaches it reads every value and can forge answers; configure users, listen on loopback, or set allow_insecure",
			ErrInsecure, c.EmbeddedListen)
	}
	return nil
}

// loopback reports whether hostport's host is a loopback address or
// localhost.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	b.WriteString("permissions: {\n  publish: {\n    allow: ")
	list("    ", p.Publish.Allow)
	b.WriteString("  }\n  subscribe: {\n    allow: ")
	list("    ", p.Subscribe.Allow)
	b.WriteString("  }\n")
	if p.Response != nil {
		fmt.Fprintf(&b, "  allow_responses: { max: %d, expires: %q }\n", p.Response.MaxMsgs, p.Response.Expires.String())
	}
	b.WriteString("}\n")
	return b.String(), nil
}
