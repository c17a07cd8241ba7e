package objsource

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/node"
)

// PublishOptions configure Publish.
type PublishOptions struct {
	// Parallel bounds the files uploaded at once. Default 4.
	Parallel int
	// Progress, when set, is called after each file is uploaded or
	// skipped, from the uploading goroutines (serialised by Publish).
	Progress func(Report)
}

// Report counts a Publish's work so far.
type Report struct {
	Files         int   // data files in the directory
	Uploaded      int   // files uploaded
	Skipped       int   // files already in the bucket with the same size and digest
	Bytes         int64 // bytes of the data files
	BytesUploaded int64 // bytes uploaded
}

// CreateBucket binds bucket, creating it when missing.
func CreateBucket(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.ObjectStore, error) {
	obs, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket})
	}
	if err != nil {
		return nil, fmt.Errorf("objsource: bucket %s: %w", bucket, err)
	}
	return obs, nil
}

// Publish uploads the data files of dir (regular files not starting with
// "_" or ".") as version of db, at most opts.Parallel at once, skipping
// those already there with the same size and SHA-256 digest, then writes
// _SUCCESS. On error _SUCCESS is not written: the version stays invisible
// to nodes requiring it, and a rerun uploads only what is missing.
func Publish(ctx context.Context, obs jetstream.ObjectStore, dir, db, version string, opts PublishOptions) (Report, error) {
	if !node.ValidName(db) || !node.ValidName(version) {
		return Report{}, fmt.Errorf("objsource: publish: db %q and version %q must match ^[-_a-zA-Z0-9]+$", db, version)
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Report{}, fmt.Errorf("objsource: publish: %w", err)
	}
	type file struct {
		name string
		size int64
	}
	var files []file
	var rep Report
	for _, e := range entries {
		if !isDataFile(e.Name()) {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			return Report{}, fmt.Errorf("objsource: publish: %w", err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		files = append(files, file{e.Name(), fi.Size()})
		rep.Bytes += fi.Size()
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	rep.Files = len(files)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex // guards rep and firstErr, serialises Progress
		firstErr error
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for range min(opts.Parallel, len(files)) {
		wg.Add(1)
		go func() { // owned: Publish waits for it
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(files) || ctx.Err() != nil {
					return
				}
				f := files[i]
				uploaded, err := putFile(ctx, obs, filepath.Join(dir, f.name), ObjectName(db, version, f.name), f.size)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
				if uploaded {
					rep.Uploaded++
					rep.BytesUploaded += f.size
				} else {
					rep.Skipped++
				}
				if opts.Progress != nil {
					opts.Progress(rep)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return rep, firstErr
	}
	if _, err := obs.PutBytes(ctx, ObjectName(db, version, successFile), nil); err != nil {
		return rep, fmt.Errorf("objsource: publish: write %s: %w", successFile, err)
	}
	return rep, nil
}

// putFile uploads path as name unless the object exists with the same size
// and digest; it reports whether it uploaded.
func putFile(ctx context.Context, obs jetstream.ObjectStore, path, name string, size int64) (bool, error) {
	if in, err := obs.GetInfo(ctx, name); err == nil && !in.Deleted && int64(in.Size) == size {
		digest, err := fileDigest(path)
		if err != nil {
			return false, err
		}
		if digest == in.Digest {
			return false, nil
		}
	} else if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, fmt.Errorf("objsource: publish: info %s: %w", name, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("objsource: publish: %w", err)
	}
	defer f.Close()
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name}, f); err != nil {
		return false, fmt.Errorf("objsource: publish: put %s: %w", name, err)
	}
	return true, nil
}

// fileDigest returns the file's digest as the Object Store writes it
// ("SHA-256=<base64url>").
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("objsource: publish: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("objsource: publish: digest %s: %w", path, err)
	}
	return jetstream.GetObjectDigestValue(h), nil
}

// DeleteVersion removes every object of version of db (_SUCCESS first, so
// nodes stop seeing the version before its files go) and returns how many
// it removed.
func DeleteVersion(ctx context.Context, obs jetstream.ObjectStore, db, version string) (int, error) {
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("objsource: delete: list: %w", err)
	}
	prefix := db + "/" + version + "/"
	var names []string
	for _, in := range infos {
		if !in.Deleted && len(in.Name) > len(prefix) && in.Name[:len(prefix)] == prefix {
			names = append(names, in.Name)
		}
	}
	sort.Slice(names, func(i, j int) bool { // _SUCCESS first
		return (names[i] == prefix+successFile) || (names[j] != prefix+successFile && names[i] < names[j])
	})
	for i, name := range names {
		if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return i, fmt.Errorf("objsource: delete %s: %w", name, err)
		}
	}
	return len(names), nil
}
