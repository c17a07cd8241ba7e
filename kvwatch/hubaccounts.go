package kvwatch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/region"
)

// The hub's accounts (a deployment with regions, docs/SECURITY.md
// "Regions"). A region's leafnode login at the hub once shared the hub's
// account with everything else there: whatever a region sent with a
// reply subject of its choosing (a mirror's consumer request, its
// announcement, a direct get) was answered from inside the server onto
// that subject, a pin or "$JS.API.STREAM.DELETE.…" included, and its
// mirrors' consumer answers and deliveries ("$JSC.R.>", "$JS.M.>") were
// every region's. So at the hub, as on the embedded server, the hub's
// JetStream lives in the cluster's account and every other login in an
// account of its own, importing exactly what it needs:
//
//   - each region's leafnode login in names.RegionAccount(cluster, r),
//     which imports from the cluster's account the hub check
//     ("$JS.<hub>.API.INFO"), its own entry in the bucket of regions, the
//     reset and flow control of the durable consumers the hub keeps for
//     it (region.HubConsumer: no consumer creation or deletion at all) and,
//     as a stream, its own deliveries (region.DeliverSubject); and which
//     exports to the hub's operators the reads of the region's buckets
//     that status --regions and a pin's verdict make through the hub
//     ("$JS.<r>.API.STREAM.INFO", "DIRECT.GET");
//   - the hub's operators (one account for every region, one per region
//     for a region's operators) and publishers, importing what
//     RoleImports gives them, and an operator the region reads above.
//
// Every request crossing an import has its reply rewritten by the
// server, so no login's reply subject is ever published to in another
// account.

// RoleRegion is the leafnode login of a region at the hub (Scope.Region
// names the region): the user a region's NATS server logs in as
// ([region] hub_creds, or its leafnodes remote). It is not a role of the
// embedded server's users.
const RoleRegion = "region"

// hubImport is one import of a hub account: local in the importing
// account, remote in the exporting account from.
type hubImport struct {
	from          string
	local, remote string
	// kind: "service" answered once, "stream-service" answered with
	// several messages (a batched direct get), "stream" a stream import
	// (deliveries, local is remote).
	kind string
}

// hubAccount is one account of a hub.
type hubAccount struct {
	name, who string // who: the logins that belong there, for a comment
	jetStream bool
	imports   []hubImport
}

// regionStreams are the region's reads that the hub's operators make
// through the hub: the state of its versions mirror, and its buckets by
// batched direct gets (edge/client's cluster map with a domain).
func regionReads(cluster, r string) []hubImport {
	api := names.APIPrefix(r)
	versions := names.KVStream(names.KVBucket(cluster, names.Versions))
	out := []hubImport{{from: names.RegionAccount(cluster, r), local: api + ".STREAM.INFO." + versions, remote: api + ".STREAM.INFO." + versions, kind: "service"}}
	for _, kind := range names.Kinds {
		sub := api + ".DIRECT.GET." + names.KVStream(names.KVBucket(cluster, kind))
		out = append(out, hubImport{from: names.RegionAccount(cluster, r), local: sub, remote: sub, kind: "stream-service"})
	}
	return out
}

// regionImports are what region r's account at the hub imports from the
// cluster's account in scope s (s.HubDomain, s.ObjectBuckets).
func regionImports(s Scope, r string) []hubImport {
	// The region sends "$JS.<hub>.API.<rest>" (and "$JS.<hub>.API.$KV.…");
	// nats-server maps them, in the account of a leafnode of another
	// domain, to "$JS.API.<rest>" (and "$KV.…") before anything else,
	// and that account has no JetStream of its own to answer them: so
	// the imports take the mapped names (hubSent gives what the region
	// sends, for its permissions).
	from := names.ClusterAccount(s.Cluster)
	api := func(rest string) hubImport {
		return hubImport{from: from, local: "$JS.API." + rest, remote: "$JS.API." + rest, kind: "service"}
	}
	regions := names.KVBucket(s.Cluster, names.Regions)
	rs := names.KVStream(regions)
	entry := names.KVSubject(regions, names.RegionKey(r))
	imp := []hubImport{
		api("INFO"), // region.CheckHub
		// region.Announce: the bucket of regions (bound; the hub's
		// administrator creates it, region.EnsureRegionsBucket, so that
		// no region creates a stream of its own configuration) and the
		// region's own entry.
		api("STREAM.INFO." + rs),
		{from: from, local: entry, remote: entry, kind: "service"},
	}
	cname := region.ConsumerName(r)
	for _, st := range region.MirroredStreams(s.Cluster, s.ObjectBuckets) {
		imp = append(imp, api("CONSUMER.RESET."+st+"."+cname),
			// The flow control of its consumers, in both of the
			// server's reply formats ($JS.FC.<stream>.<consumer>.…,
			// $JS.FC.<domain>.<account>.<stream>.<consumer>.…).
			hubImport{from: from, local: "$JS.FC." + st + "." + cname + ".>", remote: "$JS.FC." + st + "." + cname + ".>", kind: "service"},
			hubImport{from: from, local: "$JS.FC.*.*." + st + "." + cname + ".>", remote: "$JS.FC.*.*." + st + "." + cname + ".>", kind: "service"},
			hubImport{from: from, local: region.DeliverSubject(r, st), remote: region.DeliverSubject(r, st), kind: "stream"})
	}
	return imp
}

