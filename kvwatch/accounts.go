package kvwatch

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/spangledb/spangle/kvwatch/names"
)

// NATS accounts of a server with users. Subject permissions alone cannot
// hold a role inside one account: a responder (a node answering a
// lookup, JetStream answering an API request or a direct get, a push
// consumer delivering) publishes to whatever reply or deliver subject the
// request named, with its own rights, so a login that may ask anything
// could write anything of the account (docs/SECURITY.md). So the
// cluster's JetStream lives in one account (names.ClusterAccount), with
// the node logins and the node's own connection; every other role has an
// account of its own, without JetStream, which imports exactly the
// requests its role makes as services. nats-server rewrites the reply
// subject of a request crossing a service import (_R_.… in the exporting
// account, mapped back to the requester's reply), so whatever reply a
// client names, the answer comes back to it and nowhere else; and no
// role but the node may create consumers.
//
// Clients' lookups are the exception: a service import costs a reply
// mapping per request (up to a third of a lookup's speed), so the nodes
// answer them inside the client account instead, from a second login of
// theirs there (RoleResponder; the embedded server's own, selfKeys). A
// reply subject a client crafts then names a subject of the client
// account, which has no JetStream and exports nothing: it cannot reach
// the cluster account at all.

// serviceImport is one service a role's account imports from the cluster
// account: local is its subject in the importing account, remote in the
// cluster account.
type serviceImport struct {
	local, remote string
	// stream: the service answers with several messages (a batched
	// direct get), not one.
	stream bool
}

// accountSpec is one account of a server with users.
type accountSpec struct {
	name      string
	role      string // the role of its users; "" for the cluster account
	jetStream bool
	imports   []serviceImport
}

// importedAPI maps a cluster-account API subject into the imported API
// prefix (names.ImportedAPI).
func importedAPI(rest string) serviceImport {
	return serviceImport{local: names.ImportedAPI + "." + rest, remote: "$JS.API." + rest}
}

// RoleImports returns the services an account of role (client, operator,
// publisher) imports from the cluster account in scope s.
// docs/SECURITY.md gives the reason for each.
func RoleImports(role string, s Scope) ([]serviceImport, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	bucket := func(kind string) string { return names.KVBucket(s.Cluster, kind) }
	versions := bucket(names.Versions)
	vs := names.KVStream(versions)
	// mapReads are the batched direct gets that read the cluster map
	// (edge/client): the nodes, partitions and versions buckets, under
	// api, with their own names (nats-server lets a direct get through an
	// account's own "$JS.API.>").
	mapReads := func(api string) []serviceImport {
		var out []serviceImport
		for _, kind := range names.Kinds {
			sub := api + ".DIRECT.GET." + names.KVStream(bucket(kind))
			out = append(out, serviceImport{local: sub, remote: sub, stream: true})
		}
		return out
	}
	var imp []serviceImport
	switch role {
	case RoleClient:
		// Its lookups are answered in its own account (RoleResponder):
		// it imports only the cluster map.
		imp = append(imp, mapReads("$JS.API")...)
	case RoleOperator:
		// Binding the versions bucket, reading a pin, writing pins.
		imp = append(imp, importedAPI("INFO"), importedAPI("STREAM.INFO."+vs),
			importedAPI("DIRECT.GET."+vs+".>"))
		region := s.Region
		if region == "" {
			region = "*"
			imp = append(imp, importedAPI(names.KVSubject(versions, "*"+names.PinSuffix)))
		}
		imp = append(imp, importedAPI(names.KVSubject(versions, "*"+names.PinSuffix+"."+region)))
		for i := range imp {
			if strings.HasPrefix(imp[i].remote, "$JS.API.$KV.") {
				imp[i].remote = strings.TrimPrefix(imp[i].remote, "$JS.API.")
			}
		}
		// The cluster map (the nodes' answers to a pin, spangle status).
		imp = append(imp, mapReads("$JS.API")...)
	case RolePublisher:
		if len(s.ObjectBuckets) == 0 {
			return nil, fmt.Errorf("a %s needs the Object Store buckets it writes (buckets)", RolePublisher)
		}
		// The versions bucket: bound, created where missing, its
		// announcements (one-token keys) read and written.
		imp = append(imp, importedAPI("INFO"), importedAPI("STREAM.INFO."+vs), importedAPI("STREAM.CREATE."+vs),
			importedAPI("DIRECT.GET."+vs+"."+names.KVSubject(versions, "*")),
			serviceImport{local: names.ImportedAPI + "." + names.KVSubject(versions, "*"), remote: names.KVSubject(versions, "*")})
		for _, b := range s.ObjectBuckets {
			st := names.ObjectStream(b)
			imp = append(imp, importedAPI("STREAM.INFO."+st), importedAPI("STREAM.CREATE."+st), importedAPI("STREAM.PURGE."+st),
				importedAPI("DIRECT.GET."+st+".>"),
				serviceImport{local: names.ObjectSubjects(b), remote: names.ObjectSubjects(b)})
		}
	default:
		return nil, fmt.Errorf("role %q has no account of its own (want %s, %s or %s)", role, RoleOperator, RolePublisher, RoleClient)
	}
	return imp, nil
}

