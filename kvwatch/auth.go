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
// (RolePermissions). The node's own in-process connection logs in with an
// NKey generated at each start, never written anywhere.

// Roles of embedded-server users.
const (
	// RoleNode: a spangle node. No restriction: it reads and writes the
	// buckets, answers lookups and runs the JetStream API.
	RoleNode = "node"
	// RoleClient: a service doing lookups. It may send requests to the
	// get, part and mget subjects, read the cluster's buckets (for
	// partition-aware routing) and receive replies; it may not answer
	// lookups, join their queue groups, or write any bucket.
	RoleClient = "client"
	// RolePublisher: a batch job running spangle publish. It may use the
	// JetStream API (Object Store uploads) and write the versions bucket
	// (announcements), and nothing of the lookup subjects.
	RolePublisher = "publisher"
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
	// Role is RoleNode, RoleClient or RolePublisher.
	Role string
}

// RolePermissions returns the subject permissions of role in a spangle
// cluster named cluster (nil for RoleNode: unrestricted).
func RolePermissions(role, cluster string) (*server.Permissions, error) {
	switch role {
	case RoleNode:
		return nil, nil
	case RoleClient:
		p := names.Prefix(cluster) + "."
		allow := []string{p + "get.>", p + "part.>", p + "mget.>", "$JS.API.INFO", "$JS.FC.>"}
		// Reading the buckets: bind, watch (an ordered consumer), direct
		// gets, and the consumer's clean-up. Wildcards are whole tokens
		// only, so each bucket is named.
		for _, b := range names.Kinds {
			stream := names.KVStream(names.KVBucket(cluster, b))
			allow = append(allow,
				"$JS.API.STREAM.INFO."+stream,
				"$JS.API.CONSUMER.CREATE."+stream, "$JS.API.CONSUMER.CREATE."+stream+".>",
				"$JS.API.CONSUMER.DELETE."+stream+".>",
				"$JS.API.CONSUMER.INFO."+stream+".>",
				"$JS.API.DIRECT.GET."+stream, "$JS.API.DIRECT.GET."+stream+".>",
				"$JS.ACK."+stream+".>")
		}
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: allow},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
		}, nil
	case RolePublisher:
		return &server.Permissions{
			Publish: &server.SubjectPermission{
				Allow: []string{"$JS.API.>", "$O.>", "$JS.FC.>", "$JS.ACK.>", names.KVSubject(names.KVBucket(cluster, names.Versions), ">")},
			},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
		}, nil
	}
	return nil, fmt.Errorf("unknown role %q (want %s, %s or %s)", role, RoleNode, RoleClient, RolePublisher)
}

// addUsers puts c's users, and the node's own NKey user, into o.
func addUsers(o *server.Options, c Config, self nkeys.KeyPair) error {
	if len(c.EmbeddedUsers) == 0 {
		return nil
	}
	for i, u := range c.EmbeddedUsers {
		perms, err := RolePermissions(u.Role, c.ClusterName)
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
		if _, err := RolePermissions(u.Role, c.ClusterName); err != nil {
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
