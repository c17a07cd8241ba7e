package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natsconn"
	"github.com/spangledb/spangle/node/advert"
)

// activate runs "spangle activate DB VERSION": it pins db to VERSION on
// every node of the cluster (a pin entry in the versions bucket). Nodes
// that hold VERSION switch to it at once, the others build it first.
// "spangle activate --latest DB" removes the pin: back to the newest
// version of the source. "spangle activate --force DB VERSION" activates
// VERSION even if the db's guards refused it.
func activate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("activate", "usage: spangle activate [flags] DB VERSION\n       spangle activate [flags] --latest DB", stderr)
	pf := addPinFlags(fs)
	latest := fs.Bool("latest", false, "remove the db's pin: every node goes back to the newest version of its source")
	force := fs.Bool("force", false, "activate VERSION even if the db's guards (min_records, max_change, canary keys) refused it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *force && *latest {
		return badArgs(fs, "--force names a version: not with --latest")
	}
	want := 2
	if *latest {
		want = 1
	}
	if fs.NArg() != want {
		if *latest {
			return badArgs(fs, "activate --latest takes DB, got %s", plural(fs.NArg(), "argument"))
		}
		return badArgs(fs, "activate takes DB and VERSION (or --latest and DB), got %s", plural(fs.NArg(), "argument"))
	}
	db := fs.Arg(0)
	if !advert.ValidName(db) {
		return usagef("bad db name %q", db)
	}
	return pf.run(func(ctx context.Context, kv jetstream.KeyValue, nc *nats.Conn) error {
		if *latest {
			if _, err := kv.Get(ctx, pinKey(db, pf.region)); errors.Is(err, jetstream.ErrKeyNotFound) {
				return fmt.Errorf("%s: nothing to unpin: no pin of %s%s in %s", db, db, pf.where(), kv.Bucket())
			} else if err != nil {
				return fmt.Errorf("%s: the current pin: %w", db, err)
			}
			if err := kv.Purge(ctx, pinKey(db, pf.region)); err != nil {
				return err
			}
			if pf.region != "" {
				fmt.Fprintf(stdout, "%s: unpinned in region %s; its nodes follow the db's pin for all regions, if any, else the newest version\n", db, pf.region)
				return nil
			}
			fmt.Fprintf(stdout, "%s: unpinned; every node goes to the newest version of its source\n", db)
			return nil
		}
		version := fs.Arg(1)
		if !advert.ValidName(version) {
			return usagef("bad version name %q", version)
		}
		if err := applyPin(ctx, kv, nc, pf, advert.Pin{DB: db, Version: version, Force: *force}, stdout); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: pinned to %s%s; `%s` unpins it\n", db, version, pf.where(), pf.unpin(db))
		return nil
	})
}

// rollback runs "spangle rollback DB [VERSION]": it pins db to VERSION, or
// without one to the newest version older than the one the cluster
// serves (each node picks it from its source listing, so all agree).
func rollback(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rollback", "usage: spangle rollback [flags] DB [VERSION]", stderr)
	pf := addPinFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return badArgs(fs, "rollback takes DB and an optional VERSION, got %s", plural(fs.NArg(), "argument"))
	}
	db := fs.Arg(0)
	if !advert.ValidName(db) {
		return usagef("bad db name %q", db)
	}
	return pf.run(func(ctx context.Context, kv jetstream.KeyValue, nc *nats.Conn) error {
		p := advert.Pin{DB: db, Version: fs.Arg(1)}
		if p.Version == "" {
			e, err := kv.Get(ctx, advert.VersionKey(db))
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return fmt.Errorf("%s: no node has said which version it serves yet; name the version: spangle rollback %s VERSION", db, db)
			}
			if err != nil {
				return fmt.Errorf("%s: the version the cluster serves: %w", db, err)
			}
			v, err := advert.DecodeVersion(advert.VersionKey(db), e.Value())
			if err != nil {
				return err
			}
			p.Before = v.Version
		} else if !advert.ValidName(p.Version) {
			return usagef("bad version name %q", p.Version)
		}
		if err := applyPin(ctx, kv, nc, pf, p, stdout); err != nil {
			return err
		}
		if p.Before != "" {
			fmt.Fprintf(stdout, "%s: rolled back from %s to the newest version before it%s; `%s` undoes it\n", db, p.Before, pf.where(), pf.unpin(db))
		} else {
			fmt.Fprintf(stdout, "%s: rolled back to %s%s; `%s` undoes it\n", db, p.Version, pf.where(), pf.unpin(db))
		}
		return nil
	})
}