// lookupSubjects are the subjects of a cluster's lookups and key
// listings (a client's requests; the nodes answer them).
func lookupSubjects(cluster string) []string {
	p := names.Prefix(cluster)
	return []string{p + ".get.>", p + ".part.>", p + ".mget.>", p + ".list.>"}
}

// selfKeys are this process's logins on the embedded server when it has
// users, NKeys made at New and never stored: cluster in the cluster
// account (kvwatch's connection), lookups in the client account when
// there is one (LookupConn, on which the front door answers the
// clients), else nil.
type selfKeys struct {
	cluster, lookups nkeys.KeyPair
}

func newSelfKeys(c Config) (selfKeys, error) {
	var k selfKeys
	var err error
	if k.cluster, err = nkeys.CreateUser(); err != nil {
		return k, fmt.Errorf("kvwatch: node NKey: %w", err)
	}
	if hasClientAccount(c) {
		if k.lookups, err = nkeys.CreateUser(); err != nil {
			return k, fmt.Errorf("kvwatch: node NKey: %w", err)
		}
	}
	return k, nil
}

// hasClientAccount reports whether c's embedded server has a client
// account: a user of the client or the responder role.
func hasClientAccount(c Config) bool {
	return slices.ContainsFunc(c.EmbeddedUsers, func(u User) bool { return u.Role == RoleClient || u.Role == RoleResponder })
}

// accountsOf returns the accounts of c's users: the cluster account,
// then one account per role and set of imports, and each user's
// account, by index. Responders are users of the client account.
func accountsOf(c Config) ([]accountSpec, []int, error) {
	specs := []accountSpec{{name: names.ClusterAccount(c.ClusterName), jetStream: true}}
	of := make([]int, len(c.EmbeddedUsers))
	byImports := map[string]int{}
	for i, u := range c.EmbeddedUsers {
		if u.Role == RoleNode {
			continue
		}
		if u.Role == RoleResponder {
			u.Role = RoleClient
		}
		imp, err := RoleImports(u.Role, c.userScope(u))
		if err != nil {
			return nil, nil, fmt.Errorf("user %d: %w", i+1, err)
		}
		key := u.Role + "\x00" + fmt.Sprint(imp)
		j, ok := byImports[key]
		if !ok {
			suffix := ""
			if u.Role == RolePublisher {
				suffix = strings.Join(u.Buckets, "_")
			}
			name := names.RoleAccount(c.ClusterName, u.Role, suffix)
			for n := 2; slices.ContainsFunc(specs, func(a accountSpec) bool { return a.name == name }); n++ {
				name = names.RoleAccount(c.ClusterName, u.Role, suffix+strconv.Itoa(n))
			}
			j = len(specs)
			byImports[key] = j
			specs = append(specs, accountSpec{name: name, role: u.Role, imports: imp})
		}
		of[i] = j
	}
	return specs, of, nil
}

// AccountsConfig returns the "accounts { … }" block of nats-server's
// configuration for a cluster in scope s whose other roles are roles:
// the cluster account (JetStream enabled; it exports what the others
// import, to them only) and an account for each of roles, importing its
// services. Every account's users list is empty, with a comment saying
// who belongs there: add the logins (the cluster account's nodes with
// the permissions of RolePermissions(RoleNode, …), the others with
// their role's).
func AccountsConfig(s Scope, roles ...string) (string, error) {
	specs := []accountSpec{{name: names.ClusterAccount(s.Cluster), jetStream: true}}
	for _, r := range roles {
		imp, err := RoleImports(r, s)
		if err != nil {
			return "", err
		}
		suffix := ""
		if r == RoleOperator && s.Region != "" {
			suffix = s.Region
		}
		specs = append(specs, accountSpec{name: names.RoleAccount(s.Cluster, r, suffix), role: r, imports: imp})
	}
	return renderAccounts(specs, true), nil
}

