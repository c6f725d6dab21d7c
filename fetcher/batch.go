package fetcher

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The v2 record batch header, as Kafka lays it out (all big endian):
//
//	 0 baseOffset           int64
//	 8 batchLength          int32  bytes after this field
//	12 partitionLeaderEpoch int32
//	16 magic                int8   2
//	17 crc                  uint32 CRC32C (Castagnoli) of bytes 21..end
//	21 attributes           int16
//	23 lastOffsetDelta      int32
//	27 baseTimestamp        int64
//	35 maxTimestamp         int64
//	43 producerId           int64
//	51 producerEpoch        int16
//	53 baseSequence         int32
//	57 recordCount          int32
//	61 records
//
// Old message sets (magic 0 and 1) share the first 17 bytes' framing: offset,
// size, crc (4 bytes at 12) and magic at 16.
const (
	offBaseOffset   = 0
	offLength       = 8
	offLeaderEpoch  = 12
	offMagic        = 16
	offCRC          = 17
	offAttributes   = 21
	offProducerID   = 43
	offProducerEpch = 51
	offBaseSequence = 53

	logOverhead     = 12 // baseOffset + batchLength
	batchHeaderSize = 61
	minBatchLength  = batchHeaderSize - logOverhead // 49

	attrCompression   = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// nextBatch splits the first batch (or old-format message) off raw, a record
// set as a fetch response carries it. It returns nil, nil when raw holds no
// complete batch: fetch responses may end with a partial batch, which is
// where we stop. A length field that cannot be a batch is corruption.
func nextBatch(raw []byte) ([]byte, error) {
	if len(raw) < logOverhead {
		return nil, nil
	}
	length := int32(binary.BigEndian.Uint32(raw[offLength:]))
	// 14 is the smallest v0 message (crc, magic, attributes, key and value
	// lengths); anything shorter is not a message of any format.
	if length < 14 {
		return nil, fmt.Errorf("%w: batch at offset %d has length %d", ErrCorruptBatch,
			int64(binary.BigEndian.Uint64(raw[offBaseOffset:])), length)
	}
	total := logOverhead + int(length)
	if len(raw) < total {
		return nil, nil // partial trailing batch
	}
	return raw[:total:total], nil
}

// batchBase returns the offset field of a batch or message: the base offset
// of a v2 batch, the (last) offset of an old-format message.
func batchBase(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// batchNext returns the offset that follows the batch b (which nextBatch
// returned): base + lastOffsetDelta + 1 for v2, offset + 1 for old formats,
// whose wrapper offset is the last inner offset.
func batchNext(b []byte) int64 {
	if len(b) >= batchHeaderSize && b[offMagic] == 2 {
		return batchBase(b) + int64(int32(binary.BigEndian.Uint32(b[23:]))) + 1
	}
	return batchBase(b) + 1
}

// parseBatch parses a complete v2 batch (as nextBatch returns it) into a
// kmsg.RecordBatch whose Records alias b. Old message formats are refused
// with ErrMessageFormat, a length that disagrees with len(b) with
// ErrCorruptBatch.
func parseBatch(b []byte) (kmsg.RecordBatch, error) {
	var rb kmsg.RecordBatch
	if len(b) <= offMagic {
		return rb, fmt.Errorf("%w: %d bytes are no record batch", ErrCorruptBatch, len(b))
	}
	if magic := int8(b[offMagic]); magic != 2 {
		return rb, fmt.Errorf("%w: batch at offset %d: message format v%d not supported yet (only v2 record batches are mirrored)",
			ErrMessageFormat, batchBase(b), magic)
	}
	if len(b) < batchHeaderSize || int(int32(binary.BigEndian.Uint32(b[offLength:]))) != len(b)-logOverhead {
		return rb, fmt.Errorf("%w: batch at offset %d has a broken length", ErrCorruptBatch, batchBase(b))
	}
	if err := rb.ReadFrom(b); err != nil {
		return rb, fmt.Errorf("%w: batch at offset %d: %v", ErrCorruptBatch, batchBase(b), err)
	}
	return rb, nil
}

// crcValid reports whether the batch's CRC32C matches its bytes from the
// attributes to the end.
func crcValid(b []byte) bool {
	return binary.BigEndian.Uint32(b[offCRC:]) == crc32.Checksum(b[offAttributes:], castagnoli)
}

// checkBatch applies the rules every source batch must pass before it is
// touched (b and rb as parseBatch returned them): the CRC32C must match and
// a record count beyond the batch's offset range is corruption. Compaction
// holes (fewer records than offsets, or none) pass. The error names the
// offset.
func checkBatch(b []byte, rb *kmsg.RecordBatch) error {
	if !crcValid(b) {
		return fmt.Errorf("%w: CRC32C mismatch in the batch at offset %d (stored %08x, computed %08x)",
			ErrCorruptBatch, rb.FirstOffset, uint32(rb.CRC), crc32.Checksum(b[offAttributes:], castagnoli))
	}
	if rb.LastOffsetDelta < 0 || rb.NumRecords < 0 || int64(rb.NumRecords) > int64(rb.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: batch at offset %d holds %d records for offsets %d..%d",
			ErrCorruptBatch, rb.FirstOffset, rb.NumRecords, rb.FirstOffset, rb.FirstOffset+int64(rb.LastOffsetDelta))
	}
	return nil
}

// batchAction is what to do with a source batch relative to the destination.
type batchAction int8

const (
	actionAppend batchAction = iota // base offset == expected, no holes: append it
	actionSkip                      // wholly below expected: already there
	actionHoles                     // compaction holes before or inside it: see holePlan
	actionTxn                       // a transactional batch at expected: replayed in its transaction
	actionMarker                    // a transaction marker, at or after expected: replayed with EndTxn
)

// inspectBatch decides what to do with the complete batch b when the
// destination's next offset is expected. It never modifies b. A batch that
// ends before expected is skipped (fetches may start inside a batch); any
// other batch must start at or after expected and pass checkBatch, or the
// error says why it cannot be mirrored. A batch that starts after expected
// (a hole between batches), has holes inside or is empty is actionHoles.
// Transactional batches without holes are actionTxn; transaction markers
// are actionMarker, also after a hole. A control batch the cleaner emptied
// (it keeps the last batch of a producer, without its records) is a hole.
func inspectBatch(b []byte, expected int64) (kmsg.RecordBatch, batchAction, error) {
	rb, err := parseBatch(b)
	if err != nil {
		return rb, 0, err
	}
	last := rb.FirstOffset + int64(rb.LastOffsetDelta)
	switch {
	case rb.LastOffsetDelta >= 0 && last < expected:
		return rb, actionSkip, nil
	case rb.FirstOffset < expected:
		return rb, 0, fmt.Errorf("%w: source batch %d..%d, destination log end offset %d; splitting batches is not supported",
			ErrBatchStraddle, rb.FirstOffset, last, expected)
	}
	if err := checkBatch(b, &rb); err != nil {
		return rb, 0, err
	}
	holes := rb.FirstOffset > expected || int64(rb.NumRecords) != int64(rb.LastOffsetDelta)+1
	switch {
	case rb.Attributes&attrControl != 0 && rb.NumRecords > 0:
		return rb, actionMarker, nil // a hole before it is the caller's to fill
	case holes:
		return rb, actionHoles, nil
	case rb.Attributes&attrTransactional != 0:
		return rb, actionTxn, nil
	}
	return rb, actionAppend, nil
}

// rewriteBatch turns the verified source batch b into the sidecar's own
// idempotent batch, in place: producer ID, epoch and base sequence are
// overwritten and the CRC32C recomputed. The base offset is set to 0 and the
// partition leader epoch to -1, as producers send them (the broker assigns
// both; neither is covered by the CRC). Attributes, timestamps and the
// records section are untouched: nothing is decompressed.
func rewriteBatch(b []byte, producerID int64, epoch int16, seq int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], math.MaxUint32) // -1
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offProducerEpch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// nextSequence advances a producer sequence by n records, wrapping past
// int32 max to 0 as Kafka does.
func nextSequence(seq, n int32) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}
