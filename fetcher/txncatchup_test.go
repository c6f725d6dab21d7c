package fetcher

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// slowTxnDestination gives the destination cluster the latencies of a
// replicated Kafka (kfake answers at once): the requests that write with
// acks=all (Produce, AddPartitionsToTxn, EndTxn) take write, the others
// read, and a transaction is complete (DescribeTransactions stops showing
// PrepareCommit or PrepareAbort) complete after its EndTxn was answered,
// as a coordinator writes the markers and then CompleteCommit. While on
// is set it counts the requests by key.
//
// The latencies are added by the client connections that dial (a
// kgo.Dialer for the Manager's local client, whose settings its
// transaction clients share): each request is written that long after
// the one before it on its connection, as a broker handles one request of
// a connection at a time. (kfake's SleepControl would do it in the
// cluster, but its queue of sleeping requests races when many
// connections sleep at once.)
type slowTxnDestination struct {
	c                     *kfake.Cluster
	write, read, complete time.Duration
	on                    atomic.Bool

	mu     sync.Mutex
	counts map[int16]int
	ended  map[string]endedTxn // by transactional ID
}

type endedTxn struct {
	at     time.Time
	pid    int64
	epoch  int16
	commit bool
}

func newSlowTxnDestination(c *kfake.Cluster, write, read, complete time.Duration) *slowTxnDestination {
	d := &slowTxnDestination{c: c, write: write, read: read, complete: complete,
		counts: make(map[int16]int), ended: make(map[string]endedTxn)}
	c.Control(d.control)
	return d
}

// dial is a kgo.Dialer whose connections delay the requests while on is
// set (see slowTxnDestination).
func (d *slowTxnDestination) dial(ctx context.Context, network, host string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: conn, d: d}, nil
}

// slowConn delays each request it writes by its key's latency. kgo writes
// a request (its length, then the header with the key) in one Write.
type slowConn struct {
	net.Conn
	d *slowTxnDestination
}

func (c *slowConn) Write(b []byte) (int, error) {
	if c.d.on.Load() && len(b) >= 6 {
		switch int16(binary.BigEndian.Uint16(b[4:])) {
		case kmsg.Produce.Int16(), kmsg.AddPartitionsToTxn.Int16(), kmsg.EndTxn.Int16():
			time.Sleep(c.d.write)
		default:
			time.Sleep(c.d.read)
		}
	}
	return c.Conn.Write(b)
}

func (d *slowTxnDestination) control(kreq kmsg.Request) (kmsg.Response, error, bool) {
	d.c.KeepControl()
	if !d.on.Load() {
		return nil, nil, false
	}
	key := kreq.Key()
	d.mu.Lock()
	d.counts[key]++
	d.mu.Unlock()
	switch req := kreq.(type) {
	case *kmsg.EndTxnRequest:
		// Answered by kfake right after this returns: the transaction
		// completes d.complete later.
		d.mu.Lock()
		d.ended[req.TransactionalID] = endedTxn{time.Now().Add(d.complete), req.ProducerID, req.ProducerEpoch, req.Commit}
		d.mu.Unlock()
	case *kmsg.DescribeTransactionsRequest:
		if len(req.TransactionalIDs) != 1 {
			break
		}
		id := req.TransactionalIDs[0]
		d.mu.Lock()
		e, ok := d.ended[id]
		d.mu.Unlock()
		if !ok || !time.Now().Before(e.at) {
			break
		}
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch = id, e.pid, e.epoch
		st.State = "PrepareAbort"
		if e.commit {
			st.State = "PrepareCommit"
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
		return resp, nil, true
	}
	return nil, nil, false
}

// requests returns the requests counted, by key name, and their total.
func (d *slowTxnDestination) requests() (map[string]int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int)
	total := 0
	for k, n := range d.counts {
		name := kmsg.NameForKey(k)
		if name == "" {
			name = fmt.Sprint(k)
		}
		out[name] += n
		total += n
	}
	return out, total
}

func formatCounts(counts map[string]int, per float64) string {
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%.2f", k, float64(counts[k])/per)
	}
	return b.String()
}

