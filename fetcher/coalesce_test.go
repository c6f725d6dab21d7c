package fetcher

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestCoalesceBatches merges hand-made batches of every codec, with
// timestamps going backwards between batches, and checks that the result
// holds every record with its absolute offset and timestamp, key, value and
// headers, in the batches' codec, with contiguous offset deltas.
func TestCoalesceBatches(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			recs := sampleRecords(9)
			var run coalesceRun
			type want struct {
				off, ts int64
				rec     testRecord
			}
			var wants []want
			base, ts := int64(1000), int64(1_700_000_000_000)
			for i, n := range []int{1, 3, 1, 4} {
				part := recs[:n]
				recs = recs[n:]
				firstTS := ts - int64(i%2)*5000 // earlier than the batch before
				b := makeBatch(t, base, firstTS, part, c.codec, 0, -1)
				rb, err := parseBatch(b)
				if err != nil || !coalescible(b, &rb) || !run.fits(b, &rb) {
					t.Fatalf("batch %d: %v, coalescible %v", i, err, coalescible(b, &rb))
				}
				run.add(b, &rb)
				for j, r := range part {
					wants = append(wants, want{off: base + int64(j), ts: firstTS + r.tsDelta, rec: r})
				}
				base += int64(n)
				ts += 10
			}
			out, err := coalesceBatches(&run)
			if err != nil {
				t.Fatal(err)
			}
			if !crcValid(out) {
				t.Fatal("CRC of the coalesced batch is invalid")
			}
			rb, got := decodeRecords(t, out)
			if codec := rb.Attributes & attrCompression; c.name != "none" && codec == 0 {
				t.Fatalf("codec %d, want %s", codec, c.name)
			}
			if rb.NumRecords != 9 || rb.LastOffsetDelta != 8 || len(got) != 9 {
				t.Fatalf("%d records, last offset delta %d, %d decoded; want 9, 8", rb.NumRecords, rb.LastOffsetDelta, len(got))
			}
			var maxTS int64
			for i, w := range wants {
				g := got[i]
				maxTS = max(maxTS, w.ts)
				if int64(g.OffsetDelta) != w.off-1000 || rb.FirstTimestamp+g.TimestampDelta64 != w.ts ||
					!sameBytes(g.Key, w.rec.key) || !sameBytes(g.Value, w.rec.value) || !sameHeaders(g.Headers, w.rec.headers) {
					t.Fatalf("record %d: offset delta %d, timestamp %d, key %q, value %q, headers %v; want %+v",
						i, g.OffsetDelta, rb.FirstTimestamp+g.TimestampDelta64, g.Key, g.Value, g.Headers, w)
				}
			}
			if rb.MaxTimestamp != maxTS {
				t.Fatalf("max timestamp %d, want %d", rb.MaxTimestamp, maxTS)
			}
		})
	}
}

// TestCoalesceLimits: large, control and LogAppendTime batches never join a
// run; a run stops at coalesceMaxBytes and at another codec; transactional
// batches join only a run of their producer ID and epoch.
func TestCoalesceLimits(t *testing.T) {
	small := makeBatch(t, 0, 1, sampleRecords(1), kgo.Lz4Compression(), 0, -1)
	for _, tt := range []struct {
		name  string
		batch []byte
	}{
		{"large", makeBatch(t, 0, 1, []testRecord{{value: make([]byte, coalesceSmallBytes)}}, kgo.NoCompression(), 0, -1)},
		{"control", makeBatch(t, 0, 1, []testRecord{{key: []byte{0, 0, 0, 1}}}, kgo.NoCompression(), attrTransactional|attrControl, -1)},
		{"log append time", makeBatch(t, 0, 1, sampleRecords(1), kgo.Lz4Compression(), attrLogAppendTime, -1)},
	} {
		rb, err := parseBatch(tt.batch)
		if err != nil {
			t.Fatal(err)
		}
		if coalescible(tt.batch, &rb) {
			t.Errorf("%s batch is coalescible", tt.name)
		}
	}
	var run coalesceRun
	rb, _ := parseBatch(small)
	run.add(small, &rb)
	next := makeBatch(t, 1, 1, sampleRecords(1), kgo.ZstdCompression(), 0, -1)
	nrb, _ := parseBatch(next)
	if run.fits(next, &nrb) {
		t.Error("a zstd batch fits a run of lz4 batches")
	}
	same := makeBatch(t, 1, 1, sampleRecords(1), kgo.Lz4Compression(), 0, -1)
	srb, _ := parseBatch(same)
	if !run.fits(same, &srb) {
		t.Error("the next lz4 batch does not fit the run")
	}
	run.bytes = coalesceMaxBytes - len(same) + 1
	if run.fits(same, &srb) {
		t.Error("a run grows beyond coalesceMaxBytes")
	}
	gap := makeBatch(t, 2, 1, sampleRecords(1), kgo.Lz4Compression(), 0, -1)
	grb, _ := parseBatch(gap)
	run.bytes = 0
	if run.fits(gap, &grb) {
		t.Error("a batch after a gap fits the run")
	}

	txn := func(base, pid int64, epoch int16) ([]byte, kmsg.RecordBatch) {
		b := makeBatch(t, base, 1, sampleRecords(1), kgo.Lz4Compression(), attrTransactional, -1)
		binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
		binary.BigEndian.PutUint16(b[offProducerEpch:], uint16(epoch))
		rb, err := parseBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		return b, rb
	}
	tb, trb := txn(1, 7, 2)
	if !coalescible(tb, &trb) {
		t.Fatal("a small transactional batch is not coalescible")
	}
	if run.fits(tb, &trb) {
		t.Error("a transactional batch fits a run of plain batches")
	}
	var trun coalesceRun
	trun.add(tb, &trb)
	if !trun.txn() {
		t.Error("a run of transactional batches is not transactional")
	}
	for _, tt := range []struct {
		name  string
		pid   int64
		epoch int16
		fits  bool
	}{{"same producer", 7, 2, true}, {"another producer", 8, 2, false}, {"another epoch", 7, 3, false}} {
		b, rb := txn(2, tt.pid, tt.epoch)
		if trun.fits(b, &rb) != tt.fits {
			t.Errorf("%s: fits = %v, want %v", tt.name, !tt.fits, tt.fits)
		}
	}
	plain := makeBatch(t, 2, 1, sampleRecords(1), kgo.Lz4Compression(), 0, -1)
	if prb, _ := parseBatch(plain); trun.fits(plain, &prb) {
		t.Error("a plain batch fits a run of transactional batches")
	}
}

