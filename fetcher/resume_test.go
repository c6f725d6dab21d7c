package fetcher

import (
	"bytes"
	"context"
	"errors"
	"slices"
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
// is found there, not behind later records. With an offset map store the
// repeat is recorded as a shift and the partition mirrors on one offset
// higher (repeats.go), whether the driver waiting saw the repeat land or a
// later driver finds it at its resume point; without one it fails for good.
func TestResumeWaitsForTheMarkersTransaction(t *testing.T) {
	for _, tc := range []struct {
		name          string
		store         bool
		repeatStopped bool // the repeat lands while no driver runs
	}{
		{"no offset map store", false, false},
		{"repeat seen by the waiting driver", true, false},
		{"repeat found at the resume point", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testRepeatedMarker(t, tc.store, tc.repeatStopped) })
	}
}

func testRepeatedMarker(t *testing.T, withStore, repeatStopped bool) {
	const topic = "resumed-marker"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	plain := e.producer(kgo.NoCompression())
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("resumed-marker-src"))
	prefix := transactionalIDPrefix(testMirror, topic)
	store := &memOffsetMaps{}
	var opts []Opt
	if withStore {
		opts = append(opts, OffsetMapStore(store))
	}

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

	e.txn(src, topic, 0, 0, 2, true)             // marker at 2
	e.produce(plain, topic, []int32{0}, 3, 4, 1) // 3..6, one batch each

	m := e.newManager(opts...)
	startAll(t, m, topic, []int32{0})
	testwait.For(t, waitTimeout, "the first driver waits for the transaction", func() bool { return asked() >= 2 })
	m.Close()
	if end := e.offsets(e.dstAdm, false, topic)[0]; end != 3 {
		t.Fatalf("destination log end offset %d after the first driver, want 3 (the marker at 2 last)", end)
	}

	// The coordinator's repeat of the marker, with the marker's producer.
	repeat := func() {
		t.Helper()
		e.writeMarkerAgain(topic, 2)
		mu.Lock()
		released = true
		mu.Unlock()
	}
	if repeatStopped {
		repeat()
	}

	m = e.newManager(opts...)
	startAll(t, m, topic, []int32{0})
	if !repeatStopped {
		before := asked()
		testwait.For(t, waitTimeout, "the next driver asks whether the transaction is complete", func() bool { return asked() >= before+3 })
		if end := e.offsets(e.dstAdm, false, topic)[0]; end != 3 {
			t.Fatalf("destination log end offset %d while the transaction completes, want 3: nothing appended after the marker", end)
		}
		repeat()
	}

	p := Partition{testMirror, topic, 0}
	if !withStore {
		testwait.For(t, waitTimeout, "the partition FAILED", func() bool {
			st := m.Status()
			return len(st) == 1 && st[0].State == StateFailed
		})
		if st := m.Status()[0]; !st.Permanent || !strings.Contains(st.LastError, "the destination wrote a control batch the source does not have") {
			t.Fatalf("status %+v: want a permanent failure naming the repeated marker", st)
		}
		if end := e.offsets(e.dstAdm, false, topic)[0]; end != 4 {
			t.Fatalf("destination log end offset %d, want 4: the marker, its repeat, and nothing after them", end)
		}
		return
	}

	// The source's 3..6 land at 4..7, behind the repeat, with lag 0.
	testwait.For(t, waitTimeout, "the source's records behind the repeat", func() bool {
		return e.offsets(e.dstAdm, false, topic)[0] == 8
	})
	if got, want := store.get(p), []OffsetShift{{Source: 3, Destination: 4}}; !slices.Equal(got, want) {
		t.Fatalf("offset map %v, want %v", got, want)
	}
	testwait.For(t, waitTimeout, "lag 0", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateMirroring && st[0].Lag == 0 && st[0].DestinationLogEndOffset == 8
	})
	srcRecs, dstRecs := e.readAll(e.src, e.srcAdm, topic)[0], e.readAll(e.dst, e.dstAdm, topic)[0]
	if len(srcRecs) != 6 || len(dstRecs) != len(srcRecs) {
		t.Fatalf("%d source records, %d destination records, want 6 each", len(srcRecs), len(dstRecs))
	}
	for i, sr := range srcRecs {
		dr, wantAt := dstRecs[i], sr.Offset
		if sr.Offset >= 3 {
			wantAt++ // behind the repeat
		}
		if dr.Offset != wantAt || !bytes.Equal(dr.Key, sr.Key) || !bytes.Equal(dr.Value, sr.Value) || !dr.Timestamp.Equal(sr.Timestamp) {
			t.Fatalf("source record at %d (%q): destination record at %d (%q), want it at %d", sr.Offset, sr.Value, dr.Offset, dr.Value, wantAt)
		}
	}
	if got := metricValue(t, m.met.repeatedMarkers.WithLabelValues(testMirror, topic)); got != 1 {
		t.Fatalf("sidemirror_repeated_markers_total %v, want 1", got)
	}

	// A restart resumes after the shift: the next record lands at 8.
	m.Close()
	e.produce(plain, topic, []int32{0}, 7, 1, 1) // source 7
	m = e.newManager(opts...)
	startAll(t, m, topic, []int32{0})
	testwait.For(t, waitTimeout, "source 7 at destination 8", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateMirroring && st[0].DestinationLogEndOffset == 9 && st[0].Lag == 0
	})
	if end := e.offsets(e.dstAdm, false, topic)[0]; end != 9 {
		t.Fatalf("destination log end offset %d after the restart, want 9", end)
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

// TestResumeWithoutTheOffsetMap: while the offset map cannot be read (the
// mirror's coordinator is away), an exact-mode partition starts where the
// destination is empty or its last record equals the source's at that
// offset, and waits where the resume point is a marker (a shift could hide
// behind it) until the map can be read.
func TestResumeWithoutTheOffsetMap(t *testing.T) {
	const topic = "no-map"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	plain := e.producer(kgo.NoCompression())
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("no-map-src"))
	store := &memOffsetMaps{}
	store.setLoadErr(errors.New("no coordinator"))

	e.produce(plain, topic, []int32{0}, 0, 5, 1) // 0..4
	m := e.newManager(OffsetMapStore(store))
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0}) // from an empty destination
	m.Close()

	e.produce(plain, topic, []int32{0}, 5, 3, 1) // 5..7
	m = e.newManager(OffsetMapStore(store))
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0}) // after record 4, equal to the source's
	e.txn(src, topic, 0, 8, 2, true)     // 8, 9, marker at 10
	e.waitCaughtUp(m, topic, []int32{0})
	m.Close()

	e.produce(plain, topic, []int32{0}, 11, 2, 1) // 11..12
	m = e.newManager(OffsetMapStore(store))
	startAll(t, m, topic, []int32{0})
	p := Partition{testMirror, topic, 0}
	testwait.For(t, waitTimeout, "the driver waits for the map", func() bool {
		st := m.Status()
		return len(st) == 1 && strings.Contains(st[0].LastError, "cannot be read")
	})
	if st := m.Status()[0]; st.State == StateFailed || st.DestinationLogEndOffset != 11 {
		t.Fatalf("status %+v: want the partition waiting at 11, not FAILED", st)
	}
	store.setLoadErr(nil)
	e.waitCaughtUp(m, topic, []int32{0})
	if got := store.get(p); len(got) != 0 {
		t.Fatalf("offset map %v, want none", got)
	}
	e.compareTopic(topic)
}