// TestCatchUpTransactions mirrors a backlog of many small source
// transactions, commits and aborts of two producers, each writing two
// small batches per partition in a row, to a destination that answers
// with a replicated Kafka's latencies. The copy must be exact, and each
// replayed transaction must take few destination round trips: its data in
// one append, one AddPartitionsToTxn, one EndTxn, the log end offset check
// after the marker, and (logged, not checked: it depends on timing) about
// one look at its completion. It logs the offsets per second per partition
// and the time per transaction.
func TestCatchUpTransactions(t *testing.T) {
	const topic, iterations = "txcatch", 50
	e := newTestEnv(t, 1, map[string]int32{topic: 3})
	ctx := context.Background()
	parts := []int32{0, 1, 2}
	plain := e.producer(kgo.NoCompression())
	a := e.producer(kgo.NoCompression(), kgo.TransactionalID("catch-a"))
	b := e.producer(kgo.NoCompression(), kgo.TransactionalID("catch-b"))
	next := 0
	batch := func(cl *kgo.Client) {
		t.Helper()
		var recs []*kgo.Record
		for _, p := range parts {
			recs = append(recs, record(topic, p, next), record(topic, p, next+1))
		}
		next += 2
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range iterations {
		for _, cl := range []*kgo.Client{a, b} {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
		}
		batch(a)
		batch(a)
		batch(b)
		batch(b)
		if i%5 == 2 {
			batch(a) // a's third batch after b's
		}
		if err := a.EndTransaction(ctx, kgo.TransactionEndTry(i%4 != 3)); err != nil {
			t.Fatal(err)
		}
		if err := b.EndTransaction(ctx, kgo.TransactionEndTry(i%4 != 1)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			e.produce(plain, topic, parts, next, 2, 2)
			next += 2
		}
	}
	e.produce(plain, topic, parts, next, 1, 1) // a read stops at a record, not a marker
	txns := 2 * iterations * len(parts)        // destination transactions, one per source transaction and partition

	slow := newSlowTxnDestination(e.dst, 2*time.Millisecond, 500*time.Microsecond, 5*time.Millisecond)
	e.local = e.client(e.dst, kgo.Dialer(slow.dial))
	m := e.newManager()
	slow.on.Store(true)
	start := time.Now()
	startAll(t, m, topic, parts)
	e.waitCaughtUp(m, topic, parts)
	took := time.Since(start)
	slow.on.Store(false)

	counts, total := slow.requests()
	ends := e.offsets(e.srcAdm, false, topic)
	records := e.compareTopic(topic)
	for _, p := range parts {
		e.compareRawBatches(topic, p, 0)
	}
	if got := metricValue(t, m.met.markers.WithLabelValues(testMirror, topic, "commit")) +
		metricValue(t, m.met.markers.WithLabelValues(testMirror, topic, "abort")); got != float64(txns) {
		t.Fatalf("%v markers replayed, want %d", got, txns)
	}
	perTxn := float64(total) / float64(txns)
	t.Logf("%d offsets per partition (%d committed records read), %d transactions per partition, caught up in %s: "+
		"%.0f offsets/s per partition, %.1f ms per transaction; %.2f destination requests per transaction:%s",
		ends[0], records, txns/len(parts), took.Round(time.Millisecond),
		float64(ends[0])/took.Seconds(), took.Seconds()*1000/float64(txns/len(parts)), perTxn, formatCounts(counts, float64(txns)))
	// The looks at a transaction's completion depend on timing; the
	// other requests do not.
	if fixed := float64(total-counts["DescribeTransactions"]) / float64(txns); fixed > 4.5 {
		t.Fatalf("%.2f destination requests besides DescribeTransactions per replayed transaction, want at most 4.5 "+
			"(one Produce, AddPartitionsToTxn, EndTxn and ListOffsets)", fixed)
	}
}

// TestPipelinedTxnBatchRefused: a transactional producer's large batches
// (too large to be coalesced) are pipelined once the broker acknowledged
// one. The destination refuses one of them before appending it
// (NOT_ENOUGH_REPLICAS); the batches sent behind it no longer follow the
// producer's last sequence and are refused too (OUT_OF_ORDER_SEQUENCE_NUMBER).
// The partition resumes from the destination log end offset inside the open
// transaction, with the sequence the broker expects: no batch is lost or
// appended twice, and the transaction commits as on the source.
func TestPipelinedTxnBatchRefused(t *testing.T) {
	const topic, batches = "txpipe", 8
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	ctx := context.Background()
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("pipe-src"))
	big := func(i int) *kgo.Record {
		r := record(topic, 0, i)
		r.Value = append(r.Value, make([]byte, 2*coalesceSmallBytes)...)
		return r
	}
	if err := src.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range batches {
		if err := src.ProduceSync(ctx, big(i)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil { // marker at 8
		t.Fatal(err)
	}
	e.produce(e.producer(kgo.NoCompression()), topic, []int32{0}, batches+1, 2, 1)

	// The third batch of the transaction (sequence 2: one record per
	// batch) is refused the first time; a batch with a higher sequence
	// arriving before it is sent again was pipelined behind it.
	var (
		mu                         sync.Mutex
		refused, resent, pipelined bool
	)
	e.dst.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
			return nil, nil, false
		}
		raw := req.Topics[0].Partitions[0].Records
		seq := int32(binary.BigEndian.Uint32(raw[offBaseSequence:]))
		mu.Lock()
		defer mu.Unlock()
		switch {
		case seq == 2 && !refused:
			refused = true
			resp := req.ResponseKind().(*kmsg.ProduceResponse)
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = req.Topics[0].Topic
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset = 0, kerr.NotEnoughReplicas.Code, -1
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			return resp, nil, true
		case seq == 2:
			resent = true
		case seq > 2 && refused && !resent:
			pipelined = true
		}
		return nil, nil, false
	})

	m := e.newManager()
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0})
	mu.Lock()
	r, s, pl := refused, resent, pipelined
	mu.Unlock()
	if !r || !s || !pl {
		t.Fatalf("refused %v, sent again %v, a later batch pipelined behind the refused one %v: want all", r, s, pl)
	}
	if n := e.compareRawBatches(topic, 0, 0); n != batches+3 {
		t.Fatalf("%d batches compared, want %d", n, batches+3)
	}
	e.compareTopic(topic)
	if got := metricValue(t, m.met.markers.WithLabelValues(testMirror, topic, "commit")); got != 1 {
		t.Fatalf("commit markers replayed = %v, want 1", got)
	}
}

// TestAnsweredAddsForgotten: the adds a run sent ahead are kept until
// answered only, not for the rest of the run.
func TestAnsweredAddsForgotten(t *testing.T) {
	answered := func() *txnAdd {
		a := &txnAdd{done: make(chan struct{})}
		close(a.done)
		return a
	}
	pending := &txnAdd{done: make(chan struct{})}
	p := &partition{adds: []*txnAdd{answered(), pending, answered()}}
	p.pruneAdds()
	if len(p.adds) != 1 || p.adds[0] != pending {
		t.Fatalf("after pruning, %d adds kept, want only the one not answered", len(p.adds))
	}
}
