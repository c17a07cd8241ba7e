package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/internal/backoff"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/kvwatch/natsconn"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/source/objstore"
)

const publishUsage = `usage: spangle publish [flags] DIR --to nats-object://BUCKET --db DB --version V [--base B]
       spangle publish [flags] --delete --to nats-object://BUCKET DB V`

// publish uploads a version directory to a NATS Object Store bucket and
// announces it in the versions bucket, or (--delete) removes a version.
//
//	spangle publish DIR --to nats-object://BUCKET --db DB --version V [--nats URL] [--bandwidth 50MiB] [--quiet]
//	spangle publish --delete --to nats-object://BUCKET DB V [--nats URL]
//
// Progress goes to stderr: a progress bar when stderr is a terminal, else
// a line at most every --progress-interval; then a summary. SIGINT and
// SIGTERM stop the upload: the version stays invisible and a rerun
// resumes it.
func publish(args []string, stderr io.Writer) error {
	fs := newFlagSet("publish", publishUsage, stderr)
	to := fs.String("to", "", "destination: nats-object://BUCKET (required)")
	db := fs.String("db", "", "db name (required unless --delete)")
	ver := fs.String("version", "", "version name (required unless --delete)")
	natsURL := fs.String("nats", "nats://127.0.0.1:4222", "NATS server URLs, comma-separated")
	cluster := fs.String("cluster", "spangle", "spangle cluster name (names the versions bucket)")
	replicas := fs.Int("replicas", 1, "copies of the object store and versions buckets when they are created: 3 on a three-server NATS cluster")
	parallel := fs.Int("parallel", objstore.DefaultPublishParallel, "files uploaded at once")
	retries := fs.Int("retries", objstore.DefaultPublishRetries, "times a failed upload of a file is retried (-1: never)")
	backoff := fs.Duration("backoff", objstore.DefaultPublishBackoff, "pause before a file's first retry; doubles on each retry, with jitter")
	backoffMax := fs.Duration("backoff-max", objstore.DefaultPublishBackoffMax, "longest pause between retries")
	bandwidth := fs.String("bandwidth", "", `upload limit in bytes per second, e.g. "50MiB"; empty: unlimited`)
	opTimeout := fs.Duration("op-timeout", 10*time.Second, "timeout of each NATS operation (a request, a chunk's acknowledgement); a timed-out upload is retried")
	quiet := fs.Bool("quiet", false, "print nothing but errors")
	interval := fs.Duration("progress-interval", 2*time.Second, "when stderr is not a terminal, the least time between progress lines")
	del := fs.Bool("delete", false, "remove version V of DB (positional DB V) instead of uploading")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	connectTimeout := fs.Duration("connect-timeout", 10*time.Second, "give up when NATS cannot be reached (and its buckets bound) within this long")
	base := fs.String("base", "", "publish V as a delta over version B of the bucket: only the records added, changed and deleted (with _BASE, _DELETES, _DIGEST)")
	digest := fs.Bool("digest", false, "write DIR/_DIGEST (the digest nodes check before activating V) and publish it; always done with --base")
	force := fs.Bool("force", false, "with --delete: delete the version even if a delta names it as its base")
	cache := fs.String("cache", "", "a directory keeping an index of the version published with --base or --digest (one per db): the next --base computes its delta from it, building nothing")
	df := addDatasetFlags(fs)
	if err := parseFlags(fs, reorder(fs, args)); err != nil {
		return err
	}
	bucket, err := objstore.ParseURL(*to)
	if err != nil {
		return usagef("--to: %v", err)
	}
	var dir string
	switch {
	case *del && fs.NArg() == 2:
		*db, *ver = fs.Arg(0), fs.Arg(1)
	case !*del && fs.NArg() == 1 && *db != "" && *ver != "":
		dir = fs.Arg(0)
	default:
		return usagef("publish takes DIR with --db and --version, or --delete with DB and V (spangle publish -h)")
	}
	if !advert.ValidName(*db) || !advert.ValidName(*ver) {
		return usagef("db %q and version %q must match ^[-_a-zA-Z0-9]+$", *db, *ver)
	}
	var bw int64
	if *bandwidth != "" {
		if bw, err = spangle.ParseBytes(*bandwidth); err != nil {
			return fmt.Errorf("--bandwidth: %w", err)
		}
	}
	if *opTimeout <= 0 || *interval <= 0 {
		return fmt.Errorf("--op-timeout and --progress-interval must be positive")
	}
	if fi, err := os.Stat(dir); dir != "" && (err != nil || !fi.IsDir()) {
		if err == nil {
			return usagef("DIR %s is not a directory", dir)
		}
		return usagef("DIR %s: %v", dir, errors.Unwrap(err)) // "no such file or directory", the path said once
	}
	if *quiet {
		stderr = io.Discard
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// A plain connection first says at once why NATS cannot be reached
	// (connection refused, no such host); nats.Connect would only say
	// "no servers available".
	if err := probeNATS(*natsURL, *connectTimeout); err != nil {
		return err
	}
	o := natsconn.Options{Name: "spangle-publish", Timeout: *connectTimeout, APITimeout: *opTimeout}
	nc, err := natsconn.Connect(*natsURL, o)
	if err != nil {
		return fmt.Errorf("NATS %s: %w", *natsURL, err)
	}
	defer nc.Close()
	js, err := natsconn.ToolJetStream(nc, o)
	if err != nil {
		return err
	}
	// The versions bucket, and nothing else of the cluster's.
	kcfg := kvwatch.DefaultConfig()
	kcfg.ClusterName, kcfg.Replicas, kcfg.OpTimeout = *cluster, *replicas, *opTimeout
	versions, err := openVersions(ctx, js, kcfg, *connectTimeout)
	if err != nil {
		if last := nc.LastError(); last != nil {
			err = fmt.Errorf("%w (%v)", err, last) // a refused request is never answered: say why it timed out
		}
		return fmt.Errorf("NATS %s: %w", *natsURL, err)
	}
	obs, err := objstore.CreateBucket(ctx, js, bucket, *replicas)
	if err != nil {
		return err
	}

	if *del {
		if !*force {
			if deltas, err := (bucketVersion{obs: obs, db: *db}).deltasOver(ctx, *ver); err != nil {
				return err
			} else if len(deltas) > 0 {
				return fmt.Errorf("%s/%s is the base of %s: a node building them would find a chain with a hole; delete it once no delta names it (or --force)",
					*db, *ver, strings.Join(deltas, ", "))
			}
		}
		n, err := objstore.DeleteVersion(ctx, js, obs, *db, *ver)
		fmt.Fprintf(stderr, "deleted %d objects of %s/%s\n", n, *db, *ver)
		if err != nil {
			return err
		}
		return withdrawAnnouncement(ctx, versions, *db, *ver, *opTimeout)
	}

	keep := func() error { return nil }
	if *base != "" || *digest {
		out, cleanup, k, err := prepareDelta(ctx, stderr, obs, dir, *db, *ver, *base, *cache, df)
		defer cleanup()
		if err != nil {
			return err
		}
		dir, keep = out, k
	}
	pr := newPublishProgress(stderr, isTerminal(stderr), *db+"/"+*ver, *interval)
	rep, err := objstore.Publish(ctx, obs, dir, *db, *ver, objstore.PublishOptions{
		Parallel: *parallel, Retries: *retries, Backoff: *backoff, BackoffMax: *backoffMax, Bandwidth: bw,
		JetStream: js, Progress: pr.progress, Observe: pr.observe,
	})
	if err != nil {
		pr.finish(rep, false)
		fmt.Fprintf(stderr, "%s/%s not published (%d of %d files uploaded, %d skipped); run the same command again to resume\n",
			*db, *ver, rep.Uploaded, rep.Files, rep.Skipped)
		return err
	}
	entry, err := advert.Encode(advert.Version{DB: *db, Version: *ver})
	if err != nil {
		return err
	}
	actx, acancel := context.WithTimeout(ctx, *opTimeout)
	_, err = versions.Put(actx, advert.VersionKey(*db), entry)
	acancel()
	if err != nil {
		return fmt.Errorf("announce: %w", err)
	}
	took := pr.finish(rep, true)
	fmt.Fprintf(stderr, "published %s/%s to %s: %d files, %d uploaded, %d skipped, %d bytes uploaded in %s (%s/s), %d retries\n",
		*db, *ver, *to, rep.Files, rep.Uploaded, rep.Skipped, rep.BytesUploaded, took.Round(time.Millisecond),
		humanBytes(float64(rep.BytesUploaded)/max(took.Seconds(), 1e-9)), rep.Retries)
	// The cache's index moves on once the version is out (its nodes
	// build it meanwhile): a publish that failed leaves the base's.
	if err := keep(); err != nil {
		fmt.Fprintf(stderr, "the cache %s keeps no index of %s/%s (%v): the next --base over it builds the base\n", *cache, *db, *ver, err)
	}
	return nil
}

// openVersions opens the versions bucket (kvwatch.OpenVersions), trying
// again until connectTimeout: a server that has just started may not
// answer for JetStream yet.
func openVersions(ctx context.Context, js jetstream.JetStream, cfg kvwatch.Config, connectTimeout time.Duration) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	pause := backoff.New(50*time.Millisecond, time.Second)
	for {
		kv, err := kvwatch.OpenVersions(ctx, js, cfg)
		if err == nil || errors.Is(err, kvwatch.ErrInvalidConfig) {
			return kv, err
		}
		if !pause.Wait(ctx) {
			return nil, fmt.Errorf("%w (within --connect-timeout %v)", err, connectTimeout)
		}
	}
}

