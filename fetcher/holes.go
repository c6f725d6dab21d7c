package fetcher

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Compaction holes (DESIGN.md D2, mirror.offsets=exact): every source offset
// that compaction emptied gets a copy of the next live source record (same
// key, value, headers, timestamp), so destination offsets stay identical to
// the source's.
//
//   - a hole between batches and the range of an empty batch (compaction keeps
//     those for producer state) become zstd filler batches (filler.go);
//   - holes inside a batch make the batch rebuilt: its live records are kept
//     byte for byte, every missing offset delta gets a copy of the next live
//     record at or after it, and the records are compressed again with the
//     source batch's codec. Trailing holes (after the batch's last live record)
//     copy the first live record of a later batch, so such a batch waits until
//     that record is fetched.

// rawRecord is one record of a decoded batch: what follows its length.
type rawRecord struct {
	attrs   byte
	tsDelta int64
	delta   int32  // offset delta
	tail    []byte // key, value and headers as encoded
}

// holedBatch is a source batch with holes inside, decoded for a rebuild.
type holedBatch struct {
	rb   kmsg.RecordBatch // header fields; Records is nil
	recs []rawRecord      // live records, by offset delta
}

func (h *holedBatch) last() int64 { return h.rb.FirstOffset + int64(h.rb.LastOffsetDelta) }

// trailing reports whether the batch ends with holes, whose copies need the
// next live record after it.
func (h *holedBatch) trailing() bool {
	return len(h.recs) == 0 || h.recs[len(h.recs)-1].delta < h.rb.LastOffsetDelta
}

// firstLive returns the batch's first live record as fillers copy it.
func (h *holedBatch) firstLive() (fillerRecord, error) {
	r := h.recs[0]
	ts := h.rb.FirstTimestamp + r.tsDelta
	if h.rb.Attributes&attrLogAppendTime != 0 {
		ts = h.rb.MaxTimestamp
	}
	fr := fillerRecord{Offset: h.rb.FirstOffset + int64(r.delta), Timestamp: ts,
		InTxn: h.rb.Attributes&attrTransactional != 0, ProducerID: h.rb.ProducerID}
	// The tail is key, value, headers: parse it back into a record.
	var rec kmsg.Record
	body := append([]byte{0, 0, 0}, r.tail...) // attributes, timestamp delta 0, offset delta 0
	full := kbin.AppendVarint(nil, int32(len(body)))
	if err := rec.ReadFrom(append(full, body...)); err != nil {
		return fr, fmt.Errorf("%w: batch at offset %d: record at offset %d: %v", ErrCorruptBatch, h.rb.FirstOffset, fr.Offset, err)
	}
	fr.Key, fr.Value = cloneNullable(rec.Key), cloneNullable(rec.Value)
	for _, hd := range rec.Headers {
		fr.Headers = append(fr.Headers, kmsg.Header{Key: hd.Key, Value: cloneNullable(hd.Value)})
	}
	return fr, nil
}

// decodeHoledBatch decompresses the checked batch b (parsed as rb) and splits
// its records. Offset deltas must increase strictly within
// 0..lastOffsetDelta, and there must be NumRecords records.
func decodeHoledBatch(b []byte, rb *kmsg.RecordBatch) (*holedBatch, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: batch at offset %d: %s", ErrCorruptBatch, rb.FirstOffset, fmt.Sprintf(format, args...))
	}
	codec := rb.Attributes & attrCompression
	if codec > 4 {
		return nil, corrupt("unknown compression codec %d", codec)
	}
	raw, err := decompressor.Decompress(rb.Records, kgo.CompressionCodecType(codec))
	if err != nil {
		return nil, corrupt("does not decompress: %v", err)
	}
	h := &holedBatch{rb: *rb, recs: make([]rawRecord, 0, rb.NumRecords)}
	h.rb.Records = nil
	prev := int32(-1)
	for i := int32(0); i < rb.NumRecords; i++ {
		length, n := kbin.Varint(raw)
		if n <= 0 || length < 1 || len(raw)-n < int(length) {
			return nil, corrupt("record %d is truncated", i)
		}
		body := raw[n : n+int(length)]
		raw = raw[n+int(length):]
		r := rawRecord{attrs: body[0]}
		body = body[1:]
		ts, tn := kbin.Varlong(body)
		if tn <= 0 {
			return nil, corrupt("record %d: bad timestamp delta", i)
		}
		body = body[tn:]
		od, on := kbin.Varint(body)
		if on <= 0 || od <= prev || od > rb.LastOffsetDelta {
			return nil, corrupt("record %d: offset delta %d out of order (previous %d, last %d)", i, od, prev, rb.LastOffsetDelta)
		}
		r.tsDelta, r.delta, r.tail = ts, od, body[on:]
		prev = od
		h.recs = append(h.recs, r)
	}
	if len(raw) != 0 {
		return nil, corrupt("%d bytes after its %d records", len(raw), rb.NumRecords)
	}
	return h, nil
}

