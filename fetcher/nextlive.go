package fetcher

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NextLiveOffset returns the offset of the first record at or after offset
// at of a partition on the cluster of cl (a source cluster), skipping
// compaction holes and transaction markers, or at itself when there is no
// record after it yet.
//
// Group offset sync uses it for compacted topics: a consumer that committed
// an offset inside a hole resumes on the source at the next live record,
// while on the destination the hole holds fillers, copies of that record;
// committing the live record's offset on the destination makes the consumer
// read it once, as it would on the source.
func NextLiveOffset(ctx context.Context, cl *kgo.Client, topic string, partition int32, at int64) (int64, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	pd, ok := md.Topics[topic].Partitions[partition]
	if !ok || pd.Leader < 0 {
		return 0, fmt.Errorf("%s-%d has no leader", topic, partition)
	}
	const maxBytes = 1 << 20
	for offset := at; ; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 1, maxBytes, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.Partitions = append(rt.Partitions, newFetchPartition(partition, offset, maxBytes))
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(pd.Leader)).Request(ctx, &fetchRequest{req})
		if err != nil {
			return 0, fmt.Errorf("fetch %s-%d at %d: %w", topic, partition, offset, err)
		}
		fr := resp.(*kmsg.FetchResponse)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("fetch %s-%d at %d: %w", topic, partition, offset, errMissingAnswer)
		}
		rp := fr.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			return 0, fmt.Errorf("fetch %s-%d at %d: %w", topic, partition, offset, err)
		}
		raw, progressed := rp.RecordBatches, false
		for {
			b, err := nextBatch(raw)
			if err != nil {
				return 0, err
			}
			if b == nil {
				break
			}
			raw = raw[len(b):]
			next := batchNext(b)
			if next <= offset {
				continue
			}
			progressed = true
			live, found, err := firstLiveAtOrAfter(b, offset)
			if err != nil {
				return 0, err
			}
			if found {
				return live, nil
			}
			offset = next
		}
		if !progressed {
			return at, nil // nothing after at yet
		}
	}
}

// firstLiveAtOrAfter returns the offset of the first data record of batch b
// at or after from.
func firstLiveAtOrAfter(b []byte, from int64) (int64, bool, error) {
	rb, err := parseBatch(b)
	if err != nil {
		return 0, false, err
	}
	if rb.Attributes&attrControl != 0 || rb.NumRecords == 0 {
		return 0, false, nil
	}
	if int64(rb.NumRecords) == int64(rb.LastOffsetDelta)+1 { // no holes inside
		return max(from, rb.FirstOffset), true, nil
	}
	h, err := decodeHoledBatch(b, &rb)
	if err != nil {
		return 0, false, err
	}
	for _, r := range h.recs {
		if off := rb.FirstOffset + int64(r.delta); off >= from {
			return off, true, nil
		}
	}
	return 0, false, nil
}