// withdrawAnnouncement removes db's announcement from the versions
// bucket if it names version (a newer one stays), with a purge marker
// that expires as the bucket's markers do. The purge is a compare-and-set
// on the revision read: an announcement written in between (a newer
// version published meanwhile) makes it fail, and the entry is read
// again, never purged unread. Each request is bounded by opTimeout.
func withdrawAnnouncement(ctx context.Context, versions jetstream.KeyValue, db, version string, opTimeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 3*opTimeout)
	defer cancel()
	key := advert.VersionKey(db)
	var opts []jetstream.KVDeleteOpt
	if st, err := versions.Status(ctx); err == nil && st.Config().LimitMarkerTTL > 0 {
		opts = append(opts, jetstream.PurgeTTL(st.Config().LimitMarkerTTL))
	}
	for {
		e, err := versions.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("announcement of %s: %w", db, err)
		}
		if v, err := advert.DecodeVersion(db, e.Value()); err != nil || v.Version != version {
			return nil
		}
		err = versions.Purge(ctx, key, append(opts, jetstream.LastRevision(e.Revision()))...)
		if err == nil {
			return nil
		}
		if !isWrongLastSeq(err) {
			return fmt.Errorf("withdraw the announcement of %s: %w", db, err)
		}
		// Written since it was read: read it again (ctx bounds the loop).
	}
}

