package fetcher

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

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
