package protocol

import (
	"context"
	"sync"
	"time"
)

// This file bounds what clients can make the server hold: open
// connections (MaxConnections), request bytes read and not yet answered
// across all connections (MaxQueuedBytes), idle time (ReadTimeout), and,
// in codec.go, the array elements one request decodes to
// (MaxRequestElements).

// Defaults of the bounds.
const (
	// DefaultMaxConnections is admin.max.connections' default.
	DefaultMaxConnections = 1000
	// DefaultMaxQueuedBytes is admin.queued.max.request.bytes' default.
	DefaultMaxQueuedBytes = 32 << 20
)

// MaxConnections bounds the connections open at once on each of the
// server's listeners (so that clients filling the admin listener cannot
// lock the peers out of theirs); a connection beyond it is closed when
// accepted, and logged at most every 10 seconds. n <= 0 restores DefaultMaxConnections.
func MaxConnections(n int) ServerOpt {
	return func(c *serverConfig) {
		if n <= 0 {
			n = DefaultMaxConnections
		}
		c.maxConnections = n
	}
}

// MaxQueuedBytes bounds the request bytes read and not yet answered over
// all connections: a connection whose next request does not fit waits
// before reading it (as Kafka's queued.max.request.bytes). It is raised to
// the largest frame when smaller. n <= 0 restores DefaultMaxQueuedBytes.
func MaxQueuedBytes(n int64) ServerOpt {
	return func(c *serverConfig) {
		if n <= 0 {
			n = DefaultMaxQueuedBytes
		}
		c.maxQueuedBytes = n
	}
}

// byteBudget is a weighted semaphore of request bytes.
type byteBudget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	max   int64
	inUse int64
}

func newByteBudget(max int64) *byteBudget {
	b := &byteBudget{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire waits until n bytes fit or ctx ends; it reports whether they
// were acquired.
func (b *byteBudget) acquire(ctx context.Context, n int64) bool {
	n = min(n, b.max)
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.inUse+n > b.max {
		if ctx.Err() != nil {
			return false
		}
		b.cond.Wait()
	}
	b.inUse += n
	return true
}

func (b *byteBudget) release(n int64) {
	n = min(n, b.max)
	b.mu.Lock()
	b.inUse -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}

// InUse returns the bytes held.
func (b *byteBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}

// rateLimit lets a log line through at most every 10 seconds and counts the
// events in between.
type rateLimit struct {
	mu    sync.Mutex
	last  time.Time
	count int
}

// allow counts an event and reports whether it is to be logged.
func (r *rateLimit) allow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	if time.Since(r.last) < 10*time.Second {
		return false
	}
	r.last = time.Now()
	return true
}

// take returns the events counted since the last take.
func (r *rateLimit) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.count
	r.count = 0
	return n
}
