package fetcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// ReplicationThrottledRate caps the bytes per second this Manager appends
// to the local broker, across all its partitions and mirrors (the sidecar's
// mirror.replication.throttled.rate; 0, the default, is no limit). It is
// the initial rate: SetReplicationThrottle replaces it at runtime, and
// limits it to some partitions. Every batch of a throttled partition
// counts: mirrored, filler, rebuilt and transactional ones. The cap is
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

// ReplicationThrottle is the destination-side throttle as the raft state
// has it (KIP-1279 §4.12), set at runtime with SetReplicationThrottle.
type ReplicationThrottle struct {
	// Rate replaces ReplicationThrottledRate while RateSet (the broker's
	// dynamic mirror.replication.throttled.rate wins over the sidecar's
	// properties, as Kafka's dynamic broker configs win over
	// server.properties): bytes per second, 0 is no limit.
	Rate    int64
	RateSet bool
	// Replicas selects, by topic, the partitions of this broker that are
	// throttled (the topic's mirror.replication.throttled.replicas). A
	// topic without an entry is throttled whole; the others only in the
	// partitions listed, or whole with All.
	Replicas map[string]ThrottledReplicas
}

// ThrottledReplicas are the throttled partitions of one topic.
type ThrottledReplicas struct {
	All        bool
	Partitions []int32
}

// throttleSelection is the compiled ReplicationThrottle.Replicas.
type throttleSelection map[string]map[int32]bool // nil inner map: all partitions

// throttled reports whether the partition's appends count against the
// rate.
func (s throttleSelection) throttled(topic string, partition int32) bool {
	parts, ok := s[topic]
	if !ok || parts == nil {
		return true
	}
	return parts[partition]
}

func compileSelection(replicas map[string]ThrottledReplicas) throttleSelection {
	sel := make(throttleSelection, len(replicas))
	for topic, r := range replicas {
		if r.All {
			sel[topic] = nil
			continue
		}
		parts := make(map[int32]bool, len(r.Partitions))
		for _, p := range r.Partitions {
			parts[p] = true
		}
		sel[topic] = parts
	}
	return sel
}

// SetReplicationThrottle changes the throttle at runtime: the rate (the
// bucket keeps what it holds, so a change neither frees a burst nor drops
// a debt beyond the new bucket) and which partitions it throttles. The
// appender applies it to the next produce request; one that waits for the
// old rate is woken up.
func (m *Manager) SetReplicationThrottle(rt ReplicationThrottle) {
	rate := m.cfg.throttleRate
	if rt.RateSet {
		rate = rt.Rate
	}
	if m.thr.setRate(rate) {
		m.thm.rate.Set(float64(rate))
		m.log.Info("replication throttle rate changed", zap.Int64("bytes-per-second", rate), zap.Bool("dynamic", rt.RateSet))
	}
	sel := compileSelection(rt.Replicas)
	m.thrSel.Store(&sel)
	m.app.poke()
}

// throttledPartition reports whether p's appends count against the rate.
func (m *Manager) throttledPartition(p *partition) bool {
	sel := m.thrSel.Load()
	return sel == nil || sel.throttled(p.key.Topic, p.key.Partition)
}

// unthrottledPartition reports whether p's appends do not count against
// the rate.
func (m *Manager) unthrottledPartition(p *partition) bool { return !m.throttledPartition(p) }

// clock is the time source of the throttle, replaced in tests.
type clock interface {
	Now() time.Time
	// Sleep waits for d, or until ctx ends or interrupt fires; it reports
	// whether d passed.
	Sleep(ctx context.Context, d time.Duration, interrupt <-chan struct{}) bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration, interrupt <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-interrupt:
	case <-ctx.Done():
	}
	return false
}

// throttle is a token bucket of bytes. The appender waits until the bucket
// is not in debt, builds a produce request of at most requestLimit bytes (a
// single larger batch still goes, alone) and takes its size, which may put
// the bucket in debt: the next request waits until the debt is paid. So the
// rate holds exactly over time whatever the batch sizes, and a batch larger
// than the bucket never waits forever. A rate of 0 is no limit; the rate
// changes at runtime (setRate).
type throttle struct {
	clock  clock
	waited prometheus.Counter

	mu     sync.Mutex // leaf lock
	rate   float64    // bytes per second, 0: no limit
	burst  float64    // most tokens the bucket holds
	tokens float64
	last   time.Time
}

func newThrottle(rate int64, clk clock, waited prometheus.Counter) *throttle {
	t := &throttle{clock: clk, waited: waited, last: clk.Now()}
	t.setRate(rate)
	return t
}

func burstOf(rate float64) float64 { return max(rate*throttleBurstSeconds, minThrottleBurst) }

// setRate changes the rate; it reports whether it changed. Tokens earned
// so far count at the old rate; the bucket is capped at the new burst. A
// bucket that was unlimited starts full.
func (t *throttle) setRate(rate int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := float64(rate)
	if r == t.rate && t.burst > 0 {
		return false
	}
	now := t.clock.Now()
	if t.rate > 0 {
		t.refillLocked(now)
	}
	wasUnlimited := t.rate == 0
	t.rate, t.burst, t.last = r, burstOf(r), now
	if wasUnlimited {
		t.tokens = t.burst
	}
	t.tokens = min(t.tokens, t.burst)
	return true
}

// limited reports whether a rate is set.
func (t *throttle) limited() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rate > 0
}

// refillLocked adds the tokens earned since the last call.
func (t *throttle) refillLocked(now time.Time) {
	if d := now.Sub(t.last); d > 0 && t.rate > 0 {
		t.tokens = min(t.burst, t.tokens+d.Seconds()*t.rate)
	}
	t.last = now
}

// wait returns true once the bucket is out of debt (or the rate is no
// limit); false when ctx ended or interrupt fired first (the caller looks
// again: other work, or a new rate). The time it waited counts in the
// throttle metric.
func (t *throttle) wait(ctx context.Context, interrupt <-chan struct{}) bool {
	for {
		t.mu.Lock()
		now := t.clock.Now()
		t.refillLocked(now)
		debt, rate := -t.tokens, t.rate
		t.mu.Unlock()
		if debt <= 0 || rate == 0 {
			return true
		}
		d := time.Duration(debt / rate * float64(time.Second))
		d = max(d, time.Millisecond)
		slept := t.clock.Sleep(ctx, d, interrupt)
		t.waited.Add(t.clock.Now().Sub(now).Seconds())
		if !slept {
			return false
		}
	}
}

// due reports whether the bucket is out of debt (or the rate is no limit).
func (t *throttle) due() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refillLocked(t.clock.Now())
	return t.rate == 0 || t.tokens >= 0
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
	t.mu.Lock()
	defer t.mu.Unlock()
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
