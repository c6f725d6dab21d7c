package fetcher

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

func TestNextBatch(t *testing.T) {
	b1 := makeBatch(t, 10, 1000, sampleRecords(3), kgo.NoCompression(), 0, -1)
	b2 := makeBatch(t, 13, 1000, sampleRecords(2), kgo.ZstdCompression(), 0, -1)
	set := append(append([]byte(nil), b1...), b2...)
	tests := []struct {
		name    string
		raw     []byte
		want    []byte
		wantErr error
	}{
		{"empty", nil, nil, nil},
		{"shorter than the length field", set[:11], nil, nil},
		{"first of two", set, b1, nil},
		{"partial", b1[:len(b1)-1], nil, nil},
		{"exact", b2, b2, nil},
		{"length below any message", func() []byte {
			c := append([]byte(nil), b1...)
			binary.BigEndian.PutUint32(c[offLength:], 3)
			return c
		}(), nil, ErrCorruptBatch},
		{"negative length", func() []byte {
			c := append([]byte(nil), b1...)
			binary.BigEndian.PutUint32(c[offLength:], math.MaxUint32)
			return c
		}(), nil, ErrCorruptBatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nextBatch(tt.raw)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got %d bytes, want %d", len(got), len(tt.want))
			}
		})
	}
	if got := batchNext(b1); got != 13 {
		t.Fatalf("batchNext = %d, want 13", got)
	}
}

func TestParseBatch(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := makeBatch(t, 42, 1700000000000, sampleRecords(10), c.codec, 0, -1)
			rb, err := parseBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			if rb.FirstOffset != 42 || rb.NumRecords != 10 || rb.LastOffsetDelta != 9 || rb.Magic != 2 {
				t.Fatalf("header: %+v", rb)
			}
			if got := rb.AppendTo(nil); !bytes.Equal(got, b) {
				t.Fatal("re-serialized batch differs")
			}
			if err := checkBatch(b, &rb); err != nil {
				t.Fatalf("checkBatch: %v", err)
			}
		})
	}
}

func TestRewriteBatch(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := makeBatch(t, 1000, 1700000000000, sampleRecords(20), c.codec, 0, -1)
			orig := append([]byte(nil), b...)
			rewriteBatch(b, 777, 5, 123)

			if !crcValid(b) {
				t.Fatal("CRC invalid after rewrite")
			}
			if !bytes.Equal(b[batchHeaderSize:], orig[batchHeaderSize:]) {
				t.Fatal("records section changed")
			}
			// attributes, last offset delta, timestamps and count: untouched.
			if !bytes.Equal(b[offAttributes:offProducerID], orig[offAttributes:offProducerID]) ||
				!bytes.Equal(b[57:61], orig[57:61]) || b[offMagic] != 2 || !bytes.Equal(b[offLength:offLeaderEpoch], orig[offLength:offLeaderEpoch]) {
				t.Fatal("header fields outside the producer fields changed")
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			if rb.ProducerID != 777 || rb.ProducerEpoch != 5 || rb.FirstSequence != 123 {
				t.Fatalf("producer fields: id %d epoch %d seq %d", rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence)
			}
			if rb.FirstOffset != 0 || rb.PartitionLeaderEpoch != -1 {
				t.Fatalf("base offset %d, leader epoch %d: want 0, -1", rb.FirstOffset, rb.PartitionLeaderEpoch)
			}
			// The records still decode to the same thing.
			_, want := decodeRecords(t, orig)
			_, got := decodeRecords(t, b)
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
		})
	}
}

func TestCRCMismatch(t *testing.T) {
	tests := []struct {
		name   string
		mutate func([]byte)
	}{
		{"flipped record byte", func(b []byte) { b[len(b)-1] ^= 0x01 }},
		{"flipped attribute", func(b []byte) { b[offAttributes+1] ^= 0x40 }},
		{"flipped producer id", func(b []byte) { b[offProducerID+7] ^= 0x01 }},
		{"wrong stored crc", func(b []byte) { b[offCRC] ^= 0xff }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := makeBatch(t, 500, 1, sampleRecords(4), kgo.Lz4Compression(), 0, -1)
			tt.mutate(b)
			_, _, err := inspectBatch(b, 500)
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("err = %v, want ErrCorruptBatch", err)
			}
			if !strings.Contains(err.Error(), "offset 500") {
				t.Fatalf("reason %q does not name the offset", err)
			}
		})
	}
	// Changes outside the CRC's range do not matter.
	b := makeBatch(t, 500, 1, sampleRecords(4), kgo.Lz4Compression(), 0, -1)
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 99)
	if _, _, err := inspectBatch(b, 500); err != nil {
		t.Fatalf("leader epoch is not covered by the CRC: %v", err)
	}
}

