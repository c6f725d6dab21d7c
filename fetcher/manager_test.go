package fetcher

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

func startAll(t *testing.T, m *Manager, topic string, partitions []int32) {
	t.Helper()
	for _, p := range partitions {
		if err := m.Start(Partition{testMirror, topic, p}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewManagerValidation(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tests := []struct {
		name  string
		opts  []Opt
		field string // named in the error
	}{
		{"no client", []Opt{LocalBrokerID(1)}, "LocalClient"},
		{"no broker", []Opt{LocalClient(cl)}, "LocalBrokerID"},
		{"negative broker", []Opt{LocalClient(cl), LocalBrokerID(-1)}, "LocalBrokerID -1"},
		{"in flight 0", []Opt{LocalClient(cl), LocalBrokerID(1), MaxInFlightPerPartition(0)}, "MaxInFlightPerPartition 0"},
		{"in flight 6", []Opt{LocalClient(cl), LocalBrokerID(1), MaxInFlightPerPartition(6)}, "MaxInFlightPerPartition 6"},
		{"partition above fetch", []Opt{LocalClient(cl), LocalBrokerID(1), FetchMaxBytes(10), PartitionMaxBytes(20)}, "PartitionMaxBytes 20"},
		{"backoff", []Opt{LocalClient(cl), LocalBrokerID(1), Backoff(time.Second, time.Millisecond)}, "Backoff"},
		{"ok", []Opt{LocalClient(cl), LocalBrokerID(1), MaxInFlightPerPartition(5)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewManager(tt.opts...)
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				m.Close()
				return
			}
			if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err = %v, want ErrInvalidOption naming %q", err, tt.field)
			}
		})
	}
}

func TestStartUnknownMirror(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"t": 1})
	m := e.newManager()
	if err := m.Start(Partition{"nope", "t", 0}); !errors.Is(err, ErrUnknownMirror) {
		t.Fatalf("err = %v, want ErrUnknownMirror", err)
	}
}

// TestMirrorCodecs mirrors one topic per codec, with records produced before
// and while the Manager runs, and checks records and raw batches.
func TestMirrorCodecs(t *testing.T) {
	topics := make(map[string]int32)
	for _, c := range codecs {
		topics["codec-"+c.name] = 2
	}
	e := newTestEnv(t, 3, topics)
	parts := []int32{0, 1}
	for _, c := range codecs {
		e.produce(e.producer(c.codec), "codec-"+c.name, parts, 0, 120, 23)
	}
	m := e.newManager()
	for _, c := range codecs {
		startAll(t, m, "codec-"+c.name, parts)
	}
	for _, c := range codecs {
		e.waitCaughtUp(m, "codec-"+c.name, parts)
	}
	// More records arrive while mirroring.
	for _, c := range codecs {
		e.produce(e.producer(c.codec), "codec-"+c.name, parts, 120, 200, 41)
	}
	var records int
	for _, c := range codecs {
		topic := "codec-" + c.name
		t.Run(c.name, func(t *testing.T) {
			e.waitCaughtUp(m, topic, parts)
			records += e.compareTopic(topic)
			for _, p := range parts {
				if n := e.compareRawBatches(topic, p, 0); n < 10 {
					t.Fatalf("only %d batches: the test should produce many", n)
				}
			}
		})
	}
	if records != len(codecs)*2*320 {
		t.Fatalf("compared %d records, want %d", records, len(codecs)*2*320)
	}
	var mirrored int64
	for _, st := range m.Status() {
		mirrored += st.RecordsMirrored
		if st.FillerRecords != 0 || st.BytesMirrored == 0 {
			t.Fatalf("status %+v", st)
		}
		if states := e.events.statesOf(st.Partition); len(states) < 2 || states[0] != StateLogTruncation || states[len(states)-1] != StateMirroring {
			t.Fatalf("%s went through %v", st.Partition, states)
		}
	}
	if mirrored != int64(records) {
		t.Fatalf("RecordsMirrored sum %d, want %d", mirrored, records)
	}
	if got := metricValue(t, m.met.records.WithLabelValues(testMirror, "codec-zstd")); got != 640 {
		t.Fatalf("sidemirror_mirrored_records_total{topic=codec-zstd} = %v, want 640", got)
	}
	if got := metricValue(t, m.met.partitions.WithLabelValues("MIRRORING")); got != float64(len(codecs)*2) {
		t.Fatalf("sidemirror_partitions{state=MIRRORING} = %v", got)
	}
	if n := seriesCount(m.met.errors); n != 0 {
		t.Fatalf("%d error series: the appends should have kept their order without errors", n)
	}
	if n := lagSeries(m); n != len(codecs)*2 {
		t.Fatalf("%d lag series, want %d", n, len(codecs)*2)
	}
}

