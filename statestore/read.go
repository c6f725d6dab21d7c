package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Reading a partition: ListOffsets for the log start offset and the last
// stable offset, then raw Fetch requests (read_committed) to the partition
// leader from the start until the fetch position reaches that end. Raw
// fetches, decoded by kgo.ProcessFetchPartition, tell the position after
// every response, including past control batches, aborted transactions and
// batches that compaction emptied, which a consumer client does not expose;
// so the read ends exactly at the end offset whatever lies at the tail.

const (
	fetchMaxWait      = 500 * time.Millisecond
	fetchMaxBytes     = 32 << 20
	fetchPartMaxBytes = 8 << 20
	progressEvery     = 5 * time.Second
	maxEmptyFetches   = 5
	retryBackoffMin   = 50 * time.Millisecond
	retryBackoffMax   = time.Second
)

// reader reads __mirror_state partitions through a client's raw requests.
type reader struct {
	cl  *kgo.Client
	log *zap.Logger
}

// transientError marks an error worth retrying after a fresh metadata
// lookup: a leader move, a broker connection, a timeout.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// classify wraps a Kafka or request error as transient when a retry may
// succeed.
func classify(ctx context.Context, err error) error {
	var ke *kerr.Error
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil, errors.Is(err, kgo.ErrClientClosed):
		return err
	case errors.As(err, &ke):
		if ke.Retriable {
			return &transientError{err}
		}
		return err
	default: // a broker connection or request failure
		return &transientError{err}
	}
}

// retry calls fn until it returns nil or an error that is not transient,
// backing off between attempts, until ctx ends.
func retry(ctx context.Context, log *zap.Logger, what string, fn func() error) error {
	backoff := retryBackoffMin
	for {
		err := fn()
		var te *transientError
		if !errors.As(err, &te) {
			return err
		}
		log.Debug("retrying", zap.String("operation", what), zap.Error(err))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("statestore: %s: %w (last error: %v)", what, ctx.Err(), te.err)
		case <-t.C:
		}
		backoff = min(2*backoff, retryBackoffMax)
	}
}

// topic returns the metadata of __mirror_state, or ErrTopicNotFound.
func (r *reader) topic(ctx context.Context) (kmsg.MetadataResponseTopic, error) {
	var found kmsg.MetadataResponseTopic
	err := retry(ctx, r.log, "metadata", func() error {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(TopicName)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = false
		resp, err := req.RequestWith(ctx, r.cl)
		if err != nil {
			return classify(ctx, err)
		}
		for _, t := range resp.Topics {
			if t.Topic == nil || *t.Topic != TopicName {
				continue
			}
			err := kerr.ErrorForCode(t.ErrorCode)
			switch {
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				return ErrTopicNotFound
			case err != nil:
				return classify(ctx, fmt.Errorf("statestore: metadata of %s: %w", TopicName, err))
			}
			found = t
			return nil
		}
		return ErrTopicNotFound
	})
	return found, err
}

// leader returns the leader of a partition and the topic ID, waiting while
// the partition has none.
func (r *reader) leader(ctx context.Context, partition int32) (leader int32, topicID [16]byte, err error) {
	err = retry(ctx, r.log, "find leader", func() error {
		leader, topicID, err = r.leaderOnce(ctx, partition)
		return err
	})
	return leader, topicID, err
}

func (r *reader) leaderOnce(ctx context.Context, partition int32) (int32, [16]byte, error) {
	t, err := r.topic(ctx)
	if err != nil {
		return 0, [16]byte{}, err
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return 0, [16]byte{}, fmt.Errorf("%w: %s-%d (the topic has %d partitions)", ErrNoSuchPartition, TopicName, partition, len(t.Partitions))
	}
	for _, p := range t.Partitions {
		if p.Partition != partition {
			continue
		}
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil && p.Leader < 0 {
			return 0, [16]byte{}, classify(ctx, err)
		}
		if p.Leader < 0 {
			return 0, [16]byte{}, &transientError{kerr.LeaderNotAvailable}
		}
		return p.Leader, t.TopicID, nil
	}
	return 0, [16]byte{}, fmt.Errorf("%w: %s-%d is missing from the metadata", ErrNoSuchPartition, TopicName, partition)
}

// listOffset lists one offset of a partition: timestamp -2 is the log start
// offset, -1 with isolation 1 (read_committed) the last stable offset.
func (r *reader) listOffset(ctx context.Context, partition int32, timestamp int64, isolation int8) (int64, error) {
	var offset int64
	err := retry(ctx, r.log, "list offsets", func() error {
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = TopicName
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = partition
		rp.Timestamp = timestamp
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, r.cl)
		if err != nil {
			return classify(ctx, err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.Topic != TopicName || p.Partition != partition {
					continue
				}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return classify(ctx, fmt.Errorf("statestore: listing offsets of %s-%d: %w", TopicName, partition, err))
				}
				offset = p.Offset
				return nil
			}
		}
		return &transientError{fmt.Errorf("statestore: %s-%d is missing from the ListOffsets response", TopicName, partition)}
	})
	return offset, err
}

