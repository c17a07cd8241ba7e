// Command spangle serves versioned, read-only key-value data built by batch
// jobs over HTTP.
//
//	spangle serve [--config spangle.toml] [--source DIR] [--bind ADDR] [--data-dir DIR]
//	spangle get [--http URL | --nats URL] [--raw] DB KEY
//	spangle status [--http URL | --nats URL] [--json]
//	spangle ready [--http URL]
//	spangle publish DIR --to nats-object://BUCKET --db DB --version V [--nats URL]
//	spangle inspect FILE
//	spangle plugin check MODULE.wasm
//	spangle version
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=..."; when
// it is not, versionString reads the module version and VCS revision the
// go command recorded in the binary.
var version = ""

const usage = `usage: spangle <command> [flags]

commands:
  serve     serve the dbs of a source root over HTTP and NATS
  get       look a key up (exit 0 found, 1 missing, 2 error)
  list      list a db's keys in order, by prefix or range
  status    print the dbs, versions, partitions and nodes
  ready     exit 0 if a node's /readyz answers 200 (a health probe)
  publish   upload a version to a NATS Object Store and announce it (--base: a delta)
  digest    write a dataset directory's _DIGEST, which nodes check
  delta     write the delta between two dataset directories, to publish as a version
  activate  pin a db to a version on every node (--latest: unpin)
  rollback  pin a db to an older version on every node
  nats-permissions  print a role's NATS permissions for an external server
  region-consumers  make the hub's consumers for regions' mirrors
  inspect   print a SequenceFile's header and records
  plugin    check a Wasm plugin (spangle plugin check MODULE.wasm)
  version   print the version

Run 'spangle <command> -h' for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = serve(args, os.Stderr)
	case "get":
		os.Exit(get(args, os.Stdout, os.Stderr))
	case "list":
		os.Exit(list(args, os.Stdout, os.Stderr))
	case "status":
		err = status(args, os.Stdout, os.Stderr)
	case "ready":
		err = ready(args, os.Stderr)
	case "publish":
		err = publish(args, os.Stderr)
	case "digest":
		err = digestCmd(args, os.Stdout, os.Stderr)
	case "delta":
		err = deltaCmd(args, os.Stderr)
	case "activate":
		err = activate(args, os.Stdout, os.Stderr)
	case "rollback":
		err = rollback(args, os.Stdout, os.Stderr)
	case "nats-permissions":
		err = natsPermissions(args, os.Stdout, os.Stderr)
	case "region-consumers":
		err = regionConsumers(args, os.Stdout, os.Stderr)
	case "inspect":
		err = inspect(args, os.Stdout, os.Stderr)
	case "plugin":
		err = pluginCmd(args, os.Stdout, os.Stderr)
	case "version", "--version", "-version":
		fmt.Println("spangle", versionString())
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		if strings.HasPrefix(cmd, "-") {
			// sequins' command line, flags only (sequins --config
			// sequins.conf -b … -r … -l …): serve.
			err = serve(sequinsFlags(os.Args[1:]), os.Stderr)
			break
		}
		fmt.Fprintf(os.Stderr, "spangle: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	os.Exit(exitCode(err, os.Stderr))
}

// versionString is release() and the Go version that built the binary,
// as "v1.2.3 (rev 0123abcd, 2026-11-24T10:00:00Z) go1.26.0".
func versionString() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return release() + " " + bi.GoVersion
	}
	return release()
}

// release is the -ldflags version, else the module's version and the VCS
// revision (with "+dirty" for modified sources) from the build info, as
// "v1.2.3 (rev 0123abcd, 2026-11-24T10:00:00Z)": what spangle version
// prints, the serve log says and the node entry publishes.
func release() string {
	bi, ok := debug.ReadBuildInfo()
	v := version
	if v == "" && ok {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if !ok {
		return v
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		if strings.HasSuffix(v, "+dirty") {
			dirty = ""
		}
		v += fmt.Sprintf(" (rev %s%s, %s)", rev, dirty, at)
	}
	return v
}

// sequinsFlags spells sequins' short flags (-b, -r, -l, as "-b ADDR" or
// "-b=ADDR") as serve's long ones.
func sequinsFlags(args []string) []string {
	long := map[string]string{"-b": "--bind", "-r": "--source", "-l": "--local-store"}
	out := make([]string, len(args))
	for i, a := range args {
		name, value, hasValue := strings.Cut(a, "=")
		if l, ok := long[name]; ok {
			a = l
			if hasValue {
				a += "=" + value
			}
		}
		out[i] = a
	}
	return out
}
