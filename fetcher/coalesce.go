package fetcher

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coalescing small batches (DESIGN.md in this directory, "Small batches").
// A destination broker spends about the same CPU on a one-record batch as on
// a batch of a thousand records (validation, the log append, replication to
// the followers, the index): a source written with linger 0 has one batch
// per record and caps any batch-for-batch mirror far below the destination's
// own ingest. So consecutive small data batches of a partition, as the
// fetch responses queued for it hold them (a run goes on into the next
// queued response), go to the destination as one batch: the same records
// (key, value, headers, absolute timestamps) at the same offsets, only the
// batch boundaries and the compressed bytes differ. Batches of
// coalesceSmallBytes or more are appended as they are, never recompressed.
// A transactional producer's consecutive small batches become one batch of
// its destination transaction the same way: a transaction of many small
// batches then costs one append instead of one per batch.
const (
	// coalesceSmallBytes: a source batch smaller than this may be merged
	// with its neighbours.
	coalesceSmallBytes = 16 << 10
	// coalesceMaxBytes bounds the source batch bytes merged into one
	// destination batch, well under Kafka's default max.message.bytes
	// (1 MiB): merged records never take more room than their batches did,
	// apart from a few bytes of offset and timestamp deltas per record,
	// which the dropped batch headers more than make up for.
	coalesceMaxBytes = 256 << 10
)

// coalesceRun is a run of consecutive small data batches of one partition
// waiting to be appended as one batch. It belongs to the driver goroutine.
type coalesceRun struct {
	batches [][]byte
	attrs   int16 // every batch's attributes
	base    int64 // base offset of the first batch
	next    int64 // offset after the last batch
	bytes   int   // source batch bytes
	records int32
	// pid, epoch: the source producer of a run of transactional batches
	// (attrs has attrTransactional): its consecutive batches with no
	// marker between them belong to one transaction.
	pid   int64
	epoch int16
	// held: budget bytes of fetched responses the run went past, given
	// back once the run is appended (pipeline.hold).
	held int64
}

func (r *coalesceRun) empty() bool { return len(r.batches) == 0 }

// coalescible reports whether the inspected batch b (actionAppend or
// actionTxn) may join a run: small, with CreateTime timestamps (a
// LogAppendTime batch's record timestamps are not its records' times), not
// a control batch.
func coalescible(b []byte, rb *kmsg.RecordBatch) bool {
	return len(b) < coalesceSmallBytes && rb.Attributes&(attrLogAppendTime|attrControl) == 0
}

// fits reports whether b (coalescible, at the run's next offset) can join
// the run: same attributes, and for transactional batches the same source
// producer ID and epoch. A producer's consecutive transactional batches
// (nothing else between them, no marker in particular) are in one
// transaction, which a marker ends; the run is appended in that
// transaction.
func (r *coalesceRun) fits(b []byte, rb *kmsg.RecordBatch) bool {
	return r.empty() || (rb.Attributes == r.attrs && rb.FirstOffset == r.next && r.bytes+len(b) <= coalesceMaxBytes &&
		(r.attrs&attrTransactional == 0 || rb.ProducerID == r.pid && rb.ProducerEpoch == r.epoch))
}

// txn reports whether the run holds transactional batches.
func (r *coalesceRun) txn() bool { return r.attrs&attrTransactional != 0 }

func (r *coalesceRun) add(b []byte, rb *kmsg.RecordBatch) {
	if r.empty() {
		r.attrs, r.base = rb.Attributes, rb.FirstOffset
		r.pid, r.epoch = rb.ProducerID, rb.ProducerEpoch
	}
	r.batches = append(r.batches, b)
	r.next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
	r.bytes += len(b)
	r.records += rb.NumRecords
}

func (r *coalesceRun) reset() {
	clear(r.batches)
	*r = coalesceRun{batches: r.batches[:0]}
}

// coalesceBatches merges the checked, contiguous source batches of run
// (same attributes, no holes) into one v2 batch: record i of the result is
// the i-th record of the run with its offset delta and timestamp delta
// taken relative to the first batch's base offset and base timestamp, its
// attributes, key, value and headers byte for byte. The result has the
// run's attributes and codec, the first batch's base timestamp, the largest
// max timestamp and no producer (rewriteBatch sets it).
func coalesceBatches(run *coalesceRun) ([]byte, error) {
	var (
		plain   []byte
		first   kmsg.RecordBatch
		maxTS   int64
		records int32
	)
	for i, b := range run.batches {
		rb, err := parseBatch(b)
		if err != nil {
			return nil, err
		}
		h, err := decodeHoledBatch(b, &rb)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			first, maxTS = rb, rb.MaxTimestamp
			plain = make([]byte, 0, 2*run.bytes)
		}
		maxTS = max(maxTS, rb.MaxTimestamp)
		shift := int32(rb.FirstOffset - first.FirstOffset)
		for _, rec := range h.recs {
			plain = appendRecord(plain, rec.attrs, rb.FirstTimestamp+rec.tsDelta-first.FirstTimestamp, shift+rec.delta, rec.tail)
			records++
		}
	}
	if records != run.records || first.FirstOffset+int64(records) != run.next {
		return nil, fmt.Errorf("%w: batches %d..%d hold %d records, not %d", ErrCorruptBatch, run.base, run.next-1, records, run.next-run.base)
	}
	first.Length = int32(run.bytes - logOverhead)
	return encodeBatch(pooledZstd{}, &first, plain, records-1, maxTS), nil
}

// pooledZstd compresses with kgo's zstd compressor, which keeps a pool of
// encoders: every partition's driver coalesces concurrently, unlike the
// Manager's single filler encoder.
type pooledZstd struct{}

var zstdCompressor = sync.OnceValue(func() kgo.Compressor {
	c, _ := kgo.DefaultCompressor(kgo.ZstdCompression()) // cannot fail for a known codec
	return c
})

func (pooledZstd) EncodeAll(src, dst []byte) []byte {
	var buf bytes.Buffer
	out, _ := zstdCompressor().Compress(&buf, src)
	return append(dst, out...)
}

// batchMaxTimestamp returns the max timestamp field of a v2 batch.
func batchMaxTimestamp(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[35:])) }