// appendRecord appends one encoded record.
func appendRecord(dst []byte, attrs byte, tsDelta int64, delta int32, tail []byte) []byte {
	var hdr [1 + binary.MaxVarintLen64 + binary.MaxVarintLen32]byte
	h := append(hdr[:0], attrs)
	h = kbin.AppendVarlong(h, tsDelta)
	h = kbin.AppendVarint(h, delta)
	dst = kbin.AppendVarint(dst, int32(len(h)+len(tail)))
	dst = append(dst, h...)
	return append(dst, tail...)
}

// rebuildKeepCodecBytes: a rebuilt batch keeps the source batch's codec
// unless it would exceed both this (Kafka's default max.message.bytes) and
// the source batch's size; then it is zstd.
const rebuildKeepCodecBytes = 1 << 20

// compressors are kgo's, for the codecs a rebuilt batch is compressed with
// (zstd uses the Manager's encoder); safe for concurrent use.
var compressors = sync.OnceValue(func() [4]kgo.Compressor {
	var cs [4]kgo.Compressor
	for i, c := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression()} {
		cs[i+1], _ = kgo.DefaultCompressor(c) // cannot fail for a known codec
	}
	return cs
})

// rebuildBatch returns the batch h with every hole filled: a missing offset
// delta gets a copy of the next live record at or after it (attributes,
// timestamp delta, key, value, headers), trailing holes copies of next (the
// first live record after the batch; nil only if there are none). Live
// records are kept as they were. The result has contiguous offsets, the
// source batch's attributes, base timestamp and codec (zstd if that codec
// fails or makes the batch too large, see rebuildKeepCodecBytes), no producer (rewriteBatch sets it), and a max timestamp that is the
// source's unless trailing copies are later. It also returns the number of
// copies.
func rebuildBatch(zst interface{ EncodeAll(src, dst []byte) []byte }, h *holedBatch, next *fillerRecord) ([]byte, int32, error) {
	rb := &h.rb
	if h.trailing() && next == nil {
		return nil, 0, fmt.Errorf("rebuild of the batch at offset %d needs the next live record", rb.FirstOffset)
	}
	var nextTail []byte
	var nextTS int64
	if next != nil {
		nextTail = next.recordTail()
		nextTS = next.Timestamp - rb.FirstTimestamp
	}
	size, d := 0, int32(0) // 20: length, attributes, timestamp and offset deltas at most
	for _, r := range h.recs {
		size += int(r.delta-d+1) * (len(r.tail) + 20)
		d = r.delta + 1
	}
	size += int(rb.LastOffsetDelta+1-d) * (len(nextTail) + 20)
	records := make([]byte, 0, size)
	d = 0
	copies := int32(0)
	for _, r := range h.recs {
		for ; d < r.delta; d++ {
			records = appendRecord(records, r.attrs, r.tsDelta, d, r.tail)
			copies++
		}
		records = appendRecord(records, r.attrs, r.tsDelta, r.delta, r.tail)
		d++
	}
	maxTS := rb.MaxTimestamp
	for ; d <= rb.LastOffsetDelta; d++ {
		records = appendRecord(records, 0, nextTS, d, nextTail)
		copies++
		if rb.Attributes&attrLogAppendTime == 0 {
			maxTS = max(maxTS, next.Timestamp)
		}
	}

	return encodeBatch(zst, rb, records, rb.LastOffsetDelta, maxTS), copies, nil
}

