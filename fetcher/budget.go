package fetcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultBufferMemory is the default of BufferMemory: 128 MiB of fetched
// bytes for the whole Manager, sized for a sidecar driving 10,000
// partitions within 512 MiB of memory.
const DefaultBufferMemory = 128 << 20

// BufferMemory bounds the fetched record bytes the Manager holds at once,
// across all mirrors and partitions (the sidecar's
// mirror.buffer.memory.bytes; default DefaultBufferMemory). A fetch session
// reserves room before each fetch and sends it with that many bytes at most
// (the request's MaxBytes); bytes a response did not use go back at once,
// and each partition's bytes go back once its driver has appended them (see
// budget.go). Fetches wait while the budget is spent. A single batch larger
// than the room left is still fetched once nothing else is held, so the
// budget can be exceeded by one batch larger than itself, never deadlock.
func BufferMemory(bytes int64) Opt { return opt(func(c *cfg) { c.bufferMemory = bytes }) }

// minFetchReserve is the least room a fetch waits for, unless it wants less
// or nothing is held at all: a fetch of a few KiB for many partitions would
// be all round trips.
const minFetchReserve = 256 << 10

// budget is the Manager's memory budget of fetched bytes. Sessions reserve
// room before a fetch (reserve), give back what the response did not use
// and charge each partition's records to it; drivers give those back when
// the records are appended or dropped (release).
type budget struct {
	limit int64
	met   *budgetMetrics

	mu       sync.Mutex // leaf lock
	sessions int64      // fetch sessions running: each may hold limit/sessions for its fetch
	used     int64
	peak     int64 // the most used at once, for tests
	// overReleased counts bytes released beyond what was held.
	overReleased int64
	changed      chan struct{} // closed (and replaced) when room is given back
}

func newBudget(limit int64, met *budgetMetrics) *budget {
	met.limit.Set(float64(limit))
	return &budget{limit: limit, met: met, changed: make(chan struct{})}
}

// sessionStarted and sessionEnded count the fetch sessions, which share
// the budget.
func (b *budget) sessionStarted() { b.mu.Lock(); b.sessions++; b.mu.Unlock() }
func (b *budget) sessionEnded()   { b.mu.Lock(); b.sessions--; b.mu.Unlock() }

// reserve waits until there is room for a fetch that wants want bytes and
// takes it. A fetch gets at most its session's share of the budget
// (limit/sessions: a long poll with no data holds its reservation, and must
// not keep the other sessions from fetching); of that, what is free, but
// at least min(share, minFetchReserve, limit/4) unless nothing is held at
// all (then it may take its share whatever else waits). It returns 0 if
// ctx ended first.
func (b *budget) reserve(ctx context.Context, want int64) int64 {
	var waitStart time.Time
	defer func() {
		if !waitStart.IsZero() {
			b.met.wait.Add(time.Since(waitStart).Seconds())
		}
	}()
	for {
		b.mu.Lock()
		share := max(min(want, b.limit/max(b.sessions, 1)), 1)
		free := b.limit - b.used
		if free >= min(share, minFetchReserve, max(b.limit/4, 1)) || b.used == 0 {
			n := max(min(share, free), 1)
			b.addLocked(n)
			b.mu.Unlock()
			return n
		}
		ch := b.changed
		b.mu.Unlock()
		if waitStart.IsZero() {
			waitStart = time.Now()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0
		}
	}
}

// force takes n bytes whether or not there is room: a response holding a
// batch larger than the fetch's reservation (the broker returns the first
// batch whole).
func (b *budget) force(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.addLocked(n)
	b.mu.Unlock()
}

func (b *budget) addLocked(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
	b.met.used.Set(float64(b.used))
}

// release gives n bytes back and wakes the sessions waiting for room.
func (b *budget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.overReleased += -b.used // an accounting bug; tests check it is 0
		b.used = 0
	}
	b.met.used.Set(float64(b.used))
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// usage returns the bytes held now, the most held at once and the bytes
// released beyond what was held (0 unless the accounting is wrong).
func (b *budget) usage() (used, peak, over int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, b.overReleased
}

// heldLease is fetched bytes whose driver is done with them, waiting for
// the appends submitted until then: the batches refer to the fetched bytes
// (rewritten in place) until the broker answered.
type heldLease struct {
	after uint64 // release once this many items of the pipeline completed
	n     int64
}

// hold gives n fetched bytes back once every append submitted so far has
// its result (at once if none is in flight).
func (pl *pipeline) hold(n int64) {
	if n <= 0 {
		return
	}
	if pl.completed == pl.submitted {
		pl.p.m.budget.release(n)
		return
	}
	pl.leases = append(pl.leases, heldLease{after: pl.submitted, n: n})
}

// releaseCompleted gives back the leases whose appends all have results.
func (pl *pipeline) releaseCompleted() {
	var n int64
	i := 0
	for ; i < len(pl.leases) && pl.leases[i].after <= pl.completed; i++ {
		n += pl.leases[i].n
	}
	if i > 0 {
		pl.leases = pl.leases[i:]
		pl.p.m.budget.release(n)
	}
}

// releaseAll gives back every lease: the pipeline is drained.
func (pl *pipeline) releaseAll() {
	var n int64
	for _, l := range pl.leases {
		n += l.n
	}
	pl.leases = nil
	pl.p.m.budget.release(n)
}

// releaseQueued gives back the bytes of fetched data being dropped.
func (m *Manager) releaseQueued(queue []fetched) {
	var n int64
	for _, f := range queue {
		n += f.held
	}
	m.budget.release(n)
}

// budgetMetrics are the collectors of the memory budget.
type budgetMetrics struct {
	used  prometheus.Gauge
	limit prometheus.Gauge
	wait  prometheus.Counter
}

func newBudgetMetrics(reg prometheus.Registerer) (*budgetMetrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	bm := &budgetMetrics{
		used: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sidemirror_buffer_memory_used_bytes",
			Help: "Fetched record bytes held now (fetches in flight included), of mirror.buffer.memory.bytes.",
		}),
		limit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sidemirror_buffer_memory_limit_bytes",
			Help: "The configured mirror.buffer.memory.bytes.",
		}),
		wait: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sidemirror_buffer_memory_wait_seconds_total",
			Help: "Time fetch sessions waited for room in mirror.buffer.memory.bytes.",
		}),
	}
	var err error
	bm.used = register(reg, bm.used, &err)
	bm.limit = register(reg, bm.limit, &err)
	bm.wait = register(reg, bm.wait, &err)
	if err != nil {
		return nil, fmt.Errorf("budget metrics: %w", err)
	}
	return bm, nil
}