func TestInspectBatch(t *testing.T) {
	recs := sampleRecords(5)
	oldFormat := func(magic byte) []byte {
		b := makeBatch(t, 100, 1, recs, kgo.NoCompression(), 0, -1)
		b[offMagic] = magic
		return b
	}
	tests := []struct {
		name       string
		batch      []byte
		expected   int64
		wantAction batchAction
		wantErr    error
		reason     string // substring of the error
	}{
		{"aligned", makeBatch(t, 100, 1, recs, kgo.SnappyCompression(), 0, -1), 100, actionAppend, nil, ""},
		{"already there", makeBatch(t, 100, 1, recs, kgo.NoCompression(), 0, -1), 105, actionSkip, nil, ""},
		{"straddles the expected offset", makeBatch(t, 100, 1, recs, kgo.NoCompression(), 0, -1), 102, 0, ErrBatchStraddle, "100..104"},
		{"gap before the batch", makeBatch(t, 100, 1, recs, kgo.NoCompression(), 0, -1), 90, actionHoles, nil, ""},
		{"transactional", makeBatch(t, 100, 1, recs, kgo.NoCompression(), attrTransactional, -1), 100, actionTxn, nil, ""},
		{"control", makeBatch(t, 100, 1, recs[:1], kgo.NoCompression(), attrControl|attrTransactional, -1), 100, actionMarker, nil, ""},
		{"transactional after a gap", makeBatch(t, 100, 1, recs, kgo.NoCompression(), attrTransactional, -1), 98, actionHoles, nil, ""},
		{"control after a gap", makeBatch(t, 100, 1, recs[:1], kgo.NoCompression(), attrControl|attrTransactional, -1), 99, actionMarker, nil, ""},
		{"control batch emptied by the cleaner", makeBatch(t, 100, 1, nil, kgo.NoCompression(), attrControl|attrTransactional, 0), 100, actionHoles, nil, ""},
		{"compaction holes inside", makeBatch(t, 100, 1, recs, kgo.NoCompression(), 0, 9), 100, actionHoles, nil, ""},
		{"empty batch left by compaction", makeBatch(t, 100, 1, nil, kgo.NoCompression(), 0, 3), 100, actionHoles, nil, ""},
		{"empty batch already there", makeBatch(t, 100, 1, nil, kgo.NoCompression(), 0, 3), 104, actionSkip, nil, ""},
		{"more records than offsets", makeBatch(t, 100, 1, recs, kgo.NoCompression(), 0, 3), 100, 0, ErrCorruptBatch, "5 records for offsets 100..103"},
		{"transactional with holes", makeBatch(t, 100, 1, recs, kgo.NoCompression(), attrTransactional, 9), 100, actionHoles, nil, ""},
		{"magic v0", oldFormat(0), 100, 0, ErrMessageFormat, "message format v0 not supported yet"},
		{"magic v1", oldFormat(1), 100, 0, ErrMessageFormat, "message format v1 not supported yet"},
		{"truncated header", makeBatch(t, 100, 1, recs, kgo.NoCompression(), 0, -1)[:40], 100, 0, ErrCorruptBatch, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := append([]byte(nil), tt.batch...)
			_, action, err := inspectBatch(tt.batch, tt.expected)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && action != tt.wantAction {
				t.Fatalf("action = %d, want %d", action, tt.wantAction)
			}
			if tt.reason != "" && !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("reason %q does not contain %q", err, tt.reason)
			}
			if !bytes.Equal(orig, tt.batch) {
				t.Fatal("inspectBatch modified the batch")
			}
			if err != nil && !IsFatal(err) {
				t.Fatalf("%v must fail the partition", err)
			}
		})
	}
}

func TestNextSequence(t *testing.T) {
	tests := []struct {
		seq, n, want int32
	}{
		{0, 1, 1},
		{0, 500, 500},
		{math.MaxInt32 - 1, 1, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 2, 5, 2},
	}
	for _, tt := range tests {
		if got := nextSequence(tt.seq, tt.n); got != tt.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", tt.seq, tt.n, got, tt.want)
		}
	}
}

func TestMarkerCommits(t *testing.T) {
	marker := func(typ byte) []byte {
		return makeBatch(t, 7, 1, []testRecord{{key: []byte{0, 0, 0, typ}, value: []byte{0, 0, 0, 0, 0, 0}}}, kgo.NoCompression(), attrControl|attrTransactional, -1)
	}
	for _, tt := range []struct {
		name    string
		batch   []byte
		commit  bool
		wantErr error
	}{
		{"commit", marker(1), true, nil},
		{"abort", marker(0), false, nil},
		{"not a transaction marker", marker(5), false, ErrCorruptBatch},
		{"two records", makeBatch(t, 7, 1, sampleRecords(2), kgo.NoCompression(), attrControl|attrTransactional, -1), false, ErrCorruptBatch},
		{"compressed", makeBatch(t, 7, 1, []testRecord{{key: []byte{0, 0, 0, 1}}}, kgo.GzipCompression(), attrControl|attrTransactional, -1), false, ErrCorruptBatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rb, err := parseBatch(tt.batch)
			if err != nil {
				t.Fatal(err)
			}
			commit, err := markerCommits(&rb)
			if !errors.Is(err, tt.wantErr) || (err == nil && commit != tt.commit) {
				t.Fatalf("markerCommits = %v, %v; want %v, %v", commit, err, tt.commit, tt.wantErr)
			}
		})
	}
}

func TestTransactionalID(t *testing.T) {
	a := TransactionalID(Partition{Mirror: "m", Topic: "t.1", Partition: 2}, 7)
	b := TransactionalID(Partition{Mirror: "m", Topic: "t", Partition: 12}, 7)
	if a != "sidemirror:m:t.1:2:7" || a == b {
		t.Fatalf("TransactionalID = %q and %q", a, b)
	}
	if !strings.HasPrefix(a, transactionalIDPrefix("m", "t.1")) || strings.HasPrefix(a, transactionalIDPrefix("m", "t")) {
		t.Fatal("a topic's prefix must not match another topic's IDs")
	}
}
