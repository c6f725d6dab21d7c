package fetcher

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzInspectBatches feeds arbitrary bytes, as a fetch response's record set,
// through the batch splitting, parsing and inspection that every fetched
// batch goes through, with an arbitrary expected offset.
//
// Invariant: nothing panics, whatever the input; and a batch that
// inspectBatch accepts for appending (1) re-serializes with
// kmsg.RecordBatch.AppendTo to exactly its input bytes, and (2) after
// rewriteBatch has a valid CRC32C, the new producer fields, and a records
// section byte-identical to the input's.
func FuzzInspectBatches(f *testing.F) {
	for i, c := range codecs {
		b := makeBatch(f, 100, 1700000000000, sampleRecords(3+i), c.codec, 0, -1)
		f.Add(b, int64(100))
		f.Add(append(b, b[:30]...), int64(100))
	}
	f.Add(makeBatch(f, 7, 1, sampleRecords(2), kgo.NoCompression(), attrTransactional, -1), int64(7))
	f.Add(makeBatch(f, 7, 1, sampleRecords(2), kgo.NoCompression(), 0, 5), int64(7))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, expected int64) {
		for rest := data; ; {
			b, err := nextBatch(rest)
			if err != nil || b == nil {
				return
			}
			rest = rest[len(b):]
			_ = batchNext(b)
			rb, action, err := inspectBatch(b, expected)
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
