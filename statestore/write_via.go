package statestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// castagnoli is the CRC32C table of record batches.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeViaTimeout bounds how long the broker waits for the in-sync replicas
// in WriteVia.
const writeViaTimeout = 10 * time.Second

// WriteVia appends recs, in order and at once, to one partition of
// __mirror_state through broker only, and returns once all in-sync replicas
// have them. It sends one produce request and never retries, nor redirects
// the records to another broker: if broker does not lead the partition, the
// error is NOT_LEADER_OR_FOLLOWER and nothing was written.
//
// This is the fence of a mirror's coordinator (DESIGN D6), which is the
// sidecar beside the partition's leader: a coordinator whose broker lost
// the partition cannot write behind the back of its successor, which loaded
// the partition when its broker became the leader. (Write, which goes
// through a producer, would deliver such records to the new leader after
// the successor loaded the partition, and they would overwrite its newer
// states.) A record written before the leader changed is either committed,
// and then loaded by the successor, or truncated away.
func (s *Store) WriteVia(ctx context.Context, broker, partition int32, recs []Record) error {
	if err := s.checkWrite(partition); err != nil || len(recs) == 0 {
		return err
	}
	batch, err := encodeBatch(recs, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = int32(writeViaTimeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = TopicName
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	fail := func(err error) error {
		if errors.Is(err, kgo.ErrClientClosed) {
			err = ErrClosed
		}
		return fmt.Errorf("statestore: writing %d records to %s-%d through broker %d: %w", len(recs), TopicName, partition, broker, err)
	}
	resp, err := s.cl.Broker(int(broker)).Request(ctx, &produceByName{req})
	if err != nil {
		return fail(err)
	}
	pr, ok := resp.(*kmsg.ProduceResponse)
	if !ok || len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return fail(fmt.Errorf("unexpected produce response %T", resp))
	}
	if err := kerr.ErrorForCode(pr.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fail(err)
	}
	return nil
}

// produceByName is a produce request that names topics: versions stop at
// 12 (v13 names topics by ID). Being its own type also keeps kgo from
// replacing Acks with the client's setting.
type produceByName struct{ *kmsg.ProduceRequest }

func (r *produceByName) MaxVersion() int16 { return min(r.ProduceRequest.MaxVersion(), 12) }

// encodeBatch encodes recs as one uncompressed v2 record batch without a
// producer (no idempotence: writing a record twice is harmless, a key's
// last record wins), every record at timestamp nowMs.
func encodeBatch(recs []Record, nowMs int64) ([]byte, error) {
	const headerSize = 61 // base offset .. record count
	b := make([]byte, headerSize, headerSize+64*len(recs))
	var rec []byte
	for i, r := range recs {
		v, err := encodeValue(r)
		if err != nil {
			return nil, err
		}
		k := r.Key.AppendTo(nil)
		rec = rec[:0]
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, 0)        // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, int64(len(k)))
		rec = append(rec, k...)
		if v == nil { // a tombstone
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(v)))
			rec = append(rec, v...)
		}
		rec = binary.AppendVarint(rec, 0) // headers
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	// Base offset 0 (the broker assigns offsets), then the header.
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))    // batch length: after this field
	binary.BigEndian.PutUint32(b[12:], math.MaxUint32)      // partition leader epoch -1
	b[16] = 2                                               // magic
	binary.BigEndian.PutUint16(b[21:], 0)                   // attributes: no codec, create time
	binary.BigEndian.PutUint32(b[23:], uint32(len(recs)-1)) // last offset delta
	binary.BigEndian.PutUint64(b[27:], uint64(nowMs))       // base timestamp
	binary.BigEndian.PutUint64(b[35:], uint64(nowMs))       // max timestamp
	binary.BigEndian.PutUint64(b[43:], math.MaxUint64)      // producer ID -1
	binary.BigEndian.PutUint16(b[51:], math.MaxUint16)      // producer epoch -1
	binary.BigEndian.PutUint32(b[53:], math.MaxUint32)      // base sequence -1
	binary.BigEndian.PutUint32(b[57:], uint32(len(recs)))   // record count
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b, nil
}
