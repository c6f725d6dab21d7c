package fetcher

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzInspectBatches feeds arbitrary bytes, as a fetch response's record set,
// through the batch splitting, parsing and inspection that every fetched
// batch goes through, with an arbitrary expected offset.
//
// Invariant: nothing panics, whatever the input; and a batch that
// inspectBatch accepts for appending (1) re-serializes with
// kmsg.RecordBatch.AppendTo to exactly its input bytes, and (2) after
// rewriteBatch has a valid CRC32C, the new producer fields, and a records
// section byte-identical to the input's. A batch with compaction holes
// (actionHoles) that the hole plan accepts rebuilds (with any next record
// for trailing holes) into a batch with a valid CRC32C, the source's offset
// range, and contiguous offset deltas 0..lastOffsetDelta.
func FuzzInspectBatches(f *testing.F) {
	for i, c := range codecs {
		b := makeBatch(f, 100, 1700000000000, sampleRecords(3+i), c.codec, 0, -1)
		f.Add(b, int64(100))
		f.Add(append(b, b[:30]...), int64(100))
	}
	f.Add(makeBatch(f, 7, 1, sampleRecords(2), kgo.NoCompression(), attrTransactional, -1), int64(7))
	f.Add(makeBatch(f, 7, 1, sampleRecords(2), kgo.NoCompression(), 0, 5), int64(7))
	f.Add([]byte{}, int64(0))
	for i, c := range codecs {
		recs := sampleRecords(4)
		for j := range recs {
			recs[j].offDelta = int32(1 + j*(2+i%2)) // holes inside, leading and trailing
		}
		f.Add(makeBatch(f, 100, 1700000000000, recs, c.codec, 0, 12), int64(100))
		f.Add(makeBatch(f, 100, 1700000000000, recs, c.codec, 0, 12), int64(95))
	}
	f.Add(makeBatch(f, 7, 1, nil, kgo.NoCompression(), 0, 5), int64(3))
	zst, err := newFillerEncoder()
	if err != nil {
		f.Fatal(err)
	}
	next := &fillerRecord{Offset: 1 << 40, Timestamp: 5, Key: []byte("k"), Value: []byte("v")}
	f.Fuzz(func(t *testing.T, data []byte, expected int64) {
		for rest := data; ; {
			b, err := nextBatch(rest)
			if err != nil || b == nil {
				return
			}
			rest = rest[len(b):]
			_ = batchNext(b)
			rb, action, err := inspectBatch(b, expected)
			if err == nil && action == actionHoles {
				checkHoles(t, zst, b, &rb, expected, next)
			}
			if err != nil || action != actionAppend {
				continue
			}
			if got := rb.AppendTo(nil); !bytes.Equal(got, b) {
				t.Fatalf("accepted batch re-serializes differently:\n in  %x\n out %x", b, got)
			}
			_, _ = firstLiveRecord(b, &rb, rb.FirstOffset)
			c := append([]byte(nil), b...)
			rewriteBatch(c, 42, 7, 1000)
			if !crcValid(c) {
				t.Fatal("CRC invalid after rewrite")
			}
			if !bytes.Equal(c[batchHeaderSize:], b[batchHeaderSize:]) {
				t.Fatal("rewrite changed the records section")
			}
			got, err := parseBatch(c)
			if err != nil || got.ProducerID != 42 || got.ProducerEpoch != 7 || got.FirstSequence != 1000 {
				t.Fatalf("rewritten batch: %+v, %v", got, err)
			}
		}
	})
}

// checkHoles plans the batch b with holes and checks every rebuilt batch.
func checkHoles(t *testing.T, zst *zstd.Encoder, b []byte, rb *kmsg.RecordBatch, expected int64, next *fillerRecord) {
	plan := newHolePlan()
	steps, _, err := plan.planBatch(b, rb, expected)
	if err != nil {
		return
	}
	var batches []*holedBatch
	for _, s := range steps {
		if s.kind == stepRebuild {
			batches = append(batches, s.batch)
		}
	}
	if plan.batch != nil {
		batches = append(batches, plan.batch)
	}
	for _, h := range batches {
		raw, copies, err := rebuildBatch(zst, h, next)
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		got, err := parseBatch(raw)
		if err != nil || !crcValid(raw) {
			t.Fatalf("rebuilt batch does not parse: %v", err)
		}
		if got.FirstOffset != 0 || got.LastOffsetDelta != h.rb.LastOffsetDelta || got.NumRecords != got.LastOffsetDelta+1 ||
			int(copies)+len(h.recs) != int(got.NumRecords) {
			t.Fatalf("rebuilt batch header %+v for source %+v, %d copies", got, h.rb, copies)
		}
		if _, err := decodeHoledBatch(raw, &got); err != nil {
			t.Fatalf("rebuilt batch: %v", err)
		}
	}
}
