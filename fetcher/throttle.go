package fetcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ReplicationThrottledRate caps the bytes per second this Manager appends
// to the local broker, across all its partitions and mirrors (the sidecar's
// mirror.replication.throttled.rate; 0, the default, is no limit). Every
// batch counts: mirrored, filler, rebuilt and transactional ones. The cap is
// a token bucket in front of the appender (throttle.go): appends wait, so
// the partitions' buffers fill and their fetches pause, and the source is
// read no faster than the destination is written.
func ReplicationThrottledRate(bytesPerSecond int64) Opt {
	return opt(func(c *cfg) { c.throttleRate = bytesPerSecond })
}

// throttleBurstSeconds is how much of the rate the bucket saves up while
// nothing is appended: 100 ms, so a burst after an idle spell stays short.
const throttleBurstSeconds = 0.1

// minThrottleBurst is the least the bucket holds, so that a very low rate
// still lets produce requests of a few batches through.
const minThrottleBurst = 16 << 10

// clock is the time source of the throttle, replaced in tests.
type clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx ends; it reports whether d passed.
	Sleep(ctx context.Context, d time.Duration) bool
}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) bool { return sleepCtx(ctx, d) }

// throttle is a token bucket of bytes. The appender waits until the bucket
// is not in debt, builds a produce request of at most requestLimit bytes (a
// single larger batch still goes, alone) and takes its size, which may put
// the bucket in debt: the next request waits until the debt is paid. So the
// rate holds exactly over time whatever the batch sizes, and a batch larger
// than the bucket never waits forever.
type throttle struct {
	rate   float64 // bytes per second
	burst  float64 // most tokens the bucket holds
	clock  clock
	waited prometheus.Counter

	mu     sync.Mutex // leaf lock
	tokens float64
	last   time.Time
}

func newThrottle(rate int64, clk clock, waited prometheus.Counter) *throttle {
	r := float64(rate)
	t := &throttle{rate: r, burst: max(r*throttleBurstSeconds, minThrottleBurst), clock: clk, waited: waited}
	t.tokens, t.last = t.burst, clk.Now()
	return t
}

// refillLocked adds the tokens earned since the last call.
func (t *throttle) refillLocked(now time.Time) {
	if d := now.Sub(t.last); d > 0 {
		t.tokens = min(t.burst, t.tokens+d.Seconds()*t.rate)
	}
	t.last = now
}

// wait returns once the bucket is out of debt; false if ctx ended first.
// The time it waited counts in the throttle metric.
func (t *throttle) wait(ctx context.Context) bool {
	for {
		t.mu.Lock()
		now := t.clock.Now()
		t.refillLocked(now)
		debt := -t.tokens
		t.mu.Unlock()
		if debt <= 0 {
			return true
		}
		d := time.Duration(debt / t.rate * float64(time.Second))
		d = max(d, time.Millisecond)
		ok := t.clock.Sleep(ctx, d)
		t.waited.Add(t.clock.Now().Sub(now).Seconds())
		if !ok {
			return false
		}
	}
}

// take spends n bytes.
func (t *throttle) take(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refillLocked(t.clock.Now())
	t.tokens -= float64(n)
}

// requestLimit is the most bytes of batches one produce request should hold
// while throttled: a bucketful, so requests stay small against the rate.
func (t *throttle) requestLimit() int {
	return int(min(t.burst, maxProduceRequestBytes))
}

// throttleMetrics are the collectors of throttling, both directions.
type throttleMetrics struct {
	// appendWait is the time the appender waited for
	// mirror.replication.throttled.rate.
	appendWait prometheus.Counter
	// rate is the configured rate, 0 when unlimited.
	rate prometheus.Gauge
	// source is the throttle time source brokers reported in fetch
	// responses (a consumer_byte_rate quota on the fetcher's client ID).
	source *prometheus.CounterVec // mirror
}

func newThrottleMetrics(reg prometheus.Registerer) (*throttleMetrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	tm := &throttleMetrics{
		appendWait: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sidemirror_replication_throttle_seconds_total",
			Help: "Time appends to the local broker waited for mirror.replication.throttled.rate.",
		}),
		rate: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sidemirror_replication_throttled_rate_bytes",
			Help: "The configured mirror.replication.throttled.rate in bytes per second; 0 is no limit.",
		}),
		source: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_source_throttle_seconds_total",
			Help: "Throttle time that source brokers reported in fetch responses (a client quota such as consumer_byte_rate on the fetcher's client ID).",
		}, []string{"mirror"}),
	}
	var err error
	tm.appendWait = register(reg, tm.appendWait, &err)
	tm.rate = register(reg, tm.rate, &err)
	tm.source = register(reg, tm.source, &err)
	if err != nil {
		return nil, fmt.Errorf("throttle metrics: %w", err)
	}
	return tm, nil
}