// renderAccounts writes specs as nats-server's accounts block. With
// comments, each users list says which logins go there.
func renderAccounts(specs []accountSpec, comments bool) string {
	var b strings.Builder
	b.WriteString("accounts {\n")
	cluster := specs[0].name
	// The cluster account's exports: every imported subject once, to
	// the accounts importing it.
	type export struct {
		stream   bool
		accounts []string
	}
	exports := map[string]*export{}
	var order []string
	for _, a := range specs[1:] {
		for _, si := range a.imports {
			e := exports[si.remote]
			if e == nil {
				e = &export{stream: si.stream}
				exports[si.remote] = e
				order = append(order, si.remote)
			}
			if !slices.Contains(e.accounts, a.name) {
				e.accounts = append(e.accounts, a.name)
			}
		}
	}
	for _, a := range specs {
		fmt.Fprintf(&b, "  %s: {\n", quote(a.name))
		if a.jetStream {
			b.WriteString("    jetstream: enabled\n")
		}
		b.WriteString("    users: [\n")
		if comments {
			role := a.role
			if role == "" {
				role = RoleNode
			}
			fmt.Fprintf(&b, "      # the %s logins, with the permissions of: spangle nats-permissions %s\n", role, role)
			if role == RoleClient {
				// The nodes answer the clients' lookups in this account.
				b.WriteString("      # and each node's second login, answering the lookups here ([nats] lookup_creds or lookup_nkey):\n")
				fmt.Fprintf(&b, "      # the %s logins, with the permissions of: spangle nats-permissions %s\n", RoleResponder, RoleResponder)
			}
		}
		b.WriteString("    ]\n")
		if a.name == cluster && len(order) > 0 {
			b.WriteString("    exports: [\n")
			for _, sub := range order {
				e := exports[sub]
				resp := "singleton"
				if e.stream {
					resp = "stream"
				}
				qs := make([]string, len(e.accounts))
				for i, n := range e.accounts {
					qs[i] = quote(n)
				}
				fmt.Fprintf(&b, "      { service: %s, response: %s, accounts: [%s] }\n", quote(sub), resp, strings.Join(qs, ", "))
			}
			b.WriteString("    ]\n")
		}
		if len(a.imports) > 0 {
			b.WriteString("    imports: [\n")
			for _, si := range a.imports {
				fmt.Fprintf(&b, "      { service: { account: %s, subject: %s }, to: %s }\n", quote(cluster), quote(si.remote), quote(si.local))
			}
			b.WriteString("    ]\n")
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// quote quotes a name or subject for nats-server's configuration (they
// hold no quote, backslash or control character: names.Valid, and
// subjects built from such names).
func quote(s string) string { return `"` + s + `"` }

// addAccounts puts c's accounts and users, and the node's own NKey
// users, into o.
func addAccounts(o *server.Options, c Config, self selfKeys) error {
	specs, of, err := accountsOf(c)
	if err != nil {
		return err
	}
	parsed := &server.Options{}
	if err := parsed.ProcessConfigString(renderAccounts(specs, false)); err != nil {
		return fmt.Errorf("kvwatch: accounts: %w", err)
	}
	byName := map[string]*server.Account{}
	for _, a := range parsed.Accounts {
		byName[a.Name] = a
	}
	o.Accounts = append(o.Accounts, parsed.Accounts...)
	for i, u := range c.EmbeddedUsers {
		perms, err := RolePermissions(u.Role, c.userScope(u))
		if err != nil {
			return fmt.Errorf("user %d: %w", i+1, err)
		}
		acc := byName[specs[of[i]].name]
		if u.NKey != "" {
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: perms, Account: acc})
		} else {
			o.Users = append(o.Users, &server.User{Username: u.Name, Password: u.Password, Permissions: perms, Account: acc})
		}
	}
	pub, err := self.cluster.PublicKey()
	if err != nil {
		return err
	}
	o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: pub, Account: byName[specs[0].name]})
	if self.lookups == nil {
		return nil
	}
	i := slices.IndexFunc(specs, func(a accountSpec) bool { return a.role == RoleClient })
	if i < 0 {
		return errors.New("kvwatch: accounts: a lookups login but no client account")
	}
	if pub, err = self.lookups.PublicKey(); err != nil {
		return err
	}
	// Unrestricted, as the node's login in the cluster account: it never
	// leaves this process, the front door publishes on it only answers to
	// inboxes (edge's reply check), and the client account holds nothing
	// else to reach (its imports are reads of the cluster map). The
	// responder's allow_responses would cost every lookup a permission
	// check and a reply record on the server (about 3 % of its CPU in
	// BenchmarkNATSAccountsPaired's profile).
	o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: pub, Account: byName[specs[i].name]})
	return nil
}
