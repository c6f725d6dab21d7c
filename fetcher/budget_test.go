package fetcher

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

func testBudget(t *testing.T, limit int64) *budget {
	t.Helper()
	bm, err := newBudgetMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return newBudget(limit, bm)
}

// TestBudgetReserve checks the reservation rules: what is free, at least a
// quarter of the budget (else wait until room is given back), the whole
// budget when nothing is held, and no wait past the context.
func TestBudgetReserve(t *testing.T) {
	b := testBudget(t, 1000)
	ctx := context.Background()
	if n := b.reserve(ctx, 600); n != 600 {
		t.Fatalf("first reserve got %d, want 600", n)
	}
	if n := b.reserve(ctx, 600); n != 400 {
		t.Fatalf("second reserve got %d, want the 400 left", n)
	}
	got := make(chan int64)
	go func() { got <- b.reserve(ctx, 600) }()
	b.release(100) // 100 free: less than a quarter, the reserve keeps waiting
	b.release(200) // 300 free
	if n := <-got; n != 300 {
		t.Fatalf("waiting reserve got %d, want 300", n)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if n := b.reserve(cctx, 10); n != 0 {
		t.Fatalf("reserve with a full budget and an ended context got %d", n)
	}
	b.release(1000)
	b.force(5000) // a batch larger than the budget, delivered whole
	if used, peak, over := b.usage(); used != 5000 || peak != 5000 || over != 0 {
		t.Fatalf("usage %d, peak %d, over-released %d after force", used, peak, over)
	}
	b.release(5000)
	if n := b.reserve(ctx, 1<<20); n != 1000 {
		t.Fatalf("reserve with nothing held got %d, want the whole budget", n)
	}
	if metricValue(t, b.met.wait) <= 0 {
		t.Fatal("no wait time counted")
	}
}

// TestBudgetManyPartitions mirrors a backlog of 200 partitions through a
// 64 KiB budget: the fetched bytes held never exceed it, fetches waited for
// room, everything is mirrored exactly, and every byte is given back.
func TestBudgetManyPartitions(t *testing.T) {
	const (
		topic = "many"
		n     = 200
		limit = 64 << 10
	)
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	e := newTestEnv(t, 2, map[string]int32{topic: n})
	e.produce(e.producer(kgo.NoCompression()), topic, parts, 0, 40, 10) // about 1.2 MB
	m := e.newManager(BufferMemory(limit))
	startAll(t, m, topic, parts)
	e.waitCaughtUp(m, topic, parts)
	if got := e.compareTopic(topic); got != n*40 {
		t.Fatalf("compared %d records", got)
	}
	m.Close() // the sessions' reservations for their long polls end too
	if used, _, _ := m.budget.usage(); used != 0 {
		t.Fatalf("%d bytes still held after Close", used)
	}
	_, peak, over := m.budget.usage()
	t.Logf("peak %d of %d bytes, waited %.3f s", peak, limit, metricValue(t, m.budget.met.wait))
	if peak > limit || over != 0 {
		t.Fatalf("peak %d bytes over the budget of %d (over-released %d)", peak, limit, over)
	}
	if peak < limit/2 {
		t.Fatalf("peak %d bytes: the budget of %d never filled, the test proves nothing", peak, limit)
	}
	if metricValue(t, m.budget.met.wait) <= 0 {
		t.Fatal("no fetch waited for room")
	}
}

// TestBudgetBatchLargerThanBudget mirrors a batch four times the budget
// beside many small ones: nothing deadlocks, the large batch is held alone
// (the budget is exceeded by it only), and every byte is given back.
func TestBudgetBatchLargerThanBudget(t *testing.T) {
	const (
		topic = "large"
		limit = 64 << 10
	)
	parts := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	e := newTestEnv(t, 1, map[string]int32{topic: 9})
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, topic, parts, 0, 200, 20)
	big := &kgo.Record{Topic: topic, Partition: 0, Key: []byte("big"), Value: bytes.Repeat([]byte("x"), 4*limit)}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, big).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := e.newManager(BufferMemory(limit))
	all := append([]int32{0}, parts...)
	startAll(t, m, topic, all)
	e.produce(cl, topic, parts, 200, 200, 20)
	e.waitCaughtUp(m, topic, all)
	if got := e.compareTopic(topic); got != 1+len(parts)*400 {
		t.Fatalf("compared %d records", got)
	}
	m.Close() // the sessions' reservations for their long polls end too
	if used, _, _ := m.budget.usage(); used != 0 {
		t.Fatalf("%d bytes still held after Close", used)
	}
	_, peak, over := m.budget.usage()
	if over != 0 || peak > limit+4*limit+4096 {
		t.Fatalf("peak %d bytes, over-released %d", peak, over)
	}
	if peak <= limit {
		t.Fatalf("peak %d: the large batch was not held", peak)
	}
}
