package sidecar

import (
	"context"
	"sync"

	"go.uber.org/zap"
)

// routines starts and tracks the sidecar's goroutines. It is the only place
// in the package with a go statement: every goroutine has a name, is
// counted, and none starts once stop has been called, so a shutdown that
// waits for the count to drop to zero really waits for all of them.
type routines struct {
	log     *zap.Logger
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

func newRoutines(log *zap.Logger) *routines { return &routines{log: log} }

// Go runs fn in a new goroutine unless stop was called; it reports whether
// the goroutine started.
func (r *routines) Go(name string, fn func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		r.log.Debug("not starting goroutine after stop", zap.String("goroutine", name))
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
	return true
}

// stop refuses new goroutines from now on.
func (r *routines) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// wait blocks until every tracked goroutine has returned or ctx is done; it
// returns ctx's error in the latter case. Call stop first.
func (r *routines) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { // not tracked: it is the tracker's own waiter
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