// compactBatch returns the batch h with its holes removed: its live
// records with offset deltas 0..n-1 (translate mode, DESIGN.md D2), the
// source batch's attributes, timestamps and codec as in rebuildBatch.
func compactBatch(zst interface{ EncodeAll(src, dst []byte) []byte }, h *holedBatch) []byte {
	var records []byte
	for i, r := range h.recs {
		records = appendRecord(records, r.attrs, r.tsDelta, int32(i), r.tail)
	}
	return encodeBatch(zst, &h.rb, records, int32(len(h.recs))-1, h.rb.MaxTimestamp)
}

// encodeBatch compresses the plain records (offset deltas 0..lastDelta)
// with rb's codec and puts them in a v2 batch with rb's attributes and
// base timestamp and no producer (rewriteBatch sets it).
func encodeBatch(zst interface{ EncodeAll(src, dst []byte) []byte }, rb *kmsg.RecordBatch, records []byte, lastDelta int32, maxTS int64) []byte {
	attrs := rb.Attributes
	codec := kgo.CompressionCodecType(attrs & attrCompression)
	plain := records
	switch codec {
	case kgo.CodecNone:
	case kgo.CodecZstd:
		records = zst.EncodeAll(plain, nil)
	default:
		var buf bytes.Buffer
		out, used := compressors()[codec].Compress(&buf, plain)
		if used == codec && out != nil {
			records = out
		} else {
			codec = kgo.CodecZstd // the codec failed
		}
	}
	// Copies can make a sparse batch much larger than the source's (no
	// compression, or lz4 and snappy on long runs): beyond what the source
	// batch took and rebuildKeepCodecBytes, zstd keeps it small enough for
	// max.message.bytes.
	if codec != kgo.CodecZstd && batchHeaderSize+len(records) > max(int(rb.Length)+logOverhead, rebuildKeepCodecBytes) {
		codec = kgo.CodecZstd
	}
	if codec == kgo.CodecZstd && kgo.CompressionCodecType(attrs&attrCompression) != kgo.CodecZstd {
		records = zst.EncodeAll(plain, nil)
	}
	attrs = attrs&^attrCompression | int16(codec)

	b := make([]byte, batchHeaderSize, batchHeaderSize+len(records))
	binary.BigEndian.PutUint32(b[offLength:], uint32(batchHeaderSize-logOverhead+len(records)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], math.MaxUint32)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[23:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[27:], uint64(rb.FirstTimestamp))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[offProducerID:], math.MaxUint64) // -1
	binary.BigEndian.PutUint16(b[offProducerEpch:], math.MaxUint16)
	binary.BigEndian.PutUint32(b[offBaseSequence:], math.MaxUint32)
	binary.BigEndian.PutUint32(b[57:], uint32(lastDelta+1))
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// holePlan is what a stream has read from the source but not submitted,
// because it waits for the next live record: a batch whose trailing offsets
// need it (at most one, first), then a range of offsets that fillers close.
type holePlan struct {
	batch *holedBatch // starts at the pipeline's next offset; nil: none
	from  int64       // first offset of the filler range; -1: none
	end   int64       // the offset after everything pending
}

func newHolePlan() holePlan { return holePlan{from: -1} }

func (h *holePlan) pending() bool { return h.batch != nil || h.from >= 0 }

// cursor returns the next source offset the stream expects: after what is
// pending, else the pipeline's next offset.
func (h *holePlan) cursor(next int64) int64 {
	if h.pending() {
		return h.end
	}
	return next
}

// extend adds the offsets from..end-1 (from == cursor) to the filler range.
func (h *holePlan) extend(from, end int64) {
	if end <= from {
		return
	}
	if h.from < 0 {
		h.from = from
	}
	h.end = end
}