// TestLeadingGap starts mirroring after the source deleted its first
// records: fillers close the gap, DeleteRecords hides them, offsets match.
func TestLeadingGap(t *testing.T) {
	tests := []struct {
		name      string
		deleteAt  int64
		wantFills bool
	}{
		{"inside a batch", 47, true},      // batches of 20: 40..59 holds 47
		{"at a batch boundary", 60, true}, // fillers 0..59
		{"inside the first batch", 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, 1, map[string]int32{"gap": 1})
			cl := e.producer(kgo.Lz4Compression())
			e.produce(cl, "gap", []int32{0}, 0, 100, 20)
			ctx := context.Background()
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: "gap", Partition: 0, At: tt.deleteAt})
			if _, err := e.srcAdm.DeleteRecords(ctx, os); err != nil {
				t.Fatal(err)
			}
			m := e.newManager()
			p := Partition{testMirror, "gap", 0}
			startAll(t, m, "gap", []int32{0})
			e.waitCaughtUp(m, "gap", []int32{0})
			e.produce(cl, "gap", []int32{0}, 100, 30, 7)
			e.waitCaughtUp(m, "gap", []int32{0})

			if n := e.compareTopic("gap"); n != int(130-tt.deleteAt) {
				t.Fatalf("compared %d records, want %d", n, 130-tt.deleteAt)
			}
			e.compareRawBatches("gap", 0, tt.deleteAt)
			st := waitState(t, m, p, StateMirroring)
			// Fillers go up to the base of the source batch holding the
			// source log start (produced in batches of 20, barring a split).
			batchStart := batchBase(e.rawBatches(e.src, e.srcCl, "gap", 0, tt.deleteAt)[0])
			if st.FillerRecords != batchStart {
				t.Fatalf("FillerRecords = %d, want %d (up to the batch holding offset %d)", st.FillerRecords, batchStart, tt.deleteAt)
			}
			if (st.FillerRecords > 0) != tt.wantFills {
				t.Fatalf("FillerRecords = %d", st.FillerRecords)
			}
			if st.SourceLogStartOffset != tt.deleteAt {
				t.Fatalf("SourceLogStartOffset = %d", st.SourceLogStartOffset)
			}
			if got := metricValue(t, m.met.fillers.WithLabelValues(testMirror, "gap")); got != float64(batchStart) {
				t.Fatalf("sidemirror_filler_records_total = %v", got)
			}
		})
	}
}

