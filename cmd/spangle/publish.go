package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/objsource"
)

// publish uploads a version directory to a NATS Object Store bucket and
// announces it in the versions bucket, or (--delete) removes a version.
//
//	spangle publish DIR --to nats-object://BUCKET --db DB --version V [--nats URL]
//	spangle publish --delete --to nats-object://BUCKET DB V [--nats URL]
func publish(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "destination: nats-object://BUCKET (required)")
	db := fs.String("db", "", "db name (required unless --delete)")
	ver := fs.String("version", "", "version name (required unless --delete)")
	natsURL := fs.String("nats", "nats://127.0.0.1:4222", "NATS server URLs, comma-separated")
	cluster := fs.String("cluster", "spangle", "spangle cluster name (names the versions bucket)")
	parallel := fs.Int("parallel", 4, "files uploaded at once")
	del := fs.Bool("delete", false, "remove version V of DB (positional DB V) instead of uploading")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	if err := fs.Parse(reorder(args)); err != nil {
		return err
	}
	bucket, err := objsource.ParseURL(*to)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	var dir string
	switch {
	case *del && fs.NArg() == 2:
		*db, *ver = fs.Arg(0), fs.Arg(1)
	case !*del && fs.NArg() == 1 && *db != "" && *ver != "":
		dir = fs.Arg(0)
	default:
		return fmt.Errorf("usage: spangle publish DIR --to nats-object://BUCKET --db DB --version V, or spangle publish --delete --to nats-object://BUCKET DB V")
	}
	if !advert.ValidName(*db) || !advert.ValidName(*ver) {
		return fmt.Errorf("db %q and version %q must match ^[-_a-zA-Z0-9]+$", *db, *ver)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	kcfg := kvwatch.DefaultConfig()
	kcfg.URLs = splitList(*natsURL)
	kcfg.ClusterName = *cluster
	kcfg.Logger = slog.New(slog.DiscardHandler)
	kv, err := kvwatch.New(kcfg)
	if err != nil {
		return err
	}
	defer kv.Shutdown(context.Background())
	if err := kv.Start(ctx); err != nil {
		return err
	}
	select {
	case <-kv.Ready():
	case <-ctx.Done():
		return fmt.Errorf("NATS: %w", ctx.Err())
	}
	js, err := jetstream.New(kv.Conn())
	if err != nil {
		return err
	}
	obs, err := objsource.CreateBucket(ctx, js, bucket)
	if err != nil {
		return err
	}

	if *del {
		n, err := objsource.DeleteVersion(ctx, obs, *db, *ver)
		fmt.Fprintf(stderr, "deleted %d objects of %s/%s\n", n, *db, *ver)
		if err != nil {
			return err
		}
		if e, ok := kv.Snapshot().Get(kvwatch.Versions, advert.VersionKey(*db)); ok {
			if v, err := advert.DecodeVersion(*db, e.Value); err == nil && v.Version == *ver {
				return kv.Delete(ctx, kvwatch.Versions, advert.VersionKey(*db))
			}
		}
		return nil
	}

	progress := func(r objsource.Report) {
		fmt.Fprintf(stderr, "%d/%d files (%d uploaded, %d skipped), %d/%d bytes uploaded\n",
			r.Uploaded+r.Skipped, r.Files, r.Uploaded, r.Skipped, r.BytesUploaded, r.Bytes)
	}
	rep, err := objsource.Publish(ctx, obs, dir, *db, *ver, objsource.PublishOptions{Parallel: *parallel, Progress: progress})
	if err != nil {
		return err
	}
	entry, err := advert.Encode(advert.Version{DB: *db, Version: *ver})
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, kvwatch.Versions, advert.VersionKey(*db), entry); err != nil {
		return fmt.Errorf("announce: %w", err)
	}
	fmt.Fprintf(stderr, "published %s/%s to %s: %d files, %d uploaded, %d skipped, %d bytes uploaded\n",
		*db, *ver, *to, rep.Files, rep.Uploaded, rep.Skipped, rep.BytesUploaded)
	return nil
}

// reorder moves flags before positional arguments, so that both
// "publish DIR --to …" and "publish --to … DIR" parse.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			if a != "-delete" && a != "--delete" && !containsEq(a) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func containsEq(s string) bool {
	for _, c := range s {
		if c == '=' {
			return true
		}
	}
	return false
}
