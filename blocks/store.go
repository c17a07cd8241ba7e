package blocks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/spangledb/spangle/kvwatch/names"
)

const (
	lockName  = "spangle.lock"
	dbsName   = "dbs"
	tmpSuffix = ".tmp" // temporary files: a manifest being written, spilled runs
)

// Store is a data dir holding versions of dbs:
//
//	<dir>/spangle.lock                       exclusive flock while open
//	<dir>/dbs/<db>/<version>/p-00007.bolt    one bbolt file per held partition
//	<dir>/dbs/<db>/<version>/manifest.json   written last: the version is complete
//
// A Store is safe for concurrent use.
type Store struct {
	dir  string
	opts Options
	log  *slog.Logger

	// ctx is cancelled by Close, to stop builds under way.
	ctx    context.Context
	cancel context.CancelFunc
	builds sync.WaitGroup // builds under way

	// loadSlots bounds the source files read at once over all builds
	// (MaxParallelLoads), as sequins' shared work queue did.
	loadSlots chan struct{}
	// bigRecords admits one load at a time to decompressed buffers beyond
	// its share of the memory budget (load.go's seqfileOptions).
	bigRecords chan struct{}

	mu       sync.Mutex      // guards lock, building
	lock     *os.File        // nil once closed
	building map[string]bool // "<db>/<version>" of builds under way
}

// CheckLock reports ErrLocked, naming dir, when another process (or
// another Store in this process) holds the lock of the data dir dir; nil
// when none does, or when dir has no lock file yet. It takes the lock and
// releases it at once: OpenStore takes it for good. It lets a caller
// refuse to start before it binds ports or starts servers.
func CheckLock(dir string) error {
	path := filepath.Join(dir, lockName)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	f, err := lockFile(path)
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return fmt.Errorf("blocks: check lock %s: %w", dir, err)
	}
	return f.Close()
}

// OpenStore opens the data dir dir, creating it if needed:
//
//  1. it takes an exclusive lock (flock on <dir>/spangle.lock) and fails
//     fast with ErrLocked, naming dir, if another process (or another
//     Store in this process) holds it;
//  2. it deletes incomplete versions (directories without a valid
//     manifest: builds interrupted by a crash) and stray temporary files.
//
// Versions with a manifest of a newer format are left alone and not listed.
func OpenStore(dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(filepath.Join(dir, dbsName), 0o755); err != nil {
		return nil, fmt.Errorf("blocks: open store: %w", err)
	}
	lock, err := lockFile(filepath.Join(dir, lockName))
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("blocks: open store %s: %w", dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		dir:        dir,
		opts:       opts,
		log:        opts.Logger,
		ctx:        ctx,
		cancel:     cancel,
		lock:       lock,
		building:   map[string]bool{},
		loadSlots:  make(chan struct{}, opts.MaxParallelLoads),
		bigRecords: make(chan struct{}, 1),
	}
	if err := s.cleanup(); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("blocks: open store %s: clean up: %w", dir, err)
	}
	return s, nil
}

// Dir returns the data dir.
func (s *Store) Dir() string { return s.dir }

// Close stops the store. It is idempotent.
//
//  1. Builds under way are cancelled; Close waits for them to remove their
//     partial versions.
//  2. The data dir's lock is released.
//
// Versions opened from the store stay usable until they are closed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.lock == nil {
		s.mu.Unlock()
		return nil
	}
	lock := s.lock
	s.lock = nil
	s.mu.Unlock()

	s.cancel()
	s.builds.Wait()
	return lock.Close()
}

func (s *Store) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lock == nil
}

func (s *Store) dbDir(db string) string { return filepath.Join(s.dir, dbsName, db) }

func (s *Store) versionDir(db, version string) string {
	return filepath.Join(s.dir, dbsName, db, version)
}