// TestTransactionsReplayed mirrors committed and aborted transactions of
// two transactional producers between plain batches: every batch, markers
// included, lands at its source offset with its attributes and records
// untouched, and a restart in the middle of an open transaction continues
// it.
func TestTransactionsReplayed(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"tx": 1})
	ctx := context.Background()
	plain := e.producer(kgo.NoCompression())
	a := e.producer(kgo.NoCompression(), kgo.TransactionalID("tx-a"))
	b := e.producer(kgo.NoCompression(), kgo.TransactionalID("tx-b"))
	txn := func(cl *kgo.Client, from int, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, record("tx", 0, from), record("tx", 0, from+1)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	e.produce(plain, "tx", []int32{0}, 0, 30, 10)
	txn(a, 30, kgo.TryCommit)
	txn(b, 40, kgo.TryAbort)
	e.produce(plain, "tx", []int32{0}, 50, 10, 10)
	txn(a, 60, kgo.TryAbort)
	txn(b, 70, kgo.TryCommit)
	e.produce(plain, "tx", []int32{0}, 75, 3, 3) // readAll stops at the last record, which must not be a marker

	m := e.newManager()
	p := Partition{testMirror, "tx", 0}
	startAll(t, m, "tx", []int32{0})
	e.waitCaughtUp(m, "tx", []int32{0})
	if n := e.compareRawBatches("tx", 0, 0); n == 0 {
		t.Fatal("no batches compared")
	}
	e.compareTopic("tx")
	if got := metricValue(t, m.met.markers.WithLabelValues(testMirror, "tx", "commit")); got != 2 {
		t.Fatalf("commit markers replayed = %v, want 2", got)
	}
	if got := metricValue(t, m.met.markers.WithLabelValues(testMirror, "tx", "abort")); got != 2 {
		t.Fatalf("abort markers replayed = %v, want 2", got)
	}

	// A transaction open on the source is open on the destination; the
	// partition restarts (as after a crash) and then the source commits.
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := a.ProduceSync(ctx, record("tx", 0, 80), record("tx", 0, 81)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(m, "tx", []int32{0})
	sctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if err := m.Stop(sctx, p); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m = e.newManager()
	startAll(t, m, "tx", []int32{0})
	if err := a.ProduceSync(ctx, record("tx", 0, 82)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	e.produce(plain, "tx", []int32{0}, 90, 5, 5)
	e.waitCaughtUp(m, "tx", []int32{0})
	e.compareRawBatches("tx", 0, 0)
	e.compareTopic("tx")
}

// TestStopStartResumes stops a partition, produces more, starts it again:
// it resumes from the destination LEO without duplicates or gaps.
func TestStopStartResumes(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"ss": 2})
	cl := e.producer(kgo.SnappyCompression())
	parts := []int32{0, 1}
	e.produce(cl, "ss", parts, 0, 50, 10)
	m := e.newManager()
	startAll(t, m, "ss", parts)
	e.waitCaughtUp(m, "ss", parts)
	p := Partition{testMirror, "ss", 0}
	if err := m.Start(p); err != nil { // idempotent
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Stop(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, st := range m.Status() {
		if st.Partition == p {
			t.Fatalf("stopped partition still listed: %+v", st)
		}
	}
	if n := lagSeries(m); n != 1 {
		t.Fatalf("%d lag series after stopping one of two partitions", n)
	}
	testwait.For(t, waitTimeout, "STOPPING, STOPPED notified", func() bool {
		states := e.events.statesOf(p)
		return len(states) >= 2 && states[len(states)-2] == StateStopping && states[len(states)-1] == StateStopped
	})
	e.produce(cl, "ss", parts, 50, 40, 9)
	e.waitCaughtUp(m, "ss", []int32{1})
	if end := e.offsets(e.dstAdm, false, "ss")[0]; end != 50 {
		t.Fatalf("stopped partition advanced to %d", end)
	}
	if err := m.Start(p); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(m, "ss", parts)
	if n := e.compareTopic("ss"); n != 180 {
		t.Fatalf("compared %d records", n)
	}
	if n := seriesCount(m.met.errors); n != 0 {
		t.Fatalf("%d error series: a restarted partition must continue its producer sequence", n)
	}
	if err := m.Stop(ctx, Partition{testMirror, "ss", 9}); err != nil {
		t.Fatalf("stopping an unknown partition: %v", err)
	}
}

// TestSecondManagerContinues: a Manager started after the first one closed
// continues from the destination LEO without duplicates.
func TestSecondManagerContinues(t *testing.T) {
	e := newTestEnv(t, 2, map[string]int32{"two": 3})
	parts := []int32{0, 1, 2}
	cl := e.producer(kgo.ZstdCompression())
	e.produce(cl, "two", parts, 0, 60, 13)
	m1 := e.newManager()
	startAll(t, m1, "two", parts)
	e.waitCaughtUp(m1, "two", parts)
	m1.Close()
	m1.Close() // idempotent

	e.produce(cl, "two", parts, 60, 60, 11)
	m2 := e.newManager()
	startAll(t, m2, "two", parts)
	e.waitCaughtUp(m2, "two", parts)
	if n := e.compareTopic("two"); n != 360 {
		t.Fatalf("compared %d records", n)
	}
	for _, p := range parts {
		e.compareRawBatches("two", p, 0)
	}
	for _, st := range m2.Status() {
		if st.RecordsMirrored != 60 {
			t.Fatalf("second manager mirrored %d records of %s, want 60", st.RecordsMirrored, st.Partition)
		}
	}
}

// TestSourceLeaderMoves survives leader elections and a broker restart on
// the source while records keep arriving.
func TestSourceLeaderMoves(t *testing.T) {
	e := newTestEnv(t, 3, map[string]int32{"moves": 4})
	parts := []int32{0, 1, 2, 3}
	cl := e.producer(kgo.GzipCompression())
	e.produce(cl, "moves", parts, 0, 40, 10)
	m := e.newManager()
	startAll(t, m, "moves", parts)
	e.waitCaughtUp(m, "moves", parts)

	e.src.ShufflePartitionLeaders()
	e.produce(cl, "moves", parts, 40, 40, 10)
	e.waitCaughtUp(m, "moves", parts)

	if err := e.src.MoveTopicPartition("moves", 0, (e.src.LeaderFor("moves", 0)+1)%3); err != nil {
		t.Fatal(err)
	}
	e.produce(cl, "moves", parts, 80, 20, 10)
	e.waitCaughtUp(m, "moves", parts)

	// A broker "restart": it leaves the cluster and comes back.
	victim := e.src.LeaderFor("moves", 1)
	if err := e.src.RemoveNode(victim); err != nil {
		t.Fatal(err)
	}
	e.produce(cl, "moves", parts, 100, 20, 10)
	e.waitCaughtUp(m, "moves", parts)
	if _, _, err := e.src.AddNode(victim, 0); err != nil {
		t.Fatal(err)
	}
	e.produce(cl, "moves", parts, 120, 20, 10)
	e.waitCaughtUp(m, "moves", parts)
	if n := e.compareTopic("moves"); n != 4*140 {
		t.Fatalf("compared %d records", n)
	}
}

// TestSetMirrorReplacesClient reconnects the source client while mirroring.
func TestSetMirrorReplacesClient(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"re": 1})
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "re", []int32{0}, 0, 30, 10)
	m := e.newManager()
	startAll(t, m, "re", []int32{0})
	e.waitCaughtUp(m, "re", []int32{0})
	if err := m.SetMirror(testMirror, []kgo.Opt{kgo.SeedBrokers(e.src.ListenAddrs()...)}, MirrorSettings{}); err != nil {
		t.Fatal(err)
	}
	e.produce(cl, "re", []int32{0}, 30, 30, 10)
	e.waitCaughtUp(m, "re", []int32{0})
	e.compareTopic("re")

	m.RemoveMirror(testMirror)
	if st := m.Status(); len(st) != 0 {
		t.Fatalf("partitions left after RemoveMirror: %+v", st)
	}
	if err := m.Start(Partition{testMirror, "re", 0}); !errors.Is(err, ErrUnknownMirror) {
		t.Fatalf("Start after RemoveMirror: %v", err)
	}
}

// TestRetriableFetchErrors injects NOT_LEADER_OR_FOLLOWER answers and a
// dropped connection into the source's fetch handling.
func TestRetriableFetchErrors(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"fe": 2})
	parts := []int32{0, 1}
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "fe", parts, 0, 40, 10)

	var injected atomic.Int32
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		switch n := injected.Add(1); {
		case n <= 3:
			fr := req.(*kmsg.FetchRequest)
			resp := fr.ResponseKind().(*kmsg.FetchResponse)
			for _, rt := range fr.Topics {
				st := kmsg.NewFetchResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewFetchResponseTopicPartition()
					sp.Partition = rp.Partition
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		case n == 4:
			return nil, errors.New("injected: connection dropped"), true
		default:
			e.src.DropControl()
			return nil, nil, false
		}
	})
	m := e.newManager()
	startAll(t, m, "fe", parts)
	e.waitCaughtUp(m, "fe", parts)
	e.compareTopic("fe")
	if injected.Load() < 5 {
		t.Fatalf("only %d fetches controlled", injected.Load())
	}
	if got := metricValue(t, m.met.errors.WithLabelValues(opFetch, "NOT_LEADER_OR_FOLLOWER")); got < 1 {
		t.Fatalf("sidemirror_errors_total{op=fetch,code=NOT_LEADER_OR_FOLLOWER} = %v", got)
	}
	if got := metricValue(t, m.met.errors.WithLabelValues(opFetch, "network")); got < 1 {
		t.Fatalf("sidemirror_errors_total{op=fetch,code=network} = %v", got)
	}
}

