package fetcher

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFirstLiveRecord(t *testing.T) {
	recs := sampleRecords(10)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := makeBatch(t, 200, 1700000000000, recs, c.codec, 0, -1)
			rb, err := parseBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, from := range []int64{0, 200, 203, 209} {
				idx := max(0, int(from-200))
				got, err := firstLiveRecord(b, &rb, from)
				if err != nil {
					t.Fatalf("from %d: %v", from, err)
				}
				want := recs[idx]
				if got.Offset != 200+int64(idx) || got.Timestamp != 1700000000000+want.tsDelta {
					t.Fatalf("from %d: offset %d timestamp %d", from, got.Offset, got.Timestamp)
				}
				if !sameBytes(got.Key, want.key) || !sameBytes(got.Value, want.value) || !sameHeaders(got.Headers, want.headers) {
					t.Fatalf("from %d: record %+v, want %+v", from, got, want)
				}
			}
			if _, err := firstLiveRecord(b, &rb, 210); err == nil {
				t.Fatal("no record at 210, want an error")
			}
		})
	}
}

func TestBuildFillerBatch(t *testing.T) {
	enc, err := newFillerEncoder()
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	tests := []struct {
		name string
		rec  fillerRecord
		n    int
	}{
		{"key value headers", fillerRecord{Timestamp: 1700000000123, Key: []byte("k"), Value: []byte("some value"),
			Headers: []kmsg.Header{{Key: "a", Value: []byte("1")}, {Key: "null", Value: nil}}}, 1000},
		{"null key and value", fillerRecord{Timestamp: 5}, 3},
		{"single", fillerRecord{Timestamp: 9, Key: []byte{}, Value: []byte("x")}, 1},
		{"many (varint deltas of several sizes)", fillerRecord{Timestamp: 1, Value: []byte("v")}, 50_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := buildFillerBatch(enc, &tt.rec, tt.n)
			rb, err := parseBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkBatch(b, &rb); err != nil {
				t.Fatalf("filler batch does not pass the checks of a source batch: %v", err)
			}
			if rb.Attributes != 4 {
				t.Fatalf("attributes %#x, want zstd (4) and create time", rb.Attributes)
			}
			if rb.NumRecords != int32(tt.n) || rb.LastOffsetDelta != int32(tt.n-1) {
				t.Fatalf("records %d, last offset delta %d", rb.NumRecords, rb.LastOffsetDelta)
			}
			if rb.FirstTimestamp != tt.rec.Timestamp || rb.MaxTimestamp != tt.rec.Timestamp {
				t.Fatalf("timestamps %d/%d", rb.FirstTimestamp, rb.MaxTimestamp)
			}
			_, recs := decodeRecords(t, b)
			if len(recs) != tt.n {
				t.Fatalf("decoded %d records, want %d", len(recs), tt.n)
			}
			for i, r := range recs {
				if r.OffsetDelta != int32(i) || r.TimestampDelta64 != 0 ||
					!sameBytes(r.Key, tt.rec.Key) || !sameBytes(r.Value, tt.rec.Value) || !sameHeaders(r.Headers, tt.rec.Headers) {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
			rewriteBatch(b, 1, 0, 0)
			if !crcValid(b) {
				t.Fatal("CRC invalid after rewrite")
			}
		})
	}
	// Large records: a filler batch stays within the uncompressed bound.
	big := fillerRecord{Value: bytes.Repeat([]byte("x"), 3<<20)}
	if n := big.fillersPerBatch(); n != 2 {
		t.Fatalf("fillersPerBatch of a 3 MiB record = %d, want 2", n)
	}
	small := fillerRecord{Value: []byte("x")}
	if n := small.fillersPerBatch(); n != fillerMaxRecords {
		t.Fatalf("fillersPerBatch of a tiny record = %d, want %d", n, fillerMaxRecords)
	}
}

func TestFirstLiveRecordLogAppendTime(t *testing.T) {
	b := makeBatch(t, 0, 100, sampleRecords(3), kgo.NoCompression(), attrLogAppendTime, -1)
	rb, err := parseBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	rb.MaxTimestamp = 999
	got, err := firstLiveRecord(b, &rb, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Timestamp != 999 {
		t.Fatalf("timestamp %d, want the batch's log append time 999", got.Timestamp)
	}
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func sameHeaders(a, b []kmsg.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !sameBytes(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}