// Versions lists the complete versions on disk, by db then version, in
// byte-wise order. The manifests are the caller's.
func (s *Store) Versions() ([]*Manifest, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	dbs, err := readDirNames(filepath.Join(s.dir, dbsName))
	if err != nil {
		return nil, fmt.Errorf("blocks: list versions: %w", err)
	}
	var out []*Manifest
	for _, db := range dbs {
		versions, err := readDirNames(s.dbDir(db))
		if err != nil {
			return nil, fmt.Errorf("blocks: list versions: %w", err)
		}
		for _, v := range versions {
			if m, err := readManifest(s.versionDir(db, v), db, v); err == nil {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// Open opens a complete version for reading. ErrNoVersion if there is none
// of that name; an error wrapping ErrCorrupt if its manifest is damaged or
// a partition file differs from it in size or checksum (see
// Options.SkipVerify).
func (s *Store) Open(db, version string) (*Version, error) {
	if err := checkNames(db, version); err != nil {
		return nil, err
	}
	if s.closed() {
		return nil, ErrClosed
	}
	dir := s.versionDir(db, version)
	m, err := readManifest(dir, db, version)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNoVersion, db, version)
	}
	if err != nil {
		return nil, fmt.Errorf("blocks: open %s/%s: %w", db, version, err)
	}
	if !s.opts.SkipVerify {
		if err := verifyFiles(dir, m); err != nil {
			return nil, fmt.Errorf("blocks: open %s/%s: %w", db, version, err)
		}
	}
	return openVersion(dir, m)
}

// Remove deletes a version from disk: its manifest first, so that a crash
// half-way leaves an incomplete version that OpenStore finishes deleting.
// It closes nothing: close Versions opened from it first. ErrBuilding if it
// is being built; removing a version that does not exist is not an error.
func (s *Store) Remove(db, version string) error {
	if err := checkNames(db, version); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrClosed
	}
	if s.building[db+"/"+version] {
		return fmt.Errorf("%w: %s/%s", ErrBuilding, db, version)
	}
	if err := removeVersionDir(s.versionDir(db, version)); err != nil {
		return fmt.Errorf("blocks: remove %s/%s: %w", db, version, err)
	}
	return nil
}

// RemoveDB deletes every version of db, as Remove does, and the db's
// directory. ErrBuilding if one of its versions is being built.
func (s *Store) RemoveDB(db string) error {
	if err := checkNames(db, "v"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrClosed
	}
	for k := range s.building {
		if strings.HasPrefix(k, db+"/") {
			return fmt.Errorf("%w: %s", ErrBuilding, k)
		}
	}
	dir := s.dbDir(db)
	versions, err := readDirNames(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blocks: remove db %s: %w", db, err)
	}
	for _, v := range versions {
		if err := removeVersionDir(filepath.Join(dir, v)); err != nil {
			return fmt.Errorf("blocks: remove db %s: %w", db, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("blocks: remove db %s: %w", db, err)
	}
	return syncDir(filepath.Join(s.dir, dbsName))
}

func removeVersionDir(dir string) error {
	if err := os.Remove(filepath.Join(dir, manifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// beginBuild registers a build (or an addition, or an import) of
// db/version, which must not be under way, and returns its context, which
// Store.Close cancels. The returned func cancels that context and
// unregisters the build.
func (s *Store) beginBuild(ctx context.Context, db, version string) (context.Context, func(), error) {
	release, err := s.register(db, version)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		release()
	}, nil
}

// register marks db/version as being built; the returned func unmarks it.
func (s *Store) register(db, version string) (func(), error) {
	key := db + "/" + version
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil, ErrClosed
	}
	if s.building[key] {
		return nil, fmt.Errorf("%w: %s", ErrBuilding, key)
	}
	s.building[key] = true
	s.builds.Add(1)
	return func() {
		s.mu.Lock()
		delete(s.building, key)
		s.mu.Unlock()
		s.builds.Done()
	}, nil
}

// cleanup deletes incomplete versions, stray temporary files and empty db
// directories. Only names this package creates are touched.
func (s *Store) cleanup() error {
	root := filepath.Join(s.dir, dbsName)
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		path := filepath.Join(root, e.Name())
		if !e.IsDir() {
			if strings.HasSuffix(e.Name(), tmpSuffix) {
				s.log.Info("blocks: removing stray file", "path", path)
				if err := os.Remove(path); err != nil {
					return err
				}
			}
			continue
		}
		if !names.Valid(e.Name()) {
			continue
		}
		if err := s.cleanupDB(e.Name()); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) cleanupDB(db string) error {
	dir := s.dbDir(db)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	kept := 0
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case !e.IsDir():
			if strings.HasSuffix(e.Name(), tmpSuffix) {
				s.log.Info("blocks: removing stray file", "path", path)
				if err := os.Remove(path); err != nil {
					return err
				}
				continue
			}
		case names.Valid(e.Name()):
			m, err := readManifest(path, db, e.Name())
			switch {
			case err == nil:
				if err := s.removeStrays(path, m); err != nil {
					return err
				}
			case errors.Is(err, errFutureFormat):
				s.log.Warn("blocks: keeping a version of a newer format", "db", db, "version", e.Name(), "err", err)
			default:
				s.log.Info("blocks: removing incomplete version", "db", db, "version", e.Name(), "reason", err)
				if err := removeVersionDir(path); err != nil {
					return err
				}
				continue
			}
		}
		kept++
	}
	if kept == 0 {
		return os.Remove(dir)
	}
	return nil
}

// removeStrays deletes from a complete version's directory the temporary
// files and the partition files its manifest m does not list: what an
// AddPartitions interrupted by a crash left (its manifest, written last,
// was not replaced, so the version is the one it was before).
func (s *Store) removeStrays(dir string, m *Manifest) error {
	listed := make(map[string]bool, len(m.Partitions))
	for _, p := range m.Partitions {
		listed[partitionFile(p)] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, tmpSuffix) || partitionFileRE.MatchString(name) && !listed[name]) {
			continue
		}
		if !strings.HasSuffix(name, tmpSuffix) {
			s.log.Info("blocks: removing a partition file the manifest does not list (interrupted AddPartitions)",
				"db", m.DB, "version", m.Version, "file", name)
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// readDirNames lists the valid db or version names of the directories in
// dir, sorted.
func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && names.Valid(e.Name()) {
			dirs = append(dirs, e.Name())
		}
	}
	slices.Sort(dirs)
	return dirs, nil
}