// controlProduce makes the destination answer the next n produce requests
// with code for every partition.
func controlProduce(e *testEnv, n int32, code int16) *atomic.Int32 {
	var seen atomic.Int32
	e.dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if seen.Add(1) > n {
			e.dst.DropControl()
			return nil, nil, false
		}
		e.dst.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = code
				sp.BaseOffset = -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &seen
}

// TestRetriableAppendError: NOT_ENOUGH_REPLICAS on produce restarts from the
// LEO with the same producer ID, without duplicates.
func TestRetriableAppendError(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"ae": 1})
	cl := e.producer(kgo.Lz4Compression())
	e.produce(cl, "ae", []int32{0}, 0, 50, 5)
	controlProduce(e, 2, kerr.NotEnoughReplicas.Code)
	m := e.newManager(MaxInFlightPerPartition(3))
	startAll(t, m, "ae", []int32{0})
	e.waitCaughtUp(m, "ae", []int32{0})
	e.compareTopic("ae")
	if got := metricValue(t, m.met.errors.WithLabelValues(opAppend, "NOT_ENOUGH_REPLICAS")); got < 1 {
		t.Fatalf("sidemirror_errors_total{op=append,code=NOT_ENOUGH_REPLICAS} = %v", got)
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[string]bool)
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{
		"sidemirror_partition_lag_records", "sidemirror_mirrored_records_total", "sidemirror_mirrored_bytes_total",
		"sidemirror_fetch_latency_seconds", "sidemirror_append_latency_seconds", "sidemirror_partitions", "sidemirror_errors_total",
	} {
		if !names[want] {
			t.Errorf("metric %s not registered (have %v)", want, names)
		}
	}
	if gen := m.pids.generation(); gen != 1 {
		t.Fatalf("producer ID generation %d: NOT_ENOUGH_REPLICAS must keep the producer ID (nothing was appended)", gen)
	}
}

// TestAppendErrorProducerID: which produce errors make the partition take a
// new producer ID. Those that leave the broker's state for it intact keep
// it; those that say the broker has none, or an out-of-order refusal of the
// batch right at the LEO the partition resumed from (the broker expects
// another sequence there), renew it. Either way the copy is exact.
func TestAppendErrorProducerID(t *testing.T) {
	tests := []struct {
		code    int16
		errors  int32
		wantGen uint64
	}{
		{kerr.NotEnoughReplicas.Code, 2, 1},
		{kerr.RequestTimedOut.Code, 1, 1},
		{kerr.OutOfOrderSequenceNumber.Code, 1, 2},
		{kerr.UnknownProducerID.Code, 1, 2},
		{kerr.InvalidProducerEpoch.Code, 1, 2},
	}
	for _, tc := range tests {
		t.Run(kerr.ErrorForCode(tc.code).Error(), func(t *testing.T) {
			e := newTestEnv(t, 1, map[string]int32{"pid": 1})
			cl := e.producer(kgo.NoCompression())
			e.produce(cl, "pid", []int32{0}, 0, 20, 5)
			m := e.newManager(MaxInFlightPerPartition(3))
			startAll(t, m, "pid", []int32{0})
			e.waitCaughtUp(m, "pid", []int32{0})
			seen := controlProduce(e, tc.errors, tc.code)
			e.produce(cl, "pid", []int32{0}, 20, 30, 5)
			e.waitCaughtUp(m, "pid", []int32{0})
			if seen.Load() <= tc.errors {
				t.Fatalf("%d produce requests, want more than the %d answered with an error", seen.Load(), tc.errors)
			}
			if n := e.compareTopic("pid"); n != 50 {
				t.Fatalf("compared %d records, want 50", n)
			}
			if gen := m.pids.generation(); gen != tc.wantGen {
				t.Fatalf("producer ID generation %d, want %d", gen, tc.wantGen)
			}
		})
	}
}

// TestLocalNotLeader: NOT_LEADER_OR_FOLLOWER from the local broker, once
// the partition has appended, stops the partition and calls OnNotLeader.
func TestLocalNotLeader(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"nl": 1})
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "nl", []int32{0}, 0, 20, 5)
	m := e.newManager()
	p := Partition{testMirror, "nl", 0}
	startAll(t, m, "nl", []int32{0})
	e.waitCaughtUp(m, "nl", []int32{0})
	controlProduce(e, 1, kerr.NotLeaderForPartition.Code)
	e.produce(cl, "nl", []int32{0}, 20, 10, 5)
	testwait.For(t, waitTimeout, "OnNotLeader", func() bool { return len(e.events.notLeaders()) == 1 })
	if got := e.events.notLeaders()[0]; got != p {
		t.Fatalf("OnNotLeader(%v)", got)
	}
	if st := m.Status(); len(st) != 0 {
		t.Fatalf("partition still listed: %+v", st)
	}
	if end := e.offsets(e.dstAdm, false, "nl")[0]; end != 20 {
		t.Fatalf("destination end offset %d, want 20", end)
	}
	testwait.For(t, waitTimeout, "STOPPED notified", func() bool {
		states := e.events.statesOf(p)
		return states[len(states)-1] == StateStopped
	})
}

