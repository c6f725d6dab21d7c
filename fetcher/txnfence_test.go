package fetcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// describeDstTxn returns the destination state of the one transactional ID
// the mirror has.
func describeDstTxn(t *testing.T, e *testEnv) kadm.DescribedTransaction {
	t.Helper()
	ctx := context.Background()
	adm := kadm.NewClient(e.dstCl)
	ids, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || len(ids.TransactionalIDs()) != 1 {
		t.Fatalf("destination transactional IDs %v: %v", ids.TransactionalIDs(), err)
	}
	id := ids.TransactionalIDs()[0]
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ds.On(id, nil)
	if err == nil {
		err = d.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStaleOwnerCannotEndTheNextTransaction: an owner of a partition that
// froze in the middle of a source transaction (here: a Manager closed while
// it is open) is replaced by one that continues the destination
// transaction with the same producer ID and epoch. Once that transaction
// is complete the successor bumps the epoch, so what the old owner still
// sends with the old epoch (EndTxn, AddPartitionsToTxn) is refused instead
// of ending, or opening, the successor's next transaction at an offset
// where the source has records.
func TestStaleOwnerCannotEndTheNextTransaction(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"stale": 1})
	ctx := context.Background()
	plain := e.producer(kgo.NoCompression())
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("stale-src"))
	p := Partition{testMirror, "stale", 0}

	e.produce(plain, "stale", []int32{0}, 0, 5, 5)
	if err := src.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := src.ProduceSync(ctx, record("stale", 0, 5), record("stale", 0, 6)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	old := e.newManager()
	startAll(t, old, "stale", []int32{0})
	e.waitCaughtUp(old, "stale", []int32{0})
	held := describeDstTxn(t, e) // what the old owner holds
	if held.State != "Ongoing" {
		t.Fatalf("destination transaction %+v, want Ongoing", held)
	}
	sctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if err := old.Stop(sctx, p); err != nil {
		t.Fatal(err)
	}
	old.Close()

	succ := e.newManager()
	startAll(t, succ, "stale", []int32{0})
	if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil { // marker at 7
		t.Fatal(err)
	}
	if err := src.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := src.ProduceSync(ctx, record("stale", 0, 8), record("stale", 0, 9)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(succ, "stale", []int32{0})

	// The old owner wakes up with its EndTxn and AddPartitionsToTxn.
	tcl, err := newTxnClient(e.dstCl)
	if err != nil {
		t.Fatal(err)
	}
	defer tcl.Close()
	err = endTxn(ctx, tcl, held.TxnID, held.ProducerID, held.ProducerEpoch, true)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the old owner's EndTxn: %v, want PRODUCER_FENCED", err)
	}
	stale := &txnProducer{id: held.TxnID, pid: held.ProducerID, epoch: held.ProducerEpoch}
	if err := succ.addPartitionToTxn(ctx, tcl, stale, p); !errors.Is(err, ErrTransactionAborted) {
		t.Fatalf("the old owner's AddPartitionsToTxn: %v, want it fenced", err)
	}
	if end := e.offsets(e.dstAdm, false, "stale")[0]; end != 10 {
		t.Fatalf("destination log end offset %d after the old owner's requests, want 10", end)
	}
	now := describeDstTxn(t, e)
	if now.State != "Ongoing" || now.ProducerID != held.ProducerID || now.ProducerEpoch <= held.ProducerEpoch {
		t.Fatalf("the successor's transaction %+v: want Ongoing with producer %d at an epoch above %d",
			now, held.ProducerID, held.ProducerEpoch)
	}

	if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil { // marker at 10
		t.Fatal(err)
	}
	e.produce(plain, "stale", []int32{0}, 11, 4, 4)
	e.waitCaughtUp(succ, "stale", []int32{0})
	if st := succ.Status(); len(st) != 1 || st[0].State != StateMirroring {
		t.Fatalf("status: %+v", st)
	}
	e.compareRawBatches("stale", 0, 0)
	e.compareTopic("stale")
}

