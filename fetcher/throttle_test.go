package fetcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// fakeClock is a clock whose Sleep moves time on at once.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration, _ <-chan struct{}) bool {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err() == nil
}

// TestThrottleRate drives the token bucket as the appender does (wait, build
// a request of at most requestLimit bytes or one larger batch, take its
// size) with batches of mixed sizes, some larger than the bucket, on a fake
// clock, and checks the rate over 20 simulated seconds and the throttle
// time counted.
func TestThrottleRate(t *testing.T) {
	for _, rate := range []int64{1_000_000, 50_000, 100 << 20} {
		clk := &fakeClock{now: time.Unix(1700000000, 0)}
		waited := prometheus.NewCounter(prometheus.CounterOpts{Name: "w"})
		th := newThrottle(rate, clk, waited)
		sizes := []int{300, 70 << 10, 1 << 20, 5 << 10, 2 << 20, 900, 16 << 10}
		start := clk.Now()
		var sent int64
		for i := 0; clk.Now().Sub(start) < 20*time.Second; i++ {
			if !th.wait(context.Background(), nil) {
				t.Fatal("wait returned false with a live context")
			}
			// Pack batches up to the request limit, at least one.
			size := 0
			for j := i; size == 0 || size+sizes[j%len(sizes)] <= th.requestLimit(); j++ {
				size += sizes[j%len(sizes)]
			}
			th.take(size)
			sent += int64(size)
		}
		// The last request went out at the end of the span; what it took
		// is paid for after it.
		elapsed := clk.Now().Sub(start).Seconds()
		got := float64(sent) / elapsed
		if got < 0.9*float64(rate) || got > 1.1*float64(rate) {
			t.Errorf("rate %d: %0.f bytes/s over %.1f s (sent %d)", rate, got, elapsed, sent)
		}
		if w := metricValue(t, waited); w < 0.5*elapsed && rate < 100<<20 {
			t.Errorf("rate %d: throttle time %.1f s of %.1f s", rate, w, elapsed)
		}
	}
}

// TestThrottleWaitCancelled checks that a throttled wait ends with its
// context.
func TestThrottleWaitCancelled(t *testing.T) {
	th := newThrottle(1000, realClock{}, prometheus.NewCounter(prometheus.CounterOpts{Name: "w"}))
	th.take(1 << 20) // about 17 minutes of debt
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if th.wait(ctx, nil) {
		t.Fatal("wait returned true with a debt of minutes and a cancelled context")
	}
}

// TestThrottledMirrorRate mirrors a backlog of about 0.9 MB with
// ReplicationThrottledRate and measures the appended bytes per second from
// the first append to the last, about three seconds of real time: within 10%
// of the rate.
func TestThrottledMirrorRate(t *testing.T) {
	const (
		topic = "throttled"
		rate  = 300_000
	)
	parts := []int32{0, 1, 2}
	e := newTestEnv(t, 1, map[string]int32{topic: 3})
	cl := e.producer(kgo.NoCompression(), kgo.ProducerBatchMaxBytes(1<<20))
	e.produce(cl, topic, parts, 0, 6000, 400) // batches of about 24 KB: not coalesced
	m := e.newManager(ReplicationThrottledRate(rate))
	mirrored := func() (n int64) {
		for _, st := range m.Status() {
			n += st.BytesMirrored
		}
		return n
	}
	startAll(t, m, topic, parts)
	var (
		t0 time.Time
		b0 int64
	)
	testwait.For(t, waitTimeout, "the first append", func() bool {
		b0, t0 = mirrored(), time.Now()
		return b0 > 0
	})
	e.waitCaughtUp(m, topic, parts)
	b1, t1 := mirrored(), time.Now()
	got := float64(b1-b0) / t1.Sub(t0).Seconds()
	t.Logf("%d bytes in %s after the first %d: %.0f bytes/s at a rate of %d", b1-b0, t1.Sub(t0), b0, got, rate)
	if b1-b0 < 2*rate {
		t.Fatalf("only %d bytes after the first append: too few to measure", b1-b0)
	}
	if got < 0.9*rate || got > 1.1*rate {
		t.Fatalf("%.0f bytes/s, want %d +-10%%", got, rate)
	}
	if w := metricValue(t, m.thm.appendWait); w < 0.5*t1.Sub(t0).Seconds() {
		t.Fatalf("throttle time %.2f s of %s", w, t1.Sub(t0))
	}
	if n := e.compareTopic(topic); n != 3*6000 {
		t.Fatalf("compared %d records", n)
	}
}