// TestNotLeaderYet: a local broker that refuses a partition before its
// first append (NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION, to
// the ListOffsets or the produce request), as one that has just become its
// leader or created it does, is waited for: the driver keeps trying with a
// short backoff rather than giving the partition up (which had the
// coordinator start it again at once, in a tight loop at thousands of
// partitions), and appends once the broker takes it.
func TestNotLeaderYet(t *testing.T) {
	tests := []struct {
		name string
		key  kmsg.Key
		code int16
	}{
		{"produce NOT_LEADER_OR_FOLLOWER", kmsg.Produce, kerr.NotLeaderForPartition.Code},
		{"produce UNKNOWN_TOPIC_OR_PARTITION", kmsg.Produce, kerr.UnknownTopicOrPartition.Code},
		{"ListOffsets NOT_LEADER_OR_FOLLOWER", kmsg.ListOffsets, kerr.NotLeaderForPartition.Code},
		{"ListOffsets UNKNOWN_TOPIC_OR_PARTITION", kmsg.ListOffsets, kerr.UnknownTopicOrPartition.Code},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, 1, map[string]int32{"ny": 2})
			parts := []int32{0, 1}
			e.produce(e.producer(kgo.NoCompression()), "ny", parts, 0, 20, 5)
			const refusals = 4
			var seen *atomic.Int32
			if tc.key == kmsg.Produce {
				seen = controlProduce(e, refusals, tc.code)
			} else {
				seen = controlListOffsets(e, refusals, tc.code)
			}
			core, logs := observer.New(zap.InfoLevel)
			m := e.newManager(Logger(zap.New(core)))
			startAll(t, m, "ny", parts)
			e.waitCaughtUp(m, "ny", parts)
			if seen.Load() <= refusals {
				t.Fatalf("%d requests, want more than the %d refused", seen.Load(), refusals)
			}
			if got := e.events.notLeaders(); len(got) != 0 {
				t.Fatalf("OnNotLeader(%v): the partitions were given up", got)
			}
			for _, p := range parts {
				if n := logs.FilterMessage("partition starting").FilterField(zap.Int32("partition", p)).Len(); n != 1 {
					t.Fatalf("partition %d: %d driver starts, want 1", p, n)
				}
			}
			if n := logs.FilterMessageSnippet("does not lead the partition yet").Len(); n < 1 || n > len(parts) {
				t.Fatalf("%d logs of the wait, want one per partition that waited (at most %d)", n, len(parts))
			}
			if n := e.compareTopic("ny"); n != 40 {
				t.Fatalf("compared %d records, want 40", n)
			}
		})
	}
}

// controlListOffsets makes the destination answer the next n ListOffsets
// requests with code for every partition, and returns the number of
// ListOffsets requests seen.
func controlListOffsets(e *testEnv, n int32, code int16) *atomic.Int32 {
	var seen atomic.Int32
	e.dst.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if seen.Add(1) > n {
			e.dst.DropControl()
			return nil, nil, false
		}
		e.dst.KeepControl()
		lr := req.(*kmsg.ListOffsetsRequest)
		resp := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range lr.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &seen
}

// TestDestinationErrors: non-retriable produce errors fail the partition
// with the error name, the offset, and for authorization what to do.
func TestDestinationErrors(t *testing.T) {
	tests := []struct {
		name string
		code int16
		want []string
	}{
		{"authorization", kerr.TopicAuthorizationFailed.Code, []string{"TOPIC_AUTHORIZATION_FAILED", "super.users", "offset 0"}},
		{"message too large", kerr.MessageTooLarge.Code, []string{"MESSAGE_TOO_LARGE", "source offset 0"}},
		{"invalid record", kerr.InvalidRecord.Code, []string{"INVALID_RECORD", "source offset 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, 1, map[string]int32{"de": 1})
			e.produce(e.producer(kgo.NoCompression()), "de", []int32{0}, 0, 10, 5)
			controlProduce(e, 1, tt.code)
			m := e.newManager(MaxInFlightPerPartition(1))
			p := Partition{testMirror, "de", 0}
			startAll(t, m, "de", []int32{0})
			st := waitState(t, m, p, StateFailed)
			for _, w := range tt.want {
				if !strings.Contains(st.LastError, w) {
					t.Fatalf("LastError %q does not contain %q", st.LastError, w)
				}
			}
		})
	}
}

// TestDivergence: a destination longer than the source fails the partition.
func TestDivergence(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"div": 1})
	e.produce(e.producer(kgo.NoCompression()), "div", []int32{0}, 0, 5, 5)
	// Another writer filled the destination further than the source goes.
	ctx := context.Background()
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, record("div", 0, i))
	}
	if err := e.dstCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := e.newManager()
	p := Partition{testMirror, "div", 0}
	startAll(t, m, "div", []int32{0})
	st := waitState(t, m, p, StateFailed)
	if !strings.Contains(st.LastError, "destination is ahead of the source: divergence at offset 5") {
		t.Fatalf("LastError %q", st.LastError)
	}
}

