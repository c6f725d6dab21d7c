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

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) bool {
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
			if !th.wait(context.Background()) {
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
	if th.wait(ctx) {
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
