package fetcher

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestResumeFindsAForeignRecord: a record that is not the source's sits
// at the destination's last offset (another writer's, here a plain
// producer's on the destination). The offsets after it still line up, so
// only comparing the last record with the source's at that offset finds
// it: the partition fails for good, naming the offset, instead of
// mirroring on after it.
func TestResumeFindsAForeignRecord(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"foreign": 1})
	ctx := context.Background()
	plain := e.producer(kgo.NoCompression())
	e.produce(plain, "foreign", []int32{0}, 0, 5, 5)
	m := e.newManager()
	startAll(t, m, "foreign", []int32{0})
	e.waitCaughtUp(m, "foreign", []int32{0})
	m.Close()

	e.produce(plain, "foreign", []int32{0}, 5, 5, 1) // one batch each: the offsets after the foreign record line up
	if err := e.dstCl.ProduceSync(ctx, &kgo.Record{Topic: "foreign", Value: []byte("not the source's")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if end := e.offsets(e.dstAdm, false, "foreign")[0]; end != 6 {
		t.Fatalf("destination log end offset %d after the foreign record, want 6", end)
	}

	m = e.newManager()
	startAll(t, m, "foreign", []int32{0})
	testwait.For(t, waitTimeout, "the partition FAILED", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateFailed
	})
	st := m.Status()[0]
	if !st.Permanent || !strings.Contains(st.LastError, "record at offset 5") || !strings.Contains(st.LastError, "not the source's record") {
		t.Fatalf("status %+v: want a permanent failure naming the record at offset 5", st)
	}
	if end := e.offsets(e.dstAdm, false, "foreign")[0]; end != 6 {
		t.Fatalf("destination log end offset %d, want 6: nothing appended after the foreign record", end)
	}
}

// TestResumeMatchingLog: a partition restarted on a log that matches the
// source, after plain records, a committed and an aborted transaction,
// resumes and catches up (the check at each start finds nothing).
func TestResumeMatchingLog(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"resume": 1})
	ctx := context.Background()
	plain := e.producer(kgo.NoCompression())
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("resume-src"))
	txn := func(from int, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := src.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := src.ProduceSync(ctx, record("resume", 0, from), record("resume", 0, from+1)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := src.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	e.produce(plain, "resume", []int32{0}, 0, 3, 3) // 0..2
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		txn(3+3*i, end) // 3, 4, marker 5; 6, 7, marker 8
		m := e.newManager()
		startAll(t, m, "resume", []int32{0})
		e.waitCaughtUp(m, "resume", []int32{0})
		if st := m.Status(); len(st) != 1 || st[0].State != StateMirroring {
			t.Fatalf("status after restart %d: %+v", i, st)
		}
		m.Close()
	}
	e.produce(plain, "resume", []int32{0}, 9, 2, 2)
	m := e.newManager()
	startAll(t, m, "resume", []int32{0})
	e.waitCaughtUp(m, "resume", []int32{0})
	e.compareRawBatches("resume", 0, 0)
	e.compareTopic("resume")
}