// TestExactnessViolation: another writer appends to the destination while
// the sidecar mirrors; the next append lands at the wrong offset, and the
// partition fails loudly.
func TestExactnessViolation(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"ex": 1})
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "ex", []int32{0}, 0, 10, 5)
	m := e.newManager()
	p := Partition{testMirror, "ex", 0}
	startAll(t, m, "ex", []int32{0})
	e.waitCaughtUp(m, "ex", []int32{0})
	if err := e.dstCl.ProduceSync(context.Background(), record("ex", 0, 999)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.produce(cl, "ex", []int32{0}, 10, 5, 5)
	st := waitState(t, m, p, StateFailed)
	if !errors.Is(errors.New(st.LastError), ErrExactness) && !strings.Contains(st.LastError, "exactness invariant violated") {
		t.Fatalf("LastError %q", st.LastError)
	}
}

// TestGapAfterOutage: while the source refuses fetches, it deletes records
// the destination never got; once fetches work again, the fetch at the
// destination LEO is out of range, the partition realigns and fills the gap
// from its LEO, and offsets match again.
func TestGapAfterOutage(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"out": 1})
	cl := e.producer(kgo.ZstdCompression())
	e.produce(cl, "out", []int32{0}, 0, 50, 10)
	m := e.newManager()
	p := Partition{testMirror, "out", 0}
	startAll(t, m, "out", []int32{0})
	e.waitCaughtUp(m, "out", []int32{0})

	var refuse atomic.Bool
	refuse.Store(true)
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !refuse.Load() {
			e.src.DropControl()
			return nil, nil, false
		}
		e.src.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range fr.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	testwait.For(t, waitTimeout, "fetch errors", func() bool {
		st := m.Status()
		return len(st) == 1 && strings.Contains(st[0].LastError, "NOT_LEADER")
	})
	e.produce(cl, "out", []int32{0}, 50, 50, 10)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "out", Partition: 0, At: 80})
	if _, err := e.srcAdm.DeleteRecords(context.Background(), os); err != nil {
		t.Fatal(err)
	}
	refuse.Store(false)
	e.waitCaughtUp(m, "out", []int32{0})
	if n := e.compareTopic("out"); n != 20 {
		t.Fatalf("compared %d records, want 20", n)
	}
	// Fillers cover 50 up to the source batch holding 80 (produced in
	// batches of 10, barring a split).
	base := batchBase(e.rawBatches(e.src, e.srcCl, "out", 0, 80)[0])
	if st := waitState(t, m, p, StateMirroring); st.FillerRecords != base-50 || st.RecordsMirrored != 50+100-base {
		t.Fatalf("fillers %d, records %d: want %d fillers (50..%d) and %d records", st.FillerRecords, st.RecordsMirrored, base-50, base-1, 50+100-base)
	}
	if got := metricValue(t, m.met.errors.WithLabelValues(opFetch, "OFFSET_OUT_OF_RANGE")); got < 1 {
		t.Fatalf("the fetch at the old LEO should have been out of range: %v", got)
	}
	if states := e.events.statesOf(p); !slices.Contains(states[2:], StateLogTruncation) {
		t.Fatalf("states %v: realigning goes through LOG_TRUNCATION", states)
	}
}

// TestLeadingGapEmptySource: the source deleted every record; the
// partition waits in LOG_TRUNCATION for a record to copy, then aligns.
func TestLeadingGapEmptySource(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"empty": 1})
	cl := e.producer(kgo.GzipCompression())
	e.produce(cl, "empty", []int32{0}, 0, 20, 10)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "empty", Partition: 0, At: 20})
	if _, err := e.srcAdm.DeleteRecords(context.Background(), os); err != nil {
		t.Fatal(err)
	}
	m := e.newManager()
	p := Partition{testMirror, "empty", 0}
	startAll(t, m, "empty", []int32{0})
	testwait.For(t, waitTimeout, "waiting for a live record", func() bool {
		st := m.Status()
		return len(st) == 1 && st[0].State == StateLogTruncation && strings.Contains(st[0].LastError, "no record at the source log start offset")
	})
	e.produce(cl, "empty", []int32{0}, 20, 10, 10)
	e.waitCaughtUp(m, "empty", []int32{0})
	if n := e.compareTopic("empty"); n != 10 {
		t.Fatalf("compared %d records", n)
	}
	if st := waitState(t, m, p, StateMirroring); st.FillerRecords != 20 {
		t.Fatalf("FillerRecords %d, want 20", st.FillerRecords)
	}
}

// TestTransientOutOfRange: an OFFSET_OUT_OF_RANGE that the source's offsets
// do not confirm is retried.
func TestTransientOutOfRange(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"oor": 1})
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "oor", []int32{0}, 0, 30, 10)
	var n atomic.Int32
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if n.Add(1) > 1 {
			e.src.DropControl()
			return nil, nil, false
		}
		e.src.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range fr.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.OffsetOutOfRange.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	m := e.newManager()
	startAll(t, m, "oor", []int32{0})
	e.waitCaughtUp(m, "oor", []int32{0})
	e.compareTopic("oor")
	if got := metricValue(t, m.met.errors.WithLabelValues(opFetch, "OFFSET_OUT_OF_RANGE")); got != 1 {
		t.Fatalf("sidemirror_errors_total{op=fetch,code=OFFSET_OUT_OF_RANGE} = %v", got)
	}
}

