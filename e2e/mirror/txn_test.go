package mirror

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

const (
	readCommitted   = "isolation.level=read_committed"
	readUncommitted = "isolation.level=read_uncommitted"
)

// markersOf returns the transaction markers of a partition on c by offset:
// true for COMMIT, false for ABORT.
func markersOf(t *testing.T, c *testbed.Cluster, topic string, p int32) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	for base, b := range rawBatches(t, c, topic, p) {
		if isMarker, commit := markerType(t, b); isMarker {
			out[base] = commit
		}
	}
	return out
}

// markerType reports whether b is a transaction marker and its outcome.
// rawBatch content is the batch from its attributes to the producer ID,
// then from the record count on.
func markerType(t *testing.T, b rawBatch) (marker, commit bool) {
	t.Helper()
	if b.content[1]&0x20 == 0 || binary.BigEndian.Uint32(b.content[22:26]) == 0 {
		return false, false // not a control batch, or one the cleaner emptied
	}
	var r kmsg.Record
	if err := r.ReadFrom(b.content[26:]); err != nil || len(r.Key) != 4 {
		t.Fatalf("unreadable control record: %v", err)
	}
	return true, r.Key[3] == 1
}

// compareTransactional checks partition p of topic on both clusters: the
// same batches at the same offsets, byte-identical apart from the producer
// fields, and the same transaction markers (outcome) at the same offsets.
// The destination writes its markers itself, so their timestamps differ.
// It returns the number of markers.
func compareTransactional(t *testing.T, topic string, p int32) (commits, aborts int) {
	t.Helper()
	src, dst := rawBatches(t, env.Source, topic, p), rawBatches(t, env.Destination, topic, p)
	pairs, _ := matchBatches(t, fmt.Sprintf("%s-%d", topic, p), src, dst)
	for _, sd := range pairs {
		s, d := sd[0], sd[1]
		off := s.base
		sm, sc := markerType(t, s)
		dm, dc := markerType(t, d)
		switch {
		case sm != dm || sc != dc:
			t.Fatalf("%s-%d offset %d: source marker %v (commit %v), destination marker %v (commit %v)", topic, p, off, sm, sc, dm, dc)
		case sm && sc:
			commits++
		case sm:
			aborts++
		case !sameBatchContent(s, d):
			t.Fatalf("%s-%d: batches at offset %d differ beyond the producer fields", topic, p, off)
		}
	}
	return commits, aborts
}