// operatorRegionsList is the batched direct get of the hub's bucket of
// regions that status --regions lists them with (region.Regions).
func operatorRegionsList(cluster string) hubImport {
	sub := names.APIPrefix("") + ".DIRECT.GET." + names.KVStream(names.KVBucket(cluster, names.Regions))
	return hubImport{from: names.ClusterAccount(cluster), local: sub, remote: sub, kind: "stream-service"}
}

// operatorHubImports are what an operator's account at the hub imports:
// RoleImports (pins, the versions bucket, read through the imported API),
// and the reads of each region it operates (all of regions, or s.Region).
func operatorHubImports(s Scope, regions []string) ([]hubImport, error) {
	imp, err := RoleImports(RoleOperator, s)
	if err != nil {
		return nil, err
	}
	var out []hubImport
	for _, si := range imp {
		kind := "service"
		if si.stream {
			kind = "stream-service"
		}
		out = append(out, hubImport{from: names.ClusterAccount(s.Cluster), local: si.local, remote: si.remote, kind: kind})
	}
	// The list of regions (region.Regions, a batched direct get).
	out = append(out, operatorRegionsList(s.Cluster))
	for _, r := range regions {
		if s.Region == "" || s.Region == r {
			out = append(out, regionReads(s.Cluster, r)...)
		}
	}
	return out, nil
}

// HubAccountsConfig returns the "accounts { … }" block of the hub's
// nats-server configuration for a cluster in scope s (s.HubDomain set,
// s.ObjectBuckets the Object Store buckets published at the hub) whose
// regions are regions: the cluster's account (JetStream, and the hub's
// administrators, who make the regions' consumers), an account per
// region for its leafnode login, an operator account for every region
// and one per region, and a publisher account. Each users list is empty
// with a comment naming who belongs there and the permissions to give
// them (spangle nats-permissions --accounts --hub-domain … ROLE).
func HubAccountsConfig(s Scope, regions []string) (string, error) {
	if s.HubDomain == "" {
		return "", fmt.Errorf("kvwatch: the hub's accounts need the hub's domain")
	}
	if len(regions) == 0 {
		return "", fmt.Errorf("kvwatch: the hub's accounts need the regions' names")
	}
	s.Accounts, s.Region = true, ""
	if err := s.check(); err != nil {
		return "", err
	}
	for _, r := range regions {
		if !names.Valid(r) || r == s.HubDomain {
			return "", fmt.Errorf("kvwatch: region %q must match %s and not be the hub's domain", r, names.Pattern)
		}
	}
	cluster := names.ClusterAccount(s.Cluster)
	accts := []hubAccount{{name: cluster, jetStream: true,
		who: "the hub's administrators (spangle region-consumers), with the permissions they need"}}
	for _, r := range regions {
		accts = append(accts, hubAccount{name: names.RegionAccount(s.Cluster, r), imports: regionImports(s, r),
			who: "the leafnode login of region " + r + ", with the permissions of: spangle nats-permissions --accounts --hub-domain " + s.HubDomain + " --region " + r + " " + RoleRegion})
	}
	imp, err := operatorHubImports(s, regions)
	if err != nil {
		return "", err
	}
	accts = append(accts, hubAccount{name: names.RoleAccount(s.Cluster, RoleOperator, ""), imports: imp,
		who: "the operators of every region, with the permissions of: spangle nats-permissions --accounts --hub-domain " + s.HubDomain + " --regions … " + RoleOperator})
	for _, r := range regions {
		rs := s
		rs.Region = r
		imp, err := operatorHubImports(rs, regions)
		if err != nil {
			return "", err
		}
		accts = append(accts, hubAccount{name: names.RoleAccount(s.Cluster, RoleOperator, r), imports: imp,
			who: "the operators of region " + r + ", with the permissions of: spangle nats-permissions --accounts --hub-domain " + s.HubDomain + " --region " + r + " " + RoleOperator})
	}
	if len(s.ObjectBuckets) > 0 {
		pi, err := RoleImports(RolePublisher, s)
		if err != nil {
			return "", err
		}
		var out []hubImport
		for _, si := range pi {
			out = append(out, hubImport{from: cluster, local: si.local, remote: si.remote, kind: "service"})
		}
		accts = append(accts, hubAccount{name: names.RoleAccount(s.Cluster, RolePublisher, strings.Join(s.ObjectBuckets, "_")), imports: out,
			who: "the publishers, with the permissions of: spangle nats-permissions --accounts --hub-domain " + s.HubDomain + " " + RolePublisher})
	}
	return renderHubAccounts(accts), nil
}