// TestStopWaitsForInFlightAppend: Stop does not return while an append is in
// flight; when its context ends first, the partition still stops once the
// append returned, and a later Start resumes from the destination LEO.
func TestStopWaitsForInFlightAppend(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"sw": 1})
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "sw", []int32{0}, 0, 10, 10)
	entered, release := make(chan struct{}), make(chan struct{})
	e.dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.DropControl() // only the first produce request
		close(entered)
		e.dst.SleepControl(func() { <-release })
		return nil, nil, false // then the broker handles it
	})
	m := e.newManager()
	p := Partition{testMirror, "sw", 0}
	startAll(t, m, "sw", []int32{0})
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := m.Stop(ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with an append in flight returned %v", err)
	}
	if st := m.Status(); len(st) != 1 || st[0].State != StateStopping {
		t.Fatalf("status %+v, want STOPPING", st)
	}
	if err := m.Start(p); !errors.Is(err, ErrStopping) {
		t.Fatalf("Start while stopping: %v", err)
	}
	close(release)
	testwait.For(t, waitTimeout, "partition removed", func() bool { return len(m.Status()) == 0 })
	if end := e.offsets(e.dstAdm, false, "sw")[0]; end != 10 {
		t.Fatalf("the in-flight batch should have landed: destination end %d", end)
	}
	e.produce(cl, "sw", []int32{0}, 10, 10, 10)
	if err := m.Start(p); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(m, "sw", []int32{0})
	e.compareTopic("sw")
	if n := seriesCount(m.met.errors); n != 0 {
		t.Fatalf("%d error series: a restarted partition must continue its producer sequence", n)
	}
}

// TestStopPartitions stops three partitions, the first with an append the
// destination holds: every driver is asked to stop before any is waited
// for, so the two others have stopped while that append is still held (one
// by one, the first Stop would wait for it before the others were asked),
// and all are removed once it returns.
func TestStopPartitions(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"sp": 3})
	parts := []int32{0, 1, 2}
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "sp", parts, 0, 10, 10)
	core, logs := observer.New(zap.InfoLevel)
	m := e.newManager(Logger(zap.New(core)))
	startAll(t, m, "sp", parts)
	e.waitCaughtUp(m, "sp", parts)
	entered, release := make(chan struct{}), make(chan struct{})
	e.dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.DropControl() // only the first produce request
		close(entered)
		e.dst.SleepControl(func() { <-release })
		return nil, nil, false
	})
	e.produce(cl, "sp", []int32{0}, 10, 10, 10)
	<-entered
	ps := []Partition{{testMirror, "sp", 0}, {testMirror, "sp", 1}, {testMirror, "sp", 2}, {testMirror, "sp", 9}} // 9: not running
	done := make(chan map[Partition]error, 1)
	go func() { done <- m.StopPartitions(context.Background(), ps) }()
	testwait.For(t, waitTimeout, "the drivers without an append in flight stopped", func() bool {
		stopped := logs.FilterMessage("partition stopped")
		return stopped.FilterField(zap.Int32("partition", 1)).Len() == 1 && stopped.FilterField(zap.Int32("partition", 2)).Len() == 1
	})
	if n := logs.FilterMessage("partition stopped").FilterField(zap.Int32("partition", 0)).Len(); n != 0 {
		t.Fatal("the partition with an append held stopped before the append returned")
	}
	close(release)
	if failed := <-done; failed != nil {
		t.Fatalf("StopPartitions: %v", failed)
	}
	if st := m.Status(); len(st) != 0 {
		t.Fatalf("partitions left: %+v", st)
	}
	for _, p := range ps[:3] {
		testwait.For(t, waitTimeout, p.String()+" STOPPED notified", func() bool {
			states := e.events.statesOf(p)
			return states[len(states)-1] == StateStopped
		})
	}
	if end := e.offsets(e.dstAdm, false, "sp")[0]; end != 20 {
		t.Fatalf("the held batch should have landed: destination end %d", end)
	}
}

// TestStopPartitionsTimeout: partitions that have not stopped when the
// context ends are returned with the error and removed once they stop.
func TestStopPartitionsTimeout(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"st": 2})
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "st", []int32{0}, 0, 10, 10)
	entered, release := make(chan struct{}), make(chan struct{})
	e.dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.DropControl()
		close(entered)
		e.dst.SleepControl(func() { <-release })
		return nil, nil, false
	})
	m := e.newManager()
	startAll(t, m, "st", []int32{0, 1}) // 1 has nothing to append
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	held, idle := Partition{testMirror, "st", 0}, Partition{testMirror, "st", 1}
	failed := m.StopPartitions(ctx, []Partition{held, idle})
	if len(failed) != 1 || !errors.Is(failed[held], context.DeadlineExceeded) {
		t.Fatalf("StopPartitions returned %v, want %s with context.DeadlineExceeded", failed, held)
	}
	if st := m.Status(); len(st) != 1 || st[0].Partition != held || st[0].State != StateStopping {
		t.Fatalf("status %+v, want %s STOPPING alone", st, held)
	}
	close(release)
	testwait.For(t, waitTimeout, "partition removed", func() bool { return len(m.Status()) == 0 })
}

// TestSourceClusterChanged gives the mirror the cluster ID of another
// cluster: its partitions fail before appending anything, naming both IDs.
func TestSourceClusterChanged(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"cid": 1})
	e.produce(e.producer(kgo.NoCompression()), "cid", []int32{0}, 0, 20, 10)
	m := e.newManager()
	if err := m.SetMirror(testMirror, []kgo.Opt{kgo.SeedBrokers(e.src.ListenAddrs()...)}, MirrorSettings{SourceClusterID: "the-old-cluster"}); err != nil {
		t.Fatal(err)
	}
	startAll(t, m, "cid", []int32{0})
	st := waitState(t, m, Partition{testMirror, "cid", 0}, StateFailed)
	if !strings.Contains(st.LastError, "source cluster ID changed") || !strings.Contains(st.LastError, "the-old-cluster") {
		t.Fatalf("LastError = %q", st.LastError)
	}
	if end := e.offsets(e.dstAdm, false, "cid")[0]; end != 0 {
		t.Fatalf("%d records appended from another cluster", end)
	}
}