// txnWriter runs transactions on the source: each writes 1-20 records to 1-3
// partitions of topic and commits, or aborts one time in three.
func txnWriter(ctx context.Context, t *testing.T, id, topic string, partitions int32, txns int, seed uint64) error {
	cl := newClient(t, env.Source, testbed.Admin, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range txns {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		var recs []*kgo.Record
		for range 1 + rng.IntN(3) {
			p := rng.Int32N(partitions)
			for j := range 1 + rng.IntN(20) {
				recs = append(recs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "%s-%d", id, i),
					Value:   fmt.Appendf(nil, "txn %s/%d record %d", id, i, j),
					Headers: []kgo.RecordHeader{{Key: "txn", Value: []byte(id)}}})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		end := kgo.TryCommit
		if rng.IntN(3) == 0 {
			end = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			return err
		}
	}
	return nil
}

// TestTransactions mirrors a topic written by three concurrent
// transactional producers (commits and aborts interleaved on the same
// partitions, transactions spanning partitions) and a plain producer, half
// before mirroring starts and half while it runs. Every partition must read
// the same on both clusters with read_committed and with read_uncommitted
// (kcat), and hold the same markers at the same offsets.
func TestTransactions(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "txns", "txns", 3
	createSourceTopic(t, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	plain := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))

	round := func(seed uint64) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := range 3 {
			wg.Go(func() {
				errs <- txnWriter(ctx, t, fmt.Sprintf("e2e-txns-%d", w), topic, partitions, 25, seed+uint64(w))
			})
		}
		wg.Go(func() {
			for i := range 200 {
				r := &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "plain %d/%d", seed, i)}
				if err := plain.ProduceSync(ctx, r).FirstErr(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	round(100)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	round(200)
	waitCaughtUp(t, mirror, topic, 3*time.Minute)

	var commits, aborts, committed, uncommitted int
	for p := range int32(partitions) {
		c, a := compareTransactional(t, topic, p)
		commits, aborts = commits+c, aborts+a
		committed += compareDumps(t, topic, p, "-X", readCommitted)
		uncommitted += compareDumps(t, topic, p, "-X", readUncommitted)
	}
	t.Logf("%d commit and %d abort markers at identical offsets; %d records read_committed, %d read_uncommitted",
		commits, aborts, committed, uncommitted)
	if commits == 0 || aborts == 0 || committed >= uncommitted {
		t.Fatalf("the workload must exercise commits and aborts: %d commits, %d aborts, %d committed of %d records",
			commits, aborts, committed, uncommitted)
	}
	if lso, hw := committedEnds(t, env.Destination, topic), endOffsets(t, env.Destination, topic); fmt.Sprint(lso) != fmt.Sprint(hw) {
		t.Fatalf("destination last stable offsets %v lag its high watermarks %v with no transaction open", lso, hw)
	}
}

// committedEnds returns the read_committed end offsets (last stable
// offsets) of topic on c.
func committedEnds(t *testing.T, c *testbed.Cluster, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(newClient(t, c, testbed.Admin)).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("last stable offsets of %s on %s: %v", topic, c.Name(), err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// openMirrorTxns lists the ongoing destination transactions that replay
// source transactions of mirror.
func openMirrorTxns(t *testing.T, mirror string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(newClient(t, env.Destination, testbed.Admin)).ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatalf("ListTransactions on the destination: %v", err)
	}
	var ids []string
	for _, id := range listed.TransactionalIDs() {
		if strings.HasPrefix(id, "sidemirror:"+mirror+":") {
			ids = append(ids, id)
		}
	}
	return ids
}

// waitOpenTxnReplayed waits until the destination holds everything the
// source has of topic and replays its open transaction in one open
// destination transaction per partition.
func waitOpenTxnReplayed(t *testing.T, mirror, topic string, partitions int, d time.Duration) {
	t.Helper()
	wait.For(t, d, "the open transaction to be replayed", func() bool {
		return fmt.Sprint(endOffsets(t, env.Source, topic)) == fmt.Sprint(endOffsets(t, env.Destination, topic)) &&
			len(openMirrorTxns(t, mirror)) == partitions
	})
}

// openSourceTxn begins a transaction on the source that writes n records
// to each partition of topic and leaves it open.
func openSourceTxn(t *testing.T, id, topic string, partitions int32, n int) *kgo.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, env.Source, testbed.Admin, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(5*time.Minute))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := range partitions {
		for i := range n {
			recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "open %s %d/%d", id, p, i)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestTransactionSurvivesSidecarKill kills every sidecar while the
// destination replays an open source transaction, restarts them, and then
// the source commits: the destination must commit it too, at the source's
// offsets, without a spurious abort.
func TestTransactionSurvivesSidecarKill(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "txn-kill", "txn-kill", 2
	createSourceTopic(t, topic, partitions, nil)
	produceVariety(t, env.Source, topic, 200, 31)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	src := openSourceTxn(t, "e2e-txn-kill", topic, partitions, 50)
	waitOpenTxnReplayed(t, mirror, topic, partitions, time.Minute)
	for _, s := range env.Sidecars.Sidecars() {
		s.Kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, s := range env.Sidecars.Sidecars() {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("after the restart")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produceVariety(t, env.Source, topic, 20, 32)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	for p := range int32(partitions) {
		commits, aborts := compareTransactional(t, topic, p)
		if commits != 1 || aborts != 0 {
			t.Fatalf("%s-%d holds %d commit and %d abort markers, want the one commit", topic, p, commits, aborts)
		}
		compareDumps(t, topic, p, "-X", readCommitted)
		compareDumps(t, topic, p, "-X", readUncommitted)
	}
	if ids := openMirrorTxns(t, mirror); len(ids) != 0 {
		t.Fatalf("destination transactions still open after the commit: %v", ids)
	}
}

// TestFailoverWithOpenTransaction stops a mirror topic while a source
// transaction is open and replayed: the stop aborts the destination
// transaction, so read_committed consumers are not blocked (the last stable
// offset reaches the high watermark) and never see its records.
func TestFailoverWithOpenTransaction(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "txn-fo", "txn-fo", 2
	createSourceTopic(t, topic, partitions, nil)
	produceVariety(t, env.Source, topic, 100, 41)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	base := endOffsets(t, env.Source, topic) // where the open transaction starts
	src := openSourceTxn(t, "e2e-txn-fo", topic, partitions, 30)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = src.EndTransaction(ctx, kgo.TryAbort)
	}()
	waitOpenTxnReplayed(t, mirror, topic, partitions, 2*time.Minute)
	before := committedEnds(t, env.Destination, topic)
	for p := range int32(partitions) {
		if before[p] != base[p] {
			t.Fatalf("before the stop, %s-%d's last stable offset is %d, want %d (the open transaction's start)", topic, p, before[p], base[p])
		}
	}

	mustCLI(t, "--stop", "--topics", topic, "--mirror", mirror)
	hw := endOffsets(t, env.Destination, topic)
	lso := committedEnds(t, env.Destination, topic)
	for p := range int32(partitions) {
		if lso[p] != hw[p] || hw[p] != base[p]+30+1 {
			t.Fatalf("after the stop %s-%d: last stable offset %d, high watermark %d; want both %d (records, 30 open, the abort marker)",
				topic, p, lso[p], hw[p], base[p]+30+1)
		}
		markers := markersOf(t, env.Destination, topic, p)
		if commit, ok := markers[hw[p]-1]; !ok || commit || len(markers) != 1 {
			t.Fatalf("%s-%d markers %v, want one ABORT at offset %d", topic, p, markers, hw[p]-1)
		}
		// read_committed sees the records before the transaction only.
		values := kcatValues(t, env.Destination, topic, p, "-X", readCommitted)
		for _, v := range values {
			if strings.HasPrefix(v, "open ") {
				t.Fatalf("read_committed returned a record of the aborted transaction: %q", v)
			}
		}
		if int64(len(values)) != base[p] {
			t.Fatalf("kcat read_committed returned %d records of %s-%d, want %d", len(values), topic, p, base[p])
		}
	}
	if ids := openMirrorTxns(t, mirror); len(ids) != 0 {
		t.Fatalf("destination transactions still open after the stop: %v", ids)
	}
}

// kcatValues reads partition p of topic on c with kcat to its end and
// returns the record values; extra are more kcat arguments.
func kcatValues(t *testing.T, c *testbed.Cluster, topic string, p int32, extra ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.DumpPartition(ctx, testbed.Admin, topic, p, "%s\n", extra...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// TestDestinationAbortsReplayedTransaction gives a mirror a destination
// transaction timeout of 5 s and keeps a source transaction open longer:
// the destination aborts the replayed transaction on its own, and when the
// source commits, the partition goes FAILED naming that, instead of
// writing anything at the wrong offset. It is never retried automatically:
// --describe --failed shows it NonRetryable and exits 3, and --recover
// brings it back to MIRRORING.
func TestDestinationAbortsReplayedTransaction(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "txn-timeout", "txn-timeout"
	createSourceTopic(t, topic, 1, nil)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		mirrorConfigFile(t, map[string]string{"mirror.transaction.timeout.ms": "5000"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	src := openSourceTxn(t, "e2e-txn-timeout", topic, 1, 10)
	wait.For(t, time.Minute, "the open transaction to be replayed", func() bool {
		return len(openMirrorTxns(t, mirror)) == 1
	})
	wait.For(t, time.Minute, "the destination to abort the replayed transaction", func() bool {
		return len(openMirrorTxns(t, mirror)) == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var reason string
	var failedAt time.Time
	wait.For(t, time.Minute, "the partition to fail", func() bool {
		failedAt = time.Now()
		for _, tp := range describe(t, mirror).Topics {
			for _, pd := range tp.Partitions {
				if pd.State == "FAILED" {
					reason = deref(pd.LastError)
					return true
				}
			}
		}
		return false
	})
	if !strings.Contains(reason, "aborted or fenced") || !strings.Contains(reason, "sidemirror:txn-timeout:txn-timeout:0:") {
		t.Fatalf("FAILED with %q, want a reason naming the destination's abort of the replayed transaction", reason)
	}
	if m := markersOf(t, env.Destination, topic, 0); len(m) != 1 || m[10] {
		t.Fatalf("destination markers %v, want only the destination's own ABORT at offset 10", m)
	}
	// No automatic retry: it would resume past the marker it cannot
	// repair. The first one would come 100 ms after the owner saw the
	// failure (mirror.partition.retry.backoff.ms), which is at most one
	// reconcile pass (2 s) after describe showed it: wait until every
	// sidecar reconciled after that.
	waitReconciledAfter(t, failedAt.Add(100*time.Millisecond+2*time.Second))
	for _, tp := range describe(t, mirror).Topics {
		for _, pd := range tp.Partitions {
			if pd.State != "FAILED" || !pd.NonRetryable || pd.RetryAttempt != 0 {
				t.Fatalf("%s-%d is %s (non-retryable %v, %d retries) after the automatic retry backoff, want FAILED, non-retryable, never retried",
					topic, pd.PartitionIndex, pd.State, pd.NonRetryable, pd.RetryAttempt)
			}
		}
	}

	// --describe --failed shows it with RETRY NonRetryable and the reason
	// as columns, and exits 3.
	r := cli(t, "--describe", "--failed", "--mirror", mirror)
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if r.Code != 3 || len(lines) != 2 || !strings.HasSuffix(lines[0], " STATE           RETRY         ERROR") {
		t.Fatalf("--describe --failed: exit %d, want 3 and a header and one row:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if f := strings.Fields(lines[1]); len(f) < 9 || f[0] != mirror || f[1] != topic || f[2] != "0" || f[6] != "FAILED" || f[7] != "NonRetryable" ||
		!strings.Contains(lines[1], "aborted or fenced") {
		t.Fatalf("--describe --failed row %q: want partition 0 FAILED, NonRetryable, with the reason", lines[1])
	}
	t.Logf("--describe --failed:\n%s", r.Stdout)

	// --recover restarts it (the operator accepts the aborted records); it
	// mirrors again, and --describe --failed is empty and exits 0.
	if out, want := mustCLI(t, "--recover", "--topics", topic, "--mirror", mirror), "Recovered 1 mirror topic(s) in mirror "+mirror+": ["+topic+"]\n"; out != want {
		t.Fatalf("--recover printed %q, want %q", out, want)
	}
	wait.For(t, time.Minute, "the recovered partition to mirror again", func() bool {
		for _, tp := range describe(t, mirror).Topics {
			for _, pd := range tp.Partitions {
				if pd.State != "MIRRORING" {
					return false
				}
			}
		}
		return true
	})
	if r := cli(t, "--describe", "--failed", "--mirror", mirror); r.Code != 0 || strings.Count(r.Stdout, "\n") != 1 {
		t.Fatalf("--describe --failed after --recover: exit %d, want 0 and only the header:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
