package mirror

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// sourceGaps returns the offsets between the source log start and end of
// topic-0 that no batch covers (holes between batches, markers the cleaner
// removed included).
func sourceGaps(t *testing.T, topic string) int64 {
	t.Helper()
	batches := rawBatches(t, env.Source, topic, 0)
	bases := make([]int64, 0, len(batches))
	for base := range batches {
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var gaps int64
	next := startOffsets(t, env.Source, topic)[0]
	for _, base := range bases {
		gaps += base - next
		next = base + int64(int32(binary.BigEndian.Uint32(batches[base].content[2:6]))) + 1
	}
	return gaps
}

// TestCompactedTransactions mirrors a compacted topic written with
// transactions (commits and aborts) and plain overwrites, after the source's
// cleaner removed superseded and aborted records and left holes around
// transaction markers. Read uncommitted, every destination offset holds the
// source's record or a copy of the next live one; the source's markers sit
// at the same offsets with the same outcome; no transaction stays open.
func TestCompactedTransactions(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, keys = "compacted-txn", "compacted-txn", 40
	createSourceTopic(t, topic, 1, eagerCompaction())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	txn := newClient(t, env.Source, testbed.Admin, kgo.TransactionalID("e2e-compacted-txn"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rng := rand.New(rand.NewPCG(61, 62))
	writeTxns := func(n int) {
		for i := range n {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			for j := range 1 + rng.IntN(10) {
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", rng.IntN(keys)), Value: fmt.Appendf(nil, "txn %d/%d %d", i, j, rng.Uint64())})
			}
			if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			end := kgo.TryCommit
			if rng.IntN(4) == 0 {
				end = kgo.TryAbort
			}
			if err := txn.EndTransaction(ctx, end); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	var gaps int64
	for wave := uint64(0); ; wave++ {
		writeTxns(60)
		produceOverwrites(t, topic, keys, 300, 3, 500+wave)
		time.Sleep(time.Second)
		gaps = sourceGaps(t, topic)
		if gaps > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the source's cleaner left no holes between batches after 3 minutes")
		}
	}
	srcMarkers := markersOf(t, env.Source, topic, 0)
	t.Logf("source: %d offsets between batches, %d markers", gaps, len(srcMarkers))

	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	writeTxns(20) // and while it mirrors
	produceOverwrites(t, topic, keys, 30, 1, 900)
	waitCaughtUp(t, mirror, topic, 3*time.Minute)

	// Read uncommitted, each destination record is the source's record at
	// its offset or a copy of the next one. The source's cleaner may have
	// removed records after they were mirrored: superseded ones, and those
	// of aborted transactions (not visible read_committed).
	srcU := dumpPartition(t, env.Source, topic, 0, "-X", readUncommitted)
	dstU := dumpPartition(t, env.Destination, topic, 0, "-X", readUncommitted)
	dstC := dumpPartition(t, env.Destination, topic, 0, "-X", readCommitted)
	live, copies := 0, 0
	for _, o := range dstU.offsets {
		i := sort.Search(len(srcU.offsets), func(i int) bool { return srcU.offsets[i] >= o })
		if i == len(srcU.offsets) {
			t.Fatalf("destination offset %d: after the last source record", o)
		}
		s := srcU.offsets[i]
		_, committed := dstC.lines[o]
		switch {
		case dstU.lines[o] == srcU.lines[s] && s == o:
			live++
		case dstU.lines[o] == srcU.lines[s]:
			copies++
		case s != o && (dstU.supersededAt(o) || !committed):
		default:
			t.Fatalf("destination offset %d: %.200q, want (a copy of) source offset %d: %.200q", o, dstU.lines[o], s, srcU.lines[s])
		}
	}
	srcMarkers = markersOf(t, env.Source, topic, 0)
	dstMarkers := markersOf(t, env.Destination, topic, 0)
	dst := rawBatches(t, env.Destination, topic, 0)
	cleanedOnDest := 0
	for off, commit := range srcMarkers {
		d, ok := dstMarkers[off]
		switch {
		case ok && d == commit:
		case !ok && !holdsOffset(dst, off):
			// The destination topic is compacted too (the source's
			// configs), and its own cleaner removed the marker once the
			// transaction's records were gone: a hole now. A marker that
			// was never written would have left its offset to the next
			// record, not a hole.
			cleanedOnDest++
		default:
			t.Fatalf("source marker at %d (commit %v): destination has %v (present %v, a batch with records there %v)", off, commit, d, ok, holdsOffset(dst, off))
		}
	}
	if cleanedOnDest > 0 {
		t.Logf("%d of %d source markers were removed by the destination's cleaner", cleanedOnDest, len(srcMarkers))
	}
	// Markers the source's cleaner removed after they were mirrored stay on
	// the destination: they must sit in source holes now.
	src := rawBatches(t, env.Source, topic, 0)
	for off := range dstMarkers {
		if _, ok := srcMarkers[off]; !ok {
			if b, covered := src[off]; covered && binary.BigEndian.Uint32(b.content[22:26]) > 0 {
				t.Fatalf("destination marker at %d where the source has a batch with records that is no marker", off)
			}
		}
	}
	if ids := openMirrorTxns(t, mirror); len(ids) != 0 {
		t.Fatalf("destination transactions left open: %v", ids)
	}
	t.Logf("destination: %d live records, %d copies, %d markers (%d still on the source)", live, copies, len(dstMarkers), len(srcMarkers))
}

// holdsOffset reports whether a batch with records, of batches
// (rawBatches), spans offset. The cleaner keeps the last batch of a
// producer without its records, so an empty batch spans offsets it holds
// nothing at.
func holdsOffset(batches map[int64]rawBatch, offset int64) bool {
	for base, b := range batches {
		last := base + int64(binary.BigEndian.Uint32(b.content[2:6]))
		if base <= offset && offset <= last && binary.BigEndian.Uint32(b.content[22:26]) > 0 {
			return true
		}
	}
	return false
}