// flushBefore resolves what h holds and the hole from cursor up to offset
// to with copies of next, the next live record after to: a transaction
// marker at offset to cannot wait for that record to be planned.
func (h *holePlan) flushBefore(cursor, to int64, next *fillerRecord) []step {
	h.extend(cursor, to)
	var steps []step
	if h.batch != nil {
		steps = append(steps, step{kind: stepRebuild, base: h.batch.rb.FirstOffset, n: int64(h.batch.rb.LastOffsetDelta) + 1, batch: h.batch})
	}
	if h.from >= 0 && to > h.from {
		steps = append(steps, step{kind: stepFillers, base: h.from, n: to - h.from, fillerOf: next.Offset})
	}
	*h = newHolePlan()
	return steps
}

// step is one append a resolved plan or a batch turns into.
type step struct {
	kind     stepKind
	base     int64
	n        int64       // records (fillers: copies of rec)
	raw      []byte      // stepBatch: the source batch, untouched
	batch    *holedBatch // stepRebuild
	fillerOf int64       // stepFillers: offset of the copied record
}

type stepKind int8

const (
	stepBatch   stepKind = iota // append the source batch as is
	stepFillers                 // filler batches of copies of the next live record
	stepRebuild                 // a batch rebuilt with its holes filled
)

// planBatch decides what the checked source batch b (parsed as rb, starting
// at or after the cursor) turns into, given what h holds pending. It returns
// the steps to submit in order, all of which copy next (nil: no copies) —
// except the rebuilt batch's inside holes, which copy records of their own —
// or no steps if everything waits for a later live record; h is updated.
func (h *holePlan) planBatch(b []byte, rb *kmsg.RecordBatch, cursor int64) (steps []step, next *fillerRecord, err error) {
	h.extend(cursor, rb.FirstOffset) // a hole between batches
	if rb.NumRecords == 0 {          // an empty batch left by compaction
		h.extend(rb.FirstOffset, rb.FirstOffset+int64(rb.LastOffsetDelta)+1)
		return nil, nil, nil
	}
	var hb *holedBatch
	if int64(rb.NumRecords) != int64(rb.LastOffsetDelta)+1 {
		if hb, err = decodeHoledBatch(b, rb); err != nil {
			return nil, nil, err
		}
	}
	if h.pending() {
		var fr fillerRecord
		if hb != nil {
			fr, err = hb.firstLive()
		} else {
			fr, err = firstLiveRecord(b, rb, rb.FirstOffset)
		}
		if err != nil {
			return nil, nil, err
		}
		next = &fr
		if h.batch != nil {
			steps = append(steps, step{kind: stepRebuild, base: h.batch.rb.FirstOffset, n: int64(h.batch.rb.LastOffsetDelta) + 1, batch: h.batch})
		}
		if h.from >= 0 {
			steps = append(steps, step{kind: stepFillers, base: h.from, n: rb.FirstOffset - h.from, fillerOf: fr.Offset})
		}
		*h = newHolePlan()
	}
	switch {
	case hb == nil:
		steps = append(steps, step{kind: stepBatch, base: rb.FirstOffset, n: int64(rb.NumRecords), raw: b})
	case hb.trailing():
		h.batch, h.end = hb, hb.last()+1
	default:
		steps = append(steps, step{kind: stepRebuild, base: rb.FirstOffset, n: int64(rb.LastOffsetDelta) + 1, batch: hb})
	}
	return steps, next, nil
}

// liveAtOrAfter reports whether the checked batch b (parsed as rb) holds a
// record at or after offset from. Only a batch with holes inside is decoded
// for that; one it cannot decode answers true (firstLiveRecord reports why).
func liveAtOrAfter(b []byte, rb *kmsg.RecordBatch, from int64) bool {
	switch {
	case rb.NumRecords == 0:
		return false
	case int64(rb.NumRecords) == int64(rb.LastOffsetDelta)+1:
		return true
	}
	h, err := decodeHoledBatch(b, rb)
	return err != nil || rb.FirstOffset+int64(h.recs[len(h.recs)-1].delta) >= from
}