// TestRepeatedMarkerFound: a transaction coordinator that moves between
// writing a transaction's markers and completing it sends the markers
// again, and the partition appends the repeat as a second control batch.
// The partition appends nothing after a marker until the destination shows
// the transaction complete, so the repeat lands right behind the marker.
// Without an offset map store to record it in (a Manager of its own, as
// here), the partition fails there, naming it, with no later record
// shifted; TestResumeWaitsForTheMarkersTransaction has it recorded.
func TestRepeatedMarkerFound(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"twice": 1})
	plain := e.producer(kgo.NoCompression())
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("twice-src"))
	prefix := transactionalIDPrefix(testMirror, "twice")

	// The first DescribeTransactions of the mirror's transactional ID is
	// the look-up before the transaction; the next ones come after its
	// marker, and are answered "not complete yet" (a coordinator still
	// writing the markers answers PrepareCommit; both are waited out)
	// until the test has written the marker again.
	var (
		mu       sync.Mutex
		seen     int
		released bool
	)
	waiting := make(chan struct{})
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
		if seen == 2 {
			close(waiting)
		}
		e.dst.KeepControl()
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = req.TransactionalIDs[0], kerr.ConcurrentTransactions.Code
		resp.TransactionStates = append(resp.TransactionStates, st)
		return resp, nil, true
	})

	e.txn(src, "twice", 0, 0, 2, true)             // marker at 2
	e.produce(plain, "twice", []int32{0}, 3, 4, 4) // 3..6

	m := e.newManager()
	startAll(t, m, "twice", []int32{0})
	select {
	case <-waiting:
	case <-time.After(waitTimeout):
		t.Fatal("the partition did not wait for the transaction to complete after its marker")
	}
	if end := e.offsets(e.dstAdm, false, "twice")[0]; end != 3 {
		t.Fatalf("destination log end offset %d while the transaction completes, want 3 (the marker at 2, nothing after it)", end)
	}

	e.writeMarkerAgain("twice", 2) // the coordinator's repeat
	mu.Lock()
	released = true
	mu.Unlock()

	testwait.For(t, waitTimeout, "the partition FAILED", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateFailed
	})
	st := m.Status()[0]
	if !strings.Contains(st.LastError, "control batch the source does not have") || !strings.Contains(st.LastError, "offset 2") {
		t.Fatalf("LastError = %q", st.LastError)
	}
	if end := e.offsets(e.dstAdm, false, "twice")[0]; end != 4 {
		t.Fatalf("destination log end offset %d, want 4: the marker, its repeat, and nothing after them", end)
	}

	// A driver started after it (another sidecar's, say) finds the repeat
	// at the log end offset and fails for good too, naming it.
	m.Close()
	m = e.newManager()
	startAll(t, m, "twice", []int32{0})
	testwait.For(t, waitTimeout, "the restarted partition FAILED", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateFailed
	})
	if st := m.Status()[0]; !st.Permanent || !strings.Contains(st.LastError, "wrote the marker again") ||
		!strings.Contains(st.LastError, "offsets 2 and 3") {
		t.Fatalf("restarted: %+v, want a permanent failure naming the repeated marker at 2 and 3", st)
	}
	if end := e.offsets(e.dstAdm, false, "twice")[0]; end != 4 {
		t.Fatalf("destination log end offset %d after the restart, want 4", end)
	}
}

// TestLookupRenewsTheEpochTwice: a partition that finds its destination
// transactional ID with nothing open renews the epoch with two
// InitProducerIDs that name the producer ID and epoch they expect (Kafka
// answers one that expects the epoch just before the current one as a
// retry, with the current epoch; after two bumps an earlier owner's late
// InitProducerID, expecting the old epoch, is refused).
func TestLookupRenewsTheEpochTwice(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"renew": 1})
	ctx := context.Background()
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("renew-src"))
	txn := func(from int) {
		t.Helper()
		if err := src.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := src.ProduceSync(ctx, record("renew", 0, from), record("renew", 0, from+1)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	txn(0)
	m := e.newManager()
	startAll(t, m, "renew", []int32{0})
	e.waitCaughtUp(m, "renew", []int32{0})
	m.Close()
	before := describeDstTxn(t, e)

	type expected struct {
		pid   int64
		epoch int16
	}
	var (
		mu   sync.Mutex
		sent []expected
	)
	e.dst.ControlKey(int16(kmsg.InitProducerID), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID != nil && *req.TransactionalID == before.TxnID {
			mu.Lock()
			sent = append(sent, expected{req.ProducerID, req.ProducerEpoch})
			mu.Unlock()
		}
		return nil, nil, false
	})
	m = e.newManager()
	startAll(t, m, "renew", []int32{0})
	txn(3)
	e.produce(e.producer(kgo.NoCompression()), "renew", []int32{0}, 6, 2, 2) // a read stops at a record, not a marker
	e.waitCaughtUp(m, "renew", []int32{0})
	after := describeDstTxn(t, e)
	mu.Lock()
	defer mu.Unlock()
	want := []expected{{before.ProducerID, before.ProducerEpoch}, {before.ProducerID, before.ProducerEpoch + 1}}
	if fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Fatalf("InitProducerID requests for %s expected %v, want %v", before.TxnID, sent, want)
	}
	if after.ProducerID != before.ProducerID || after.ProducerEpoch != before.ProducerEpoch+2 {
		t.Fatalf("producer %d epoch %d after the look-up, want %d epoch %d",
			after.ProducerID, after.ProducerEpoch, before.ProducerID, before.ProducerEpoch+2)
	}
	e.compareRawBatches("renew", 0, 0)
	e.compareTopic("renew")
}