// drive runs the appender's use of the bucket for span on the fake clock,
// with requests of size bytes, and returns the bytes per second sent.
func drive(t *testing.T, th *throttle, clk *fakeClock, span time.Duration, size int) float64 {
	t.Helper()
	start := clk.Now()
	var sent int64
	for clk.Now().Sub(start) < span {
		if !th.wait(context.Background(), nil) {
			t.Fatal("wait returned false with a live context and no interrupt")
		}
		th.take(size)
		sent += int64(size)
	}
	return float64(sent) / clk.Now().Sub(start).Seconds()
}

// TestThrottleSetRate changes the rate of a bucket in use: each span holds
// its own rate (+-10%), and a rate of 0 ends a debt at once.
func TestThrottleSetRate(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1700000000, 0)}
	th := newThrottle(1_000_000, clk, prometheus.NewCounter(prometheus.CounterOpts{Name: "w"}))
	for _, rate := range []int64{1_000_000, 100_000, 5_000_000} {
		if changed := th.setRate(rate); changed != (rate != 1_000_000) {
			t.Fatalf("setRate(%d) reported changed=%v", rate, changed)
		}
		if got := drive(t, th, clk, 10*time.Second, 20<<10); got < 0.9*float64(rate) || got > 1.1*float64(rate) {
			t.Errorf("after setRate(%d): %.0f bytes/s", rate, got)
		}
		if want := int(max(float64(rate)*throttleBurstSeconds, minThrottleBurst)); th.requestLimit() != want {
			t.Errorf("rate %d: request limit %d, want %d", rate, th.requestLimit(), want)
		}
	}
	th.take(100 << 20) // minutes of debt
	if th.due() {
		t.Fatal("due with a debt")
	}
	th.setRate(0)
	before := clk.Now()
	if th.limited() || !th.due() || !th.wait(context.Background(), nil) || clk.Now() != before {
		t.Fatalf("rate 0: limited %v, due %v, waited %s", th.limited(), th.due(), clk.Now().Sub(before))
	}
	// Back to a rate: the bucket starts full, not in the old debt.
	th.setRate(50_000)
	if !th.due() {
		t.Fatal("a bucket limited again is in debt")
	}
}

// TestThrottleWaitInterrupted checks that a wait for a long debt ends when
// the appender is poked (a submit, a new setting).
func TestThrottleWaitInterrupted(t *testing.T) {
	th := newThrottle(1000, realClock{}, prometheus.NewCounter(prometheus.CounterOpts{Name: "w"}))
	th.take(1 << 20)
	interrupt := make(chan struct{}, 1)
	interrupt <- struct{}{}
	start := time.Now()
	if th.wait(context.Background(), interrupt) {
		t.Fatal("wait returned true: debt paid in no time")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("an interrupted wait took %s", d)
	}
}

// TestThrottleSelection checks which partitions a selection throttles: a
// topic without an entry whole, the others as listed.
func TestThrottleSelection(t *testing.T) {
	m := &Manager{}
	part := func(topic string, n int32) *partition {
		return &partition{key: Partition{Mirror: "m", Topic: topic, Partition: n}}
	}
	if !m.throttledPartition(part("a", 0)) {
		t.Fatal("no selection set: a partition is not throttled")
	}
	sel := compileSelection(map[string]ThrottledReplicas{"listed": {Partitions: []int32{0, 2}}, "all": {All: true}, "none": {}})
	m.thrSel.Store(&sel)
	for _, tc := range []struct {
		topic string
		p     int32
		want  bool
	}{
		{"other", 3, true}, {"listed", 0, true}, {"listed", 1, false}, {"listed", 2, true}, {"all", 7, true}, {"none", 0, false},
	} {
		if got := m.throttledPartition(part(tc.topic, tc.p)); got != tc.want {
			t.Errorf("%s-%d: throttled %v, want %v", tc.topic, tc.p, got, tc.want)
		}
	}
}

