package fetcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// debuggingReplicaID asks ListOffsets for the leader's log end offset
// instead of its high watermark: Kafka answers replica ID -2 (its
// DEBUGGING_REPLICA_ID) without an isolation level, and then LATEST means
// the log end offset. The two differ after an acks=all append that reached
// the leader's log but not all in-sync replicas (REQUEST_TIMED_OUT,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND); resuming from the high watermark would
// make the broker append our next batch at the wrong offset.
const debuggingReplicaID = -2

// listLocalLEO returns the destination log end offset of p from the local
// broker (ListOffsets, timestamp -1, batched with the look-ups of other
// partitions: offsets.go). It is the only resume point: never a cached
// value.
func (m *Manager) listLocalLEO(ctx context.Context, p Partition) (int64, error) {
	a := m.localOffsets.list(ctx, offsetQuery{p.Topic, p.Partition, -1})
	if a.err == nil {
		return a.offset, nil
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("destination ListOffsets for %s: %w", p, ctx.Err())
	}
	m.met.countError(opListOffsets, a.err)
	if ke, ok := errors.AsType[*kerr.Error](a.err); ok {
		return 0, localError("destination ListOffsets", p, ke)
	}
	return 0, fmt.Errorf("destination ListOffsets for %s: %w", p, a.err)
}

// deleteRecords moves the destination log start offset of p to offset.
func (m *Manager) deleteRecords(ctx context.Context, p Partition, offset int64) error {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = int32(m.cfg.produceTO.Milliseconds())
	t := kmsg.NewDeleteRecordsRequestTopic()
	t.Topic = p.Topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition = p.Partition
	rp.Offset = offset
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, m.localBroker())
	if err != nil {
		return fmt.Errorf("destination DeleteRecords(%d) for %s: %w", offset, p, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == p.Topic && rp.Partition == p.Partition {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return localError(fmt.Sprintf("destination DeleteRecords(%d)", offset), p, err)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("destination DeleteRecords(%d) for %s: %w", offset, p, errMissingAnswer)
}

// initProducerID asks the local broker for an idempotent producer ID. A
// broker that has just started answers COORDINATOR_LOAD_IN_PROGRESS until it
// holds a block of producer IDs (and NOT_COORDINATOR or
// COORDINATOR_NOT_AVAILABLE while it gets one): those are retried at once
// with a short backoff (txnRetry: 5 ms doubling to 200 ms, for up to 30 s)
// rather than failing the partition's round and waiting out its backoff.
func (m *Manager) initProducerID(ctx context.Context) (int64, int16, error) {
	var resp *kmsg.InitProducerIDResponse
	err := txnRetry(ctx, "destination InitProducerID", func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = nil
		req.TransactionTimeoutMillis = -1
		req.ProducerID = -1
		req.ProducerEpoch = -1
		var err error
		if resp, err = req.RequestWith(ctx, m.localBroker()); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if err == kerr.ClusterAuthorizationFailed || err == kerr.TopicAuthorizationFailed {
				return fmt.Errorf("%w (InitProducerID: %v)", ErrNotSuperUser, err)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	m.log.Info("idempotent producer ID assigned", zap.Int64("producer-id", resp.ProducerID), zap.Int16("producer-epoch", resp.ProducerEpoch))
	return resp.ProducerID, resp.ProducerEpoch, nil
}

// localError classifies an error code of the local broker for p.
func localError(what string, p Partition, err error) error {
	switch err {
	case kerr.NotLeaderForPartition:
		return fmt.Errorf("%w: %s for %s: %w", errNotLeader, what, p, err)
	case kerr.UnknownTopicOrPartition:
		return fmt.Errorf("%w: %s for %s: %w", errLocalUnknown, what, p, err)
	case kerr.TopicAuthorizationFailed:
		return fmt.Errorf("%w (%s for %s)", ErrNotSuperUser, what, p)
	}
	return fmt.Errorf("%s for %s: %w", what, p, err)
}

// localBroker is the destination broker beside this sidecar: the only one
// the Manager sends requests to.
func (m *Manager) localBroker() *kgo.Broker { return m.cfg.local.Broker(int(m.cfg.localID)) }