// isWrongLastSeq reports a failed compare-and-set: JetStream's "wrong
// last sequence", 10071, or 10164 on replicated streams.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// publishProgress shows a publish's progress on w: a progress bar (bytes,
// files, throughput, ETA) when w is a terminal, else a plain line at most
// every interval. Its methods are safe for concurrent use, as
// objstore.PublishOptions' callbacks require, and do not block on
// anything but w.
type publishProgress struct {
	w        io.Writer
	name     string // db/version
	interval time.Duration
	start    time.Time
	bar      *progressbar.ProgressBar // nil: plain lines; set by EventStart

	mu       sync.Mutex // guards the fields below and writes to w
	terminal bool
	files    int
	total    int64 // bytes of all files
	skipped  int64 // bytes of the files skipped
	sent     int64 // bytes sent (uploads done and under way)
	rep      objstore.Report
	lastLine time.Time
}

func newPublishProgress(w io.Writer, terminal bool, name string, interval time.Duration) *publishProgress {
	return &publishProgress{w: w, terminal: terminal, name: name, interval: interval, start: time.Now()}
}

// observe is objstore.PublishOptions.Observe.
func (p *publishProgress) observe(e objstore.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case objstore.EventStart:
		p.files, p.total, p.rep.Files, p.rep.Bytes = e.Files, e.Bytes, e.Files, e.Bytes
		if p.terminal && p.w != io.Discard {
			p.bar = progressbar.NewOptions64(max(e.Bytes, 1),
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(p.describeLocked()),
				progressbar.OptionShowBytes(true),
				progressbar.OptionShowCount(),
				progressbar.OptionUseIECUnits(true),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionShowElapsedTimeOnFinish(),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionFullWidth(),
				progressbar.OptionSetRenderBlankState(true),
			)
			return
		}
		fmt.Fprintf(p.w, "publishing %s: %d files, %s\n", p.name, e.Files, humanBytes(float64(e.Bytes)))
		p.lastLine = time.Now()
	case objstore.EventSent:
		p.sent += e.Bytes
		if p.bar != nil {
			_ = p.bar.Add64(e.Bytes)
		}
	case objstore.EventSkipped:
		p.skipped += e.Bytes
		if p.bar != nil {
			p.bar.ChangeMax64(max(p.total-p.skipped, 1))
		}
	case objstore.EventRetry:
		msg := fmt.Sprintf("%s: attempt %d failed, retrying in %s: %v", e.File, e.Attempt, e.Wait, e.Err)
		if p.bar != nil {
			_, _ = progressbar.Bprintln(p.bar, msg)
		} else {
			fmt.Fprintln(p.w, msg)
		}
	}
	p.lineLocked()
}