// fetch issues one Fetch request for a partition to its leader.
func (r *reader) fetch(ctx context.Context, leader int32, topicID [16]byte, partition int32, offset int64) (*kmsg.FetchResponseTopicPartition, time.Duration, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(fetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = fetchMaxBytes
	req.IsolationLevel = 1 // read_committed
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = TopicName
	rt.TopicID = topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = fetchPartMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl.Broker(int(leader)))
	if err != nil {
		return nil, 0, classify(ctx, err)
	}
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, throttle, classify(ctx, err)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, throttle, classify(ctx, err)
			}
			return p, throttle, nil
		}
	}
	return nil, throttle, &transientError{fmt.Errorf("statestore: %s-%d is missing from the Fetch response", TopicName, partition)}
}

// read calls fn for every record of the partition, in offset order, from its
// log start offset to at least its last stable offset at the time of the
// call (read_committed: records of aborted transactions and control records
// are skipped). It returns the offset after the last record read.
func (r *reader) read(ctx context.Context, partition int32, fn func(*kgo.Record) error) (int64, error) {
	leader, topicID, err := r.leader(ctx, partition)
	if err != nil {
		return 0, err
	}
	start, err := r.listOffset(ctx, partition, -2, 0)
	if err != nil {
		return 0, err
	}
	end, err := r.listOffset(ctx, partition, -1, 1)
	if err != nil {
		return 0, err
	}
	if start >= end {
		return max(start, end), nil
	}

	var (
		offset       = start
		began        = time.Now()
		lastProgress = began
		records      int64
		empties      int
		decompressor = kgo.DefaultDecompressor()
		backoff      = retryBackoffMin
	)
	for offset < end {
		rp, throttle, err := r.fetch(ctx, leader, topicID, partition, offset)
		var te *transientError
		if errors.As(err, &te) {
			r.log.Debug("fetch failed; refreshing the leader", zap.Int32("partition", partition),
				zap.Int64("offset", offset), zap.Error(err))
			if err := sleep(ctx, max(backoff, throttle)); err != nil {
				return 0, fmt.Errorf("statestore: reading %s-%d at offset %d: %w (last error: %v)", TopicName, partition, offset, err, te.err)
			}
			backoff = min(2*backoff, retryBackoffMax)
			if leader, topicID, err = r.leader(ctx, partition); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("statestore: reading %s-%d at offset %d: %w", TopicName, partition, offset, err)
		}
		backoff = retryBackoffMin
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset:         offset,
			IsolationLevel: kgo.ReadCommitted(),
			Topic:          TopicName,
			Partition:      partition,
		}, rp, decompressor, nil)
		if fp.Err != nil {
			return 0, fmt.Errorf("%w: %s-%d at offset %d: %v", ErrMalformed, TopicName, partition, offset, fp.Err)
		}
		for _, rec := range fp.Records {
			if err := fn(rec); err != nil {
				return 0, err
			}
		}
		records += int64(len(fp.Records))
		if next > offset {
			offset, empties = next, 0
		} else {
			// Nothing at or after offset: either the end moved down (it
			// cannot, short of truncation) or the broker throttled us.
			empties++
			if empties >= maxEmptyFetches {
				if end, err = r.listOffset(ctx, partition, -1, 1); err != nil {
					return 0, err
				}
				if offset < end {
					return 0, fmt.Errorf("statestore: reading %s-%d: %d fetches at offset %d returned nothing below the end offset %d",
						TopicName, partition, empties, offset, end)
				}
				break
			}
			if err := sleep(ctx, max(retryBackoffMin, throttle)); err != nil {
				return 0, err
			}
		}
		if now := time.Now(); now.Sub(lastProgress) >= progressEvery {
			lastProgress = now
			r.log.Info("loading partition", zap.Int32("partition", partition), zap.Int64("offset", offset),
				zap.Int64("end-offset", end), zap.Int64("records", records), zap.Duration("elapsed", now.Sub(began)))
		}
	}
	if d := time.Since(began); d >= progressEvery {
		r.log.Info("loaded partition", zap.Int32("partition", partition), zap.Int64("start-offset", start),
			zap.Int64("next-offset", offset), zap.Int64("records", records), zap.Duration("elapsed", d))
	}
	return offset, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
