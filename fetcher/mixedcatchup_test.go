package fetcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Topics of the mixed backlog: one partition each.
const (
	mixPlain   = "mixplain"
	mixCompact = "mixcompact"
	mixTxn     = "mixtxn"
)

// mixedBacklog writes the source backlog of TestCatchUpMixedNeighbours: on
// mixPlain plain one-record batches of an idempotent producer; with
// neighbours, on mixCompact one-record batches every other one of which a
// later record overwrites (a compaction hole before each live batch), and
// on mixTxn small transactions of one batch each.
func mixedBacklog(t *testing.T, e *testEnv, plain int, neighbours bool) {
	t.Helper()
	ctx := context.Background()
	defer e.produce(e.producer(kgo.NoCompression()), mixPlain, []int32{0}, 0, plain, 1) // after the compaction
	if !neighbours {
		return
	}
	e.compactSource(mixCompact)
	cl := e.producer(kgo.NoCompression())
	for i := range 3000 {
		key := fmt.Sprintf("k-%d", i)
		if i%2 == 1 {
			key = "overwritten"
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: mixCompact, Key: []byte(key), Value: fmt.Appendf(nil, "value %d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e.src.Compact()
	txn := e.producer(kgo.NoCompression(), kgo.TransactionalID("mix-txn"))
	for i := range 300 {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, record(mixTxn, 0, 2*i), record(mixTxn, 0, 2*i+1)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
}

// catchUpRate starts the partitions of a mixed backlog on one Manager, with
// the destination latencies of a replicated Kafka, and returns how long
// each topic's partition took to catch up and its offsets per second.
func catchUpRate(t *testing.T, neighbours bool) map[string]float64 {
	const plain = 10000
	e := newTestEnv(t, 1, map[string]int32{mixPlain: 1, mixCompact: 1, mixTxn: 1})
	mixedBacklog(t, e, plain, neighbours)
	topics := []string{mixPlain}
	if neighbours {
		topics = append(topics, mixCompact, mixTxn)
	}
	ends := make(map[string]int64)
	for _, topic := range topics {
		ends[topic] = e.offsets(e.srcAdm, false, topic)[0]
	}
	slow := newSlowTxnDestination(e.dst, 2*time.Millisecond, 500*time.Microsecond, 5*time.Millisecond)
	e.local = e.client(e.dst, kgo.Dialer(slow.dial))
	m := e.newManager()
	slow.on.Store(true)
	start := time.Now()
	for _, topic := range topics {
		startAll(t, m, topic, []int32{0})
	}
	took := make(map[string]time.Duration)
	deadline := start.Add(waitTimeout)
	for len(took) < len(topics) {
		for _, st := range m.Status() {
			if _, ok := took[st.Topic]; !ok && st.DestinationLogEndOffset == ends[st.Topic] {
				took[st.Topic] = time.Since(start)
			}
			if st.State == StateFailed {
				t.Fatalf("%s failed: %s", st.Partition, st.LastError)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not caught up after %s: %+v", waitTimeout, m.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	slow.on.Store(false)
	counts, total := slow.requests()
	rates := make(map[string]float64)
	for _, topic := range topics {
		rates[topic] = float64(ends[topic]) / took[topic].Seconds()
		t.Logf("%s: %d offsets caught up in %s: %.0f offsets/s", topic, ends[topic], took[topic].Round(time.Millisecond), rates[topic])
	}
	t.Logf("%d destination requests:%s", total, formatCounts(counts, 1))
	e.compareTopic(mixPlain)
	if neighbours {
		e.compareCompacted(mixCompact)
	}
	return rates
}

// TestCatchUpMixedNeighbours: a backlog of one-record idempotent batches
// on a partition whose neighbours on the sidecar are a compacted partition
// full of holes and a partition of small transactions. The plain
// partition's coalesced catch-up must not be paced by its neighbours'
// appends: it must reach at least half the rate it has alone.
func TestCatchUpMixedNeighbours(t *testing.T) {
	var alone, mixed map[string]float64
	t.Run("alone", func(t *testing.T) { alone = catchUpRate(t, false) })
	t.Run("mixed", func(t *testing.T) { mixed = catchUpRate(t, true) })
	if alone == nil || mixed == nil {
		t.FailNow()
	}
	t.Logf("plain partition: %.0f offsets/s alone, %.0f beside a compacted and a transactional partition", alone[mixPlain], mixed[mixPlain])
	if mixed[mixPlain] < alone[mixPlain]/2 {
		t.Fatalf("plain partition caught up at %.0f offsets/s beside its neighbours, %.0f alone: want at least half", mixed[mixPlain], alone[mixPlain])
	}
}