// The defaults of activate's and rollback's --nats and --cluster.
const (
	defaultPinNATS = "nats://127.0.0.1:4222"
	defaultCluster = "spangle"
)

// pinFlags are the flags of activate and rollback.
type pinFlags struct {
	natsURL, cluster, creds, region string
	timeout                         time.Duration
}

// pinKey is the versions-bucket key of db's pin: for all regions (region
// ""), or for one region's.
func pinKey(db, region string) string {
	if region != "" {
		return advert.RegionPinKey(db, region)
	}
	return advert.PinKey(db)
}

// unpin is the command that removes the pin, for the messages: with the
// flags that reach the same bucket (--nats, --cluster, --creds unless
// they are the defaults, --region), so that it works when pasted.
func (pf *pinFlags) unpin(db string) string {
	args := []string{"spangle", "activate", "--latest"}
	if pf.natsURL != defaultPinNATS {
		args = append(args, "--nats", shellQuote(pf.natsURL))
	}
	if pf.cluster != defaultCluster {
		args = append(args, "--cluster", shellQuote(pf.cluster))
	}
	if pf.creds != "" {
		args = append(args, "--creds", shellQuote(pf.creds))
	}
	if pf.region != "" {
		args = append(args, "--region", pf.region)
	}
	return strings.Join(append(args, db), " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and -_./:,=@+.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,=@+", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// where says in which region the pin applies, for the messages.
func (pf *pinFlags) where() string {
	if pf.region != "" {
		return " in region " + pf.region
	}
	return ""
}

func addPinFlags(fs *flag.FlagSet) *pinFlags {
	pf := &pinFlags{}
	fs.StringVar(&pf.natsURL, "nats", defaultPinNATS, "the cluster's NATS server URLs, comma-separated (a single node's embedded one by default)")
	fs.StringVar(&pf.cluster, "cluster", defaultCluster, "spangle cluster name (names the versions bucket)")
	fs.StringVar(&pf.creds, "creds", "", "NATS credentials file")
	fs.DurationVar(&pf.timeout, "timeout", 30*time.Second, "how long to wait for every node's answer (a node that cannot follow the pin fails the command at once)")
	fs.StringVar(&pf.region, "region", "", "pin in this region only (connect to the hub: --nats); its nodes take it before the db's pin for all")
	return pf
}

// run connects to NATS, binds the cluster's versions bucket as it is
// (never reconfiguring it), and calls fn.
func (pf *pinFlags) run(fn func(context.Context, jetstream.KeyValue, *nats.Conn) error) error {
	if pf.region != "" && !advert.ValidName(pf.region) {
		return usagef("bad region name %q", pf.region)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pf.timeout)
	defer cancel()
	o := natsconn.Options{Name: "spangle-cli", Timeout: pf.timeout, CredsFile: pf.creds}
	nc, err := natsconn.Connect(pf.natsURL, o)
	if err != nil {
		return fmt.Errorf("connect %s: %w", pf.natsURL, err)
	}
	defer nc.Close()
	js, err := natsconn.ToolJetStream(nc, o)
	if err != nil {
		return err
	}
	name := names.KVBucket(pf.cluster, names.Versions)
	kv, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("no versions bucket %s: is the cluster name right (--cluster)?", name)
	}
	if err != nil {
		return fmt.Errorf("versions bucket %s: %w", name, err)
	}
	err = fn(ctx, kv, nc)
	if last := nc.LastError(); err != nil && errors.Is(last, nats.ErrPermissionViolation) {
		// A refused write is never answered: say why it timed out.
		return fmt.Errorf("%w (%v: pins need a login with the operator role)", err, last)
	}
	return err
}

// putPin writes p at key, stamped with the time and the user.
func putPin(ctx context.Context, kv jetstream.KeyValue, key string, p advert.Pin) error {
	p.At = time.Now().UTC()
	p.By = whoAmI()
	b, err := advert.Encode(p)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, key, b)
	return err
}

// whoAmI returns user@host for the pin's record.
func whoAmI() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