// TestCoalesceSmallBatches mirrors one-record batches of every codec: by
// default they land merged (same records, offsets and timestamps, fewer
// batches, counted in the metrics); with KeepBatchBoundaries every batch
// lands as it was.
func TestCoalesceSmallBatches(t *testing.T) {
	topics := map[string]int32{}
	for _, c := range codecs {
		topics["small-"+c.name] = 2
		topics["kept-"+c.name] = 2
	}
	e := newTestEnv(t, 1, topics)
	parts := []int32{0, 1}
	for _, c := range codecs {
		e.produce(e.producer(c.codec), "small-"+c.name, parts, 0, 150, 1)
		e.produce(e.producer(c.codec), "kept-"+c.name, parts, 0, 60, 1)
	}
	m := e.newManager()
	if err := m.SetMirror("kept", []kgo.Opt{kgo.SeedBrokers(e.src.ListenAddrs()...)}, MirrorSettings{KeepBatchBoundaries: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range codecs {
		startAll(t, m, "small-"+c.name, parts)
		for _, p := range parts {
			if err := m.Start(Partition{Mirror: "kept", Topic: "kept-" + c.name, Partition: p}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "small-" + c.name
			e.waitCaughtUp(m, topic, parts)
			if n := e.compareTopic(topic); n != 300 {
				t.Fatalf("compared %d records, want 300", n)
			}
			var coalesced int
			for _, p := range parts {
				n, merged := e.compareBatches(topic, p, 0, false)
				if n != 150 {
					t.Fatalf("%d source batches, want 150 (one per record)", n)
				}
				coalesced += merged
			}
			if coalesced == 0 {
				t.Fatal("no batch was coalesced")
			}
			if got := metricValue(t, m.met.coalesced.WithLabelValues(testMirror, topic)); got != float64(coalesced) {
				t.Fatalf("sidemirror_coalesced_source_batches_total = %v, the destination holds %d coalesced source batches", got, coalesced)
			}
			if got := metricValue(t, m.met.coalescedInto.WithLabelValues(testMirror, topic)); got == 0 || got >= float64(coalesced) {
				t.Fatalf("sidemirror_coalesced_batches_total = %v for %d coalesced source batches", got, coalesced)
			}

			// The records were written with timestamps of 2023: the
			// latency from their timestamps is at least their age.
			var d dto.Metric
			if err := m.met.e2eLatency.WithLabelValues(testMirror).(prometheus.Metric).Write(&d); err != nil {
				t.Fatal(err)
			}
			age := time.Since(record(topic, 0, 150).Timestamp).Seconds() - 60
			if h := d.Histogram; h.GetSampleCount() == 0 || h.GetSampleSum()/float64(h.GetSampleCount()) < age {
				t.Fatalf("sidemirror_end_to_end_latency_seconds: %d samples, sum %v; every sample should be at least %.0f s", h.GetSampleCount(), h.GetSampleSum(), age)
			}

			kept := "kept-" + c.name
			testwait.For(t, waitTimeout, kept+" caught up", func() bool {
				dst := e.offsets(e.dstAdm, false, kept)
				return dst[0] == 60 && dst[1] == 60
			})
			e.compareTopic(kept)
			for _, p := range parts {
				if n, _ := e.compareBatches(kept, p, 0, true); n != 60 {
					t.Fatalf("%d batches kept, want 60", n)
				}
			}
		})
	}
}