// progress is objstore.PublishOptions.Progress.
func (p *publishProgress) progress(r objstore.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rep = r
	if p.bar != nil {
		p.bar.Describe(p.describeLocked())
	}
	p.lineLocked()
}

// describeLocked is the bar's description: db/version and files done.
func (p *publishProgress) describeLocked() string {
	d := fmt.Sprintf("%s %d/%d files", p.name, p.rep.Uploaded+p.rep.Skipped, p.files)
	if p.rep.Skipped > 0 {
		d += fmt.Sprintf(" (%d skipped)", p.rep.Skipped)
	}
	return d
}

// lineLocked prints a plain progress line if there is no bar and the
// last line is interval old.
func (p *publishProgress) lineLocked() {
	now := time.Now()
	if p.bar != nil || p.total == 0 || now.Sub(p.lastLine) < p.interval {
		return
	}
	p.lastLine = now
	elapsed := now.Sub(p.start).Seconds()
	rate := float64(p.sent) / max(elapsed, 1e-9)
	eta := "?"
	if left := p.total - p.skipped - p.sent; rate > 0 {
		eta = (time.Duration(float64(left)/rate*float64(time.Second)) + time.Second/2).Truncate(time.Second).String()
	}
	r := p.rep
	fmt.Fprintf(p.w, "publishing %s: %d/%d files (%d uploaded, %d skipped), %s/%s sent, %s/s, ETA %s\n",
		p.name, r.Uploaded+r.Skipped, p.files, r.Uploaded, r.Skipped,
		humanBytes(float64(p.sent)), humanBytes(float64(p.total-p.skipped)), humanBytes(rate), eta)
}

// finish ends the bar (full if ok, where it stands if not) and returns
// the time since the start.
func (p *publishProgress) finish(r objstore.Report, ok bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rep = r
	if p.bar != nil {
		p.bar.Describe(p.describeLocked())
		if ok {
			_ = p.bar.Finish()
		} else {
			_ = p.bar.Exit()
		}
		fmt.Fprintln(p.w)
	}
	return time.Since(p.start)
}

// humanBytes formats n bytes with an IEC unit ("12.5 MiB").
func humanBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// reorder moves flags before positional arguments, so that both
// "publish DIR --to …" and "publish --to … DIR" parse. A flag takes the
// next argument as its value unless it is a boolean flag of fs or is
// written --flag=value.
func reorder(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && !isBoolFlag(fs, name) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

// isBoolFlag reports whether fs defines name as a boolean flag.
func isBoolFlag(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// probeNATS dials each server of urls once, without retries: the error
// says why none can be reached (connection refused, no such host).
// nats.Connect would only say "no servers available".
func probeNATS(urls string, timeout time.Duration) error {
	var errs []error
	for _, u := range spangle.SplitList(urls) {
		host := u
		if p, err := url.Parse(u); err == nil && p.Host != "" {
			host = p.Host
		}
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(host, "4222")
		}
		c, err := net.DialTimeout("tcp", host, timeout)
		if err == nil {
			c.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("NATS %s unreachable: %w", urls, errors.Join(errs...))
}
