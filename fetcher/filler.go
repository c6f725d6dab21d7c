package fetcher

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Bounds of one filler batch (DESIGN.md D2): fillers are identical records,
// so they compress to almost nothing, but the broker still validates every
// record of a batch, so batches stay bounded.
const (
	fillerMaxRecords = 50_000
	fillerMaxBytes   = 8 << 20 // uncompressed records per batch
)

// decompressor decompresses source records for the one place that needs
// them: the first live record of a leading gap. kgo's handles every codec
// Kafka writes, including xerial-framed snappy from Java producers.
var decompressor = kgo.DefaultDecompressor()

// fillerRecord is the record that fillers copy: the first live record at or
// after the source log start offset.
type fillerRecord struct {
	Offset    int64 // source offset of the copied record
	Timestamp int64
	Key       []byte // nil = null
	Value     []byte // nil = null
	Headers   []kmsg.Header
	// InTxn is set when the record belongs to a source transaction, of
	// source producer ProducerID: fillers that copy it are appended in
	// that producer's destination transaction where they can, so that they
	// share its outcome (copies of an aborted record stay invisible to
	// read_committed consumers).
	InTxn      bool
	ProducerID int64
}

// firstLiveRecord decodes the batch b (parsed as rb, already checked) up to
// its first record at or after offset from, and returns a copy of it. This is
// the one place the fetcher decompresses.
func firstLiveRecord(b []byte, rb *kmsg.RecordBatch, from int64) (fillerRecord, error) {
	codec := rb.Attributes & attrCompression
	if codec > 4 {
		return fillerRecord{}, fmt.Errorf("%w: batch at offset %d has unknown compression codec %d", ErrCorruptBatch, rb.FirstOffset, codec)
	}
	raw, err := decompressor.Decompress(rb.Records, kgo.CompressionCodecType(codec))
	if err != nil {
		return fillerRecord{}, fmt.Errorf("%w: batch at offset %d does not decompress: %v", ErrCorruptBatch, rb.FirstOffset, err)
	}
	for i := int32(0); i < rb.NumRecords; i++ {
		length, n := kbin.Varint(raw)
		if n <= 0 || length < 0 || len(raw)-n < int(length) {
			break
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(raw[:n+int(length)]); err != nil {
			break
		}
		raw = raw[n+int(length):]
		off := rb.FirstOffset + int64(rec.OffsetDelta)
		if off < from {
			continue
		}
		ts := rb.FirstTimestamp + rec.TimestampDelta64
		if rb.Attributes&attrLogAppendTime != 0 {
			ts = rb.MaxTimestamp
		}
		fr := fillerRecord{Offset: off, Timestamp: ts, Key: cloneNullable(rec.Key), Value: cloneNullable(rec.Value),
			InTxn: rb.Attributes&attrTransactional != 0, ProducerID: rb.ProducerID}
		for _, h := range rec.Headers {
			fr.Headers = append(fr.Headers, kmsg.Header{Key: h.Key, Value: cloneNullable(h.Value)})
		}
		return fr, nil
	}
	return fillerRecord{}, fmt.Errorf("%w: batch at offset %d holds no readable record at or after offset %d", ErrCorruptBatch, rb.FirstOffset, from)
}

func cloneNullable(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// recordTail encodes what every filler copy shares after its offset delta:
// key, value and headers.
func (r *fillerRecord) recordTail() []byte {
	var t []byte
	t = kbin.AppendVarintBytes(t, r.Key)
	t = kbin.AppendVarintBytes(t, r.Value)
	t = kbin.AppendVarint(t, int32(len(r.Headers)))
	for _, h := range r.Headers {
		t = kbin.AppendVarintString(t, h.Key)
		t = kbin.AppendVarintBytes(t, h.Value)
	}
	return t
}

// fillersPerBatch returns how many copies of r one filler batch holds.
func (r *fillerRecord) fillersPerBatch() int {
	size := len(r.recordTail()) + 8 // + length, attributes, timestamp and offset deltas
	return max(1, min(fillerMaxRecords, fillerMaxBytes/size))
}

// buildFillerBatch returns a zstd-compressed v2 batch of n copies of r (same
// key, value, headers and timestamp) with offset deltas 0..n-1, create-time
// timestamps, and no producer (ID -1); rewriteBatch gives it the sidecar's.
func buildFillerBatch(enc *zstd.Encoder, r *fillerRecord, n int) []byte {
	tail := r.recordTail()
	records := make([]byte, 0, n*(len(tail)+8))
	for i := range n {
		var delta [binary.MaxVarintLen32]byte
		dn := len(kbin.AppendVarint(delta[:0], int32(i)))
		// Length counts attributes (1), the timestamp delta (varlong 0, 1
		// byte), the offset delta and the tail.
		records = kbin.AppendVarint(records, int32(2+dn+len(tail)))
		records = append(records, 0, 0) // attributes, timestamp delta 0
		records = kbin.AppendVarint(records, int32(i))
		records = append(records, tail...)
	}
	compressed := enc.EncodeAll(records, nil)

	b := make([]byte, batchHeaderSize, batchHeaderSize+len(compressed))
	binary.BigEndian.PutUint32(b[offLength:], uint32(batchHeaderSize-logOverhead+len(compressed)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], math.MaxUint32)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], 4) // zstd, create time
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))  // last offset delta
	binary.BigEndian.PutUint64(b[27:], uint64(r.Timestamp))
	binary.BigEndian.PutUint64(b[35:], uint64(r.Timestamp))
	binary.BigEndian.PutUint64(b[offProducerID:], math.MaxUint64) // -1
	binary.BigEndian.PutUint16(b[offProducerEpch:], math.MaxUint16)
	binary.BigEndian.PutUint32(b[offBaseSequence:], math.MaxUint32)
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	b = append(b, compressed...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// newFillerEncoder returns the zstd encoder for filler batches (default
// level; EncodeAll is safe for concurrent use).
func newFillerEncoder() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
}