// renderHubAccounts writes accts as nats-server's accounts block: each
// account's exports are the imports that other accounts make from it,
// each subject once, to those accounts only.
func renderHubAccounts(accts []hubAccount) string {
	type export struct {
		kind     string
		accounts []string
	}
	exports := map[string]map[string]*export{} // by exporting account, by subject
	orders := map[string][]string{}
	for _, a := range accts {
		for _, im := range a.imports {
			if exports[im.from] == nil {
				exports[im.from] = map[string]*export{}
			}
			e := exports[im.from][im.remote]
			if e == nil {
				e = &export{kind: im.kind}
				exports[im.from][im.remote] = e
				orders[im.from] = append(orders[im.from], im.remote)
			}
			if !slices.Contains(e.accounts, a.name) {
				e.accounts = append(e.accounts, a.name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("accounts {\n")
	for _, a := range accts {
		fmt.Fprintf(&b, "  %s: {\n", quote(a.name))
		if a.jetStream {
			b.WriteString("    jetstream: enabled\n")
		}
		fmt.Fprintf(&b, "    users: [\n      # %s\n    ]\n", a.who)
		if order := orders[a.name]; len(order) > 0 {
			b.WriteString("    exports: [\n")
			for _, sub := range order {
				e := exports[a.name][sub]
				qs := make([]string, len(e.accounts))
				for i, n := range e.accounts {
					qs[i] = quote(n)
				}
				switch e.kind {
				case "stream":
					fmt.Fprintf(&b, "      { stream: %s, accounts: [%s] }\n", quote(sub), strings.Join(qs, ", "))
				case "stream-service":
					fmt.Fprintf(&b, "      { service: %s, response: stream, accounts: [%s] }\n", quote(sub), strings.Join(qs, ", "))
				default:
					fmt.Fprintf(&b, "      { service: %s, response: singleton, accounts: [%s] }\n", quote(sub), strings.Join(qs, ", "))
				}
			}
			b.WriteString("    ]\n")
		}
		if len(a.imports) > 0 {
			b.WriteString("    imports: [\n")
			for _, im := range a.imports {
				if im.kind == "stream" {
					fmt.Fprintf(&b, "      { stream: { account: %s, subject: %s } }\n", quote(im.from), quote(im.remote))
				} else {
					fmt.Fprintf(&b, "      { service: { account: %s, subject: %s }, to: %s }\n", quote(im.from), quote(im.remote), quote(im.local))
				}
			}
			b.WriteString("    ]\n")
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// regionLeafPermissions are the permissions of region s.Region's
// leafnode login at the hub, in its account (HubAccountsConfig): it may
// send into the hub exactly what its account imports, and the answers to
// the operators' reads of the region ("_R_.>", the replies the server
// made for requests crossing an import into the region's account); the
// hub may send it requests to the region's own JetStream, the replies
// to its requests and its consumers' deliveries. Everything in that
// account is the region's own, so these lists only turn a stray
// publish into a refusal the hub logs.
func regionLeafPermissions(s Scope) (*server.Permissions, error) {
	if s.HubDomain == "" || s.Region == "" {
		return nil, fmt.Errorf("the %s login needs --hub-domain and --region", RoleRegion)
	}
	var pub []string
	hub := names.APIPrefix(s.HubDomain)
	for _, im := range regionImports(s, s.Region) {
		switch {
		case im.kind == "stream":
			continue
		case strings.HasPrefix(im.local, "$JS.API."):
			pub = append(pub, hub+strings.TrimPrefix(im.local, "$JS.API"))
		case strings.HasPrefix(im.local, "$KV."):
			pub = append(pub, hub+"."+im.local)
		}
		// The mapped name too: nats-server checks a client's publish
		// after the account's mappings, a leafnode's before.
		pub = append(pub, im.local)
	}
	pub = append(pub, "_R_.>")
	sub := []string{names.APIPrefix(s.Region) + ".>", "_INBOX.>", "$JSC.R.>"}
	for _, st := range region.MirroredStreams(s.Cluster, s.ObjectBuckets) {
		sub = append(sub, region.DeliverSubject(s.Region, st))
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: sub},
	}, nil
}

// regionConsumer is the name of region r's consumers at the hub, or "*"
// for any region (r empty), in a subject.
func regionConsumer(r string) string {
	if r == "" {
		return "*"
	}
	return region.ConsumerName(r)
}