// TestSourceTopicRecreated gives the mirror another topic ID than the
// source topic's: its partitions fail before appending anything.
func TestSourceTopicRecreated(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"rt": 1})
	e.produce(e.producer(kgo.NoCompression()), "rt", []int32{0}, 0, 20, 10)
	m := e.newManager()
	old := [16]byte{1, 2, 3}
	if err := m.SetMirrorSettings(testMirror, MirrorSettings{TopicIDs: map[string][16]byte{"rt": old}}); err != nil {
		t.Fatal(err)
	}
	startAll(t, m, "rt", []int32{0})
	st := waitState(t, m, Partition{testMirror, "rt", 0}, StateFailed)
	if !strings.Contains(st.LastError, "source topic was recreated") || !strings.Contains(st.LastError, "AQID") {
		t.Fatalf("LastError = %q", st.LastError)
	}
	if end := e.offsets(e.dstAdm, false, "rt")[0]; end != 0 {
		t.Fatalf("%d records appended from a recreated topic", end)
	}
}

// TestTransactionalIDFencedBetweenTransactions fences the destination
// producer of a source producer while it has nothing open (as when its
// transactional ID expired after transactional.id.expiration.ms): the
// next transaction initializes the ID again and mirrors on.
func TestTransactionalIDFencedBetweenTransactions(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"fence": 1})
	ctx := context.Background()
	src := e.producer(kgo.NoCompression(), kgo.TransactionalID("fence-src"))
	plain := e.producer(kgo.NoCompression())
	txn := func(from int) {
		t.Helper()
		if err := src.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := src.ProduceSync(ctx, record("fence", 0, from), record("fence", 0, from+1)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		e.produce(plain, "fence", []int32{0}, from+2, 2, 2)
	}
	txn(0)
	m := e.newManager()
	startAll(t, m, "fence", []int32{0})
	e.waitCaughtUp(m, "fence", []int32{0})

	// Fence the destination producer: InitProducerID bumps its epoch.
	ids, err := kadm.NewClient(e.dstCl).ListTransactions(ctx, nil, nil)
	if err != nil || len(ids) != 1 {
		t.Fatalf("destination transactional IDs %v: %v", ids, err)
	}
	id := ids.TransactionalIDs()[0]
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
	if resp, err := req.RequestWith(ctx, e.dstCl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("fencing %s: %v %v", id, err, resp)
	}

	txn(10)
	e.waitCaughtUp(m, "fence", []int32{0})
	if st := m.Status(); len(st) != 1 || st[0].State != StateMirroring {
		t.Fatalf("status after the fence: %+v", st)
	}
	e.compareRawBatches("fence", 0, 0)
	e.compareTopic("fence")
}

// TestFailedLeaderLookupNotKept: a look-up of a topic's source leaders that
// fails (the source cut off, or a partition without a leader while a
// broker restarts) is handed to the callers of that moment only: once the
// source answers again, the next caller gets the leader, whether or not it
// asked for a refresh. The first failure was served from the cache to a
// driver's resume check, which never refreshes, for as long as nothing
// else looked the topic up (minutes in a chaos run).
func TestFailedLeaderLookupNotKept(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"mirrored": 1, "other": 1})
	m := e.newManager()
	startAll(t, m, "mirrored", []int32{0})
	mir, err := m.mirror(testMirror)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(*kmsg.MetadataResponseTopic)
	}{
		{"topic error", func(rt *kmsg.MetadataResponseTopic) { rt.ErrorCode = kerr.UnknownTopicOrPartition.Code }},
		{"no leader", func(rt *kmsg.MetadataResponseTopic) {
			rt.Partitions[0].Leader, rt.Partitions[0].ErrorCode = -1, kerr.LeaderNotAvailable.Code
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mir.metaMu.Lock()
			delete(mir.leaders, "other")
			mir.metaMu.Unlock()
			var failing atomic.Bool
			failing.Store(true)
			e.src.ControlKey(kmsg.Metadata.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				e.src.KeepControl()
				req := kreq.(*kmsg.MetadataRequest)
				if !failing.Load() || len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != "other" {
					return nil, nil, false
				}
				resp := req.ResponseKind().(*kmsg.MetadataResponse)
				rt := kmsg.NewMetadataResponseTopic()
				rt.Topic = kmsg.StringPtr("other")
				rp := kmsg.NewMetadataResponseTopicPartition()
				rt.Partitions = append(rt.Partitions, rp)
				tc.set(&rt)
				resp.Topics = append(resp.Topics, rt)
				return resp, nil, true
			})
			p := Partition{testMirror, "other", 0}
			if _, err := mir.leader(context.Background(), p, false); err == nil {
				t.Fatal("leader found while the source answers with an error")
			}
			failing.Store(false)
			testwait.For(t, waitTimeout, "the leader once the source answers again, without a refresh asked for", func() bool {
				l, err := mir.leader(context.Background(), p, false)
				return err == nil && l >= 0
			})
		})
	}
}