// TestAppenderSkipsUnselected checks that next with a selection leaves the
// other partitions' batches queued, in their turn.
func TestAppenderSkipsUnselected(t *testing.T) {
	a := newAppender(&Manager{cfg: defaultCfg()})
	part := func(n int32) *partition { return &partition{key: Partition{Mirror: "m", Topic: "t", Partition: n}} }
	p0, p1 := part(0), part(1)
	a.submit(&appendItem{p: p0, raw: []byte("a0")})
	a.submit(&appendItem{p: p1, raw: []byte("a1")})
	_, items, _ := a.next(maxProduceRequestBytes, func(p *partition) bool { return p == p1 })
	if len(items) != 1 || items[0].p != p1 {
		t.Fatalf("selected request holds %d items", len(items))
	}
	_, items, _ = a.next(maxProduceRequestBytes, func(p *partition) bool { return p == p1 })
	if len(items) != 0 {
		t.Fatalf("a second selected request holds %d items", len(items))
	}
	_, items, _ = a.next(maxProduceRequestBytes, nil)
	if len(items) != 1 || items[0].p != p0 {
		t.Fatalf("the skipped partition's batch is not next: %d items", len(items))
	}
}

// TestThrottleAtRuntime mirrors a backlog of two partitions with a rate on
// partition 0 only (mirror.replication.throttled.replicas): partition 1
// catches up while partition 0 is still far behind; then the dynamic rate
// of 0 (no limit) replaces the initial rate without a restart and
// partition 0 catches up at once; then a dynamic rate, measured.
func TestThrottleAtRuntime(t *testing.T) {
	const topic = "throttled-sel"
	parts := []int32{0, 1}
	e := newTestEnv(t, 1, map[string]int32{topic: 2})
	cl := e.producer(kgo.NoCompression(), kgo.ProducerBatchMaxBytes(1<<20))
	e.produce(cl, topic, parts, 0, 3000, 400) // about 165 kB per partition, 8 s at 20 kB/s
	m := e.newManager(ReplicationThrottledRate(20_000))
	m.SetReplicationThrottle(ReplicationThrottle{Replicas: map[string]ThrottledReplicas{topic: {Partitions: []int32{0}}}})
	bytesOf := func(p int32) int64 {
		for _, st := range m.Status() {
			if st.Topic == topic && st.Partition.Partition == p {
				return st.BytesMirrored
			}
		}
		return 0
	}
	startAll(t, m, topic, parts)
	e.waitCaughtUp(m, topic, []int32{1})
	b0, b1 := bytesOf(0), bytesOf(1)
	t.Logf("partition 1 caught up with %d bytes; partition 0 has %d", b1, b0)
	if b0 > b1/2 {
		t.Fatalf("partition 0 (throttled at 20 kB/s) mirrored %d bytes while the unthrottled partition 1 mirrored %d", b0, b1)
	}
	if v := metricValue(t, m.thm.rate); v != 20_000 {
		t.Fatalf("rate gauge %v", v)
	}

	m.SetReplicationThrottle(ReplicationThrottle{RateSet: true, Rate: 0, Replicas: map[string]ThrottledReplicas{topic: {Partitions: []int32{0}}}})
	start := time.Now()
	e.waitCaughtUp(m, topic, []int32{0})
	// At 20 kB/s the rest would take about 7 s.
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("partition 0 took %s to catch up after the rate was lifted", d)
	}
	if v := metricValue(t, m.thm.rate); v != 0 {
		t.Fatalf("rate gauge %v after the dynamic rate 0", v)
	}

	// A dynamic rate on the whole topic (no selection), measured.
	const rate = 150_000
	m.SetReplicationThrottle(ReplicationThrottle{RateSet: true, Rate: rate})
	mirrored := func() int64 { return bytesOf(0) + bytesOf(1) }
	before := mirrored()
	e.produce(cl, topic, parts, 3000, 6000, 400) // about 660 kB: 4.4 s
	var (
		t0 time.Time
		m0 int64
	)
	testwait.For(t, waitTimeout, "the first append at the new rate", func() bool {
		m0, t0 = mirrored(), time.Now()
		return m0 > before
	})
	e.waitCaughtUp(m, topic, parts)
	m1, t1 := mirrored(), time.Now()
	got := float64(m1-m0) / t1.Sub(t0).Seconds()
	t.Logf("%d bytes in %s at a dynamic rate of %d: %.0f bytes/s", m1-m0, t1.Sub(t0), rate, got)
	if m1-m0 < 2*rate {
		t.Fatalf("only %d bytes: too few to measure", m1-m0)
	}
	if got < 0.9*rate || got > 1.1*rate {
		t.Fatalf("%.0f bytes/s, want %d +-10%%", got, rate)
	}
	if n := e.compareTopic(topic); n != 2*9000 {
		t.Fatalf("compared %d records", n)
	}
}