// TestResumeWaitsForTheMarkersTransaction: a run that ends while it waits
// for its marker's transaction to complete (here: the Manager closes)
// leaves the marker last on the destination with the transaction not
// complete yet. The next driver waits for it before appending anything, so
// the coordinator's repeat of the marker lands right behind the first and
// is found there, not behind later records.
func TestResumeWaitsForTheMarkersTransaction(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"resumed-marker": 1})
	ctx := context.Background()
	plain := e.producer(kgo.NoCompression())
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("resumed-marker-src"))
	prefix := transactionalIDPrefix(testMirror, "resumed-marker")

	// After the look-up, DescribeTransactions answers CONCURRENT_TRANSACTIONS
	// (not complete yet) until the test has written the marker again.
	var (
		mu       sync.Mutex
		seen     int
		released bool
	)
	e.dst.ControlKey(int16(kmsg.DescribeTransactions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.DescribeTransactionsRequest)
		if len(req.TransactionalIDs) != 1 || !strings.HasPrefix(req.TransactionalIDs[0], prefix) {
			return nil, nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		if seen++; seen == 1 || released {
			return nil, nil, false
		}
		e.dst.KeepControl()
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = req.TransactionalIDs[0], kerr.ConcurrentTransactions.Code
		resp.TransactionStates = append(resp.TransactionStates, st)
		return resp, nil, true
	})
	asked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}

	e.txn(src, "resumed-marker", 0, 0, 2, true)             // marker at 2
	e.produce(plain, "resumed-marker", []int32{0}, 3, 4, 1) // 3..6, one batch each

	m := e.newManager()
	startAll(t, m, "resumed-marker", []int32{0})
	testwait.For(t, waitTimeout, "the first driver waits for the transaction", func() bool { return asked() >= 2 })
	m.Close()
	if end := e.offsets(e.dstAdm, false, "resumed-marker")[0]; end != 3 {
		t.Fatalf("destination log end offset %d after the first driver, want 3 (the marker at 2 last)", end)
	}

	m = e.newManager()
	startAll(t, m, "resumed-marker", []int32{0})
	before := asked()
	testwait.For(t, waitTimeout, "the next driver asks whether the transaction is complete", func() bool { return asked() >= before+3 })
	if end := e.offsets(e.dstAdm, false, "resumed-marker")[0]; end != 3 {
		t.Fatalf("destination log end offset %d while the transaction completes, want 3: nothing appended after the marker", end)
	}

	// The coordinator's repeat of the marker, with the marker's producer.
	var pid int64 = -1
	var epoch int16
	for _, raw := range e.rawBatches(e.dst, e.dstCl, "resumed-marker", 0, 0) {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		if rb.FirstOffset == 2 && rb.Attributes&attrControl != 0 {
			pid, epoch = rb.ProducerID, rb.ProducerEpoch
		}
	}
	if pid < 0 {
		t.Fatal("no marker at destination offset 2")
	}
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed = pid, epoch, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "resumed-marker", []int32{0}
	mk.Topics = append(mk.Topics, mt)
	wm.Markers = append(wm.Markers, mk)
	if _, err := wm.RequestWith(ctx, e.dstCl); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	released = true
	mu.Unlock()

	testwait.For(t, waitTimeout, "the partition FAILED", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateFailed
	})
	if st := m.Status()[0]; !st.Permanent || !strings.Contains(st.LastError, "wrote the marker at offset 2 again") {
		t.Fatalf("status %+v: want a permanent failure naming the repeated marker", st)
	}
	if end := e.offsets(e.dstAdm, false, "resumed-marker")[0]; end != 4 {
		t.Fatalf("destination log end offset %d, want 4: the marker, its repeat, and nothing after them", end)
	}
}

// TestResumeAfterADifferentOutcome: the destination ended a transaction
// otherwise than the source (its ABORT where the source has COMMIT), and
// the driver that would have seen it is gone. The offsets still line up:
// a new driver fails for good with the destination's abort as the reason,
// and one the operator starts with --recover (Manager.Recover) resumes
// after the marker and mirrors on at the source's offsets.
func TestResumeAfterADifferentOutcome(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"outcome": 1})
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("outcome-src"))
	e.txn(src, "outcome", 0, 0, 2, true)                                       // COMMIT at 2
	e.produce(e.producer(kgo.NoCompression()), "outcome", []int32{0}, 3, 3, 1) // 3..5

	// The destination's copy: the same two records, then an ABORT at 2.
	dst := e.client(e.dst, kgo.TransactionalID("outcome-dst"))
	e.txn(dst, "outcome", 0, 0, 2, false)
	if end := e.offsets(e.dstAdm, false, "outcome")[0]; end != 3 {
		t.Fatalf("destination log end offset %d after its aborted transaction, want 3", end)
	}

	p := Partition{testMirror, "outcome", 0}
	m := e.newManager()
	startAll(t, m, "outcome", []int32{0})
	testwait.For(t, waitTimeout, "the partition FAILED", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateFailed
	})
	st := m.Status()[0]
	if !st.Permanent || !strings.Contains(st.LastError, ErrTransactionAborted.Error()) ||
		!strings.Contains(st.LastError, "marker at offset 2 is ABORT, the source's COMMIT") || !strings.Contains(st.LastError, "--recover") {
		t.Fatalf("status %+v: want a permanent failure naming the destination's ABORT at offset 2 and --recover", st)
	}
	if err := m.Start(p); err != nil { // an automatic retry would not pass it either
		t.Fatal(err)
	}
	testwait.For(t, waitTimeout, "the restarted partition FAILED", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateFailed
	})
	if end := e.offsets(e.dstAdm, false, "outcome")[0]; end != 3 {
		t.Fatalf("destination log end offset %d, want 3: nothing appended after the ABORT", end)
	}

	if err := m.Recover(p); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(m, "outcome", []int32{0})
	if n := e.compareRawBatches("outcome", 0, 3); n != 3 {
		t.Fatalf("compared %d batches from offset 3, want the 3 records after the marker", n)
	}
}