// TestEarlierOwnersAddAtTheLookUp: an earlier owner's AddPartitionsToTxn
// for the transaction after its last marker is still being written to the
// coordinator's log when the successor looks the transactional ID up, so
// DescribeTransactions shows the previous transaction complete while the
// add opens the next one (here: the add has landed, and the successor's
// look-up is answered CompleteCommit). The successor continues the ID
// with its epoch instead of bumping it, which would abort the
// transaction the add opened and write an ABORT marker where the source
// has the transaction's first record; it bumps after its own marker.
func TestEarlierOwnersAddAtTheLookUp(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"late-add": 1})
	ctx := context.Background()
	plain := e.producer(kgo.NoCompression())
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("late-add-src"))
	p := Partition{testMirror, "late-add", 0}
	txn := func(from int) {
		t.Helper()
		if err := src.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := src.ProduceSync(ctx, record("late-add", 0, from), record("late-add", 0, from+1)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	txn(0) // marker at 2
	old := e.newManager()
	startAll(t, old, "late-add", []int32{0})
	e.waitCaughtUp(old, "late-add", []int32{0})
	old.Close()
	held := describeDstTxn(t, e)

	// The earlier owner's add for its next transaction.
	tcl, err := newTxnClient(e.dstCl)
	if err != nil {
		t.Fatal(err)
	}
	defer tcl.Close()
	stale := &txnProducer{id: held.TxnID, pid: held.ProducerID, epoch: held.ProducerEpoch}
	if err := old.addPartitionToTxn(ctx, tcl, stale, p); err != nil {
		t.Fatal(err)
	}
	if d := describeDstTxn(t, e); d.State != "Ongoing" {
		t.Fatalf("destination transaction after the earlier owner's add: %+v, want Ongoing", d)
	}
	var (
		mu      sync.Mutex
		lookups int
	)
	e.dst.ControlKey(int16(kmsg.DescribeTransactions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.DescribeTransactionsRequest)
		if len(req.TransactionalIDs) != 1 || req.TransactionalIDs[0] != held.TxnID {
			return nil, nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		if lookups++; lookups > 1 {
			return nil, nil, false
		}
		e.dst.KeepControl()
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.State = held.TxnID, "CompleteCommit"
		st.ProducerID, st.ProducerEpoch, st.TimeoutMillis = held.ProducerID, held.ProducerEpoch, 60000
		resp.TransactionStates = append(resp.TransactionStates, st)
		return resp, nil, true
	})

	txn(3)                                            // 3, 4, marker at 5
	e.produce(plain, "late-add", []int32{0}, 6, 2, 2) // 6, 7
	succ := e.newManager()
	startAll(t, succ, "late-add", []int32{0})
	e.waitCaughtUp(succ, "late-add", []int32{0})
	if st := succ.Status(); len(st) != 1 || st[0].State != StateMirroring {
		t.Fatalf("status: %+v", st)
	}
	mu.Lock()
	if lookups < 2 {
		t.Errorf("DescribeTransactions of %s seen %d times, want the look-up and the check before the bump", held.TxnID, lookups)
	}
	mu.Unlock()
	if d := describeDstTxn(t, e); d.ProducerID != held.ProducerID || d.ProducerEpoch != held.ProducerEpoch+2 {
		t.Fatalf("destination producer %d epoch %d after the successor's marker, want %d epoch %d (bumped twice)",
			d.ProducerID, d.ProducerEpoch, held.ProducerID, held.ProducerEpoch+2)
	}
	e.compareRawBatches("late-add", 0, 0)
	e.compareTopic("late-add")
}
