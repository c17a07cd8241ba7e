package nodetest

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Lookups is lookups running while a test injects faults: readers
// goroutines each call lookup over keys 0..keys-1, round and round, until
// Stop.
type Lookups struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	done   atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	first  error
}

// StartLookups starts the lookups; t's cleanup stops them if the test
// does not.
func StartLookups(t testing.TB, readers, keys int, lookup func(key int) error) *Lookups {
	l := &Lookups{stop: make(chan struct{})}
	for r := range readers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := r; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.done.Add(1)
				if err := lookup(i % keys); err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if l.first == nil {
						l.first = err
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	t.Cleanup(func() { l.Stop() })
	return l
}

// Done returns the lookups made so far.
func (l *Lookups) Done() int64 { return l.done.Load() }

// Stop stops the lookups, waits for them, and returns how many were made,
// how many failed and the first failure. It may be called more than once.
func (l *Lookups) Stop() (done, failed int64, first error) {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done.Load(), l.failed.Load(), l.first
}
