package fetcher

import (
	"context"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetQuery is one partition's look-up: the offset for timestamp ts (-2:
// log start, -1: log end or high watermark).
type offsetQuery struct {
	topic     string
	partition int32
	ts        int64
}

// offsetAnswer is a look-up's result: the offset, or the error of its
// partition (a *kerr.Error), of the request, or errMissingAnswer.
type offsetAnswer struct {
	offset int64
	err    error
}

// offsetBatcher gathers the ListOffsets look-ups of many partitions into
// few requests. Partitions that start together (a --start of thousands, a
// sidecar's restart, a leadership move) then share one request per broker
// instead of sending one each: a source ListOffsets also makes kgo load the
// metadata of the partition's topic to find its leader, the whole topic's
// for every partition, which at thousands of partitions cost seconds and
// hundreds of megabytes at once. A look-up goes at once when no request of
// the batcher is out; the look-ups that arrive while one is out go together
// in the next (one goroutine, run, sends them until none is pending). So a
// lone look-up (a transaction marker's) waits for nobody, and each waits for
// at most one request ahead of it. The requests run under the batcher's
// context, not the callers': a caller that gives up leaves the others'
// request alone.
type offsetBatcher struct {
	m    *Manager
	ctx  context.Context
	send func(ctx context.Context, qs []offsetQuery) map[offsetQuery]offsetAnswer

	mu      sync.Mutex
	pending map[offsetQuery][]chan offsetAnswer
	running bool // run is on its way: a look-up only joins the batch
}

func newOffsetBatcher(m *Manager, ctx context.Context, send func(context.Context, []offsetQuery) map[offsetQuery]offsetAnswer) *offsetBatcher {
	return &offsetBatcher{m: m, ctx: ctx, send: send, pending: make(map[offsetQuery][]chan offsetAnswer)}
}

// list returns the answer for q once the batch holding it is answered, or
// ctx's error if ctx ends first.
func (b *offsetBatcher) list(ctx context.Context, q offsetQuery) offsetAnswer {
	ch := make(chan offsetAnswer, 1) // the answer never waits for the caller
	b.mu.Lock()
	b.pending[q] = append(b.pending[q], ch)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start && !b.m.goFunc(b.run) {
		b.answerAll(offsetAnswer{err: ErrClosed})
	}
	select {
	case a := <-ch:
		return a
	case <-ctx.Done():
		return offsetAnswer{err: ctx.Err()}
	}
}

// run sends batches until none is pending.
func (b *offsetBatcher) run() {
	for {
		b.mu.Lock()
		batch := b.pending
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.pending = make(map[offsetQuery][]chan offsetAnswer)
		b.mu.Unlock()
		qs := make([]offsetQuery, 0, len(batch))
		for q := range batch {
			qs = append(qs, q)
		}
		answers := b.send(b.ctx, qs)
		for q, chs := range batch {
			a, ok := answers[q]
			if !ok {
				a = offsetAnswer{err: errMissingAnswer}
			}
			for _, ch := range chs {
				ch <- a
			}
		}
	}
}

// answerAll answers every pending look-up with a (the Manager is closing:
// no run can start).
func (b *offsetBatcher) answerAll(a offsetAnswer) {
	b.mu.Lock()
	batch := b.pending
	b.pending = make(map[offsetQuery][]chan offsetAnswer)
	b.running = false
	b.mu.Unlock()
	for _, chs := range batch {
		for _, ch := range chs {
			ch <- a
		}
	}
}

// listOffsetsRequests builds the requests for qs: one per timestamp, since
// Kafka refuses a partition named twice in one request.
func listOffsetsRequests(qs []offsetQuery, replicaID int32) []*kmsg.ListOffsetsRequest {
	byTS := make(map[int64]map[string][]int32)
	for _, q := range qs {
		if byTS[q.ts] == nil {
			byTS[q.ts] = make(map[string][]int32)
		}
		byTS[q.ts][q.topic] = append(byTS[q.ts][q.topic], q.partition)
	}
	var out []*kmsg.ListOffsetsRequest
	for ts, topics := range byTS {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = replicaID
		for topic, parts := range topics {
			slices.Sort(parts)
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = topic
			for _, p := range parts {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition = p
				rp.CurrentLeaderEpoch = -1
				rp.Timestamp = ts
				t.Partitions = append(t.Partitions, rp)
			}
			req.Topics = append(req.Topics, t)
		}
		out = append(out, req)
	}
	return out
}

// answerListOffsets records resp's answers for the partitions of req (at
// timestamp ts) in out; a request error err answers all of them.
func answerListOffsets(out map[offsetQuery]offsetAnswer, req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse, err error) {
	if err != nil {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				out[offsetQuery{t.Topic, p.Partition, p.Timestamp}] = offsetAnswer{err: err}
			}
		}
		return
	}
	var at int64 // one timestamp per request (listOffsetsRequests)
	if len(req.Topics) > 0 && len(req.Topics[0].Partitions) > 0 {
		at = req.Topics[0].Partitions[0].Timestamp
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			q := offsetQuery{t.Topic, p.Partition, at}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				out[q] = offsetAnswer{err: err}
				continue
			}
			out[q] = offsetAnswer{offset: p.Offset}
		}
	}
}

// sendLocalOffsets sends the look-ups of qs to the local broker, as
// ListOffsets from replica ID -2 (see debuggingReplicaID).
func (m *Manager) sendLocalOffsets(ctx context.Context, qs []offsetQuery) map[offsetQuery]offsetAnswer {
	out := make(map[offsetQuery]offsetAnswer, len(qs))
	for _, req := range listOffsetsRequests(qs, debuggingReplicaID) {
		resp, err := req.RequestWith(ctx, m.localBroker())
		answerListOffsets(out, req, resp, err)
	}
	return out
}

// sendSourceOffsets sends the look-ups of qs to the source, split by kgo
// into one request per partition leader (one metadata look-up for all of
// them); a broker's failure answers only its partitions.
func (mir *mirror) sendSourceOffsets(ctx context.Context, qs []offsetQuery) map[offsetQuery]offsetAnswer {
	out := make(map[offsetQuery]offsetAnswer, len(qs))
	for _, req := range listOffsetsRequests(qs, -1) {
		for _, shard := range mir.cl.RequestSharded(ctx, req) {
			sreq, ok := shard.Req.(*kmsg.ListOffsetsRequest)
			if !ok {
				continue
			}
			resp, _ := shard.Resp.(*kmsg.ListOffsetsResponse)
			if shard.Err == nil && resp == nil {
				shard.Err = errMissingAnswer
			}
			answerListOffsets(out, sreq, resp, shard.Err)
		}
	}
	return out
}
