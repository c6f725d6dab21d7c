package fetcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxProduceRequestBytes bounds the batches of one produce request, well
// under Kafka's socket.request.max.bytes (100 MiB). A single larger batch is
// still sent, alone.
const maxProduceRequestBytes = 16 << 20

// appender sends the partitions' batches to the local broker. Its goroutine
// (run) builds produce requests with at most one batch per partition (Kafka
// refuses more for v2 batches) and many partitions, and issues them strictly
// one after the other: it waits until kgo has serialized a request (see
// orderedProduce) before it issues the next, so requests reach the broker's
// produce connection in issue order and a partition's batches keep their
// sequence order with up to MaxInFlightPerPartition requests in flight.
// Responses are awaited on one goroutine per request.
type appender struct {
	m    *Manager
	wake chan struct{}

	mu     sync.Mutex // leaf lock
	closed bool
	queues map[*partition][]*appendItem // not yet sent, in order
	ready  []*partition                 // partitions with a non-empty queue, round robin
}

func newAppender(m *Manager) *appender {
	return &appender{m: m, wake: make(chan struct{}, 1), queues: make(map[*partition][]*appendItem)}
}

// submit queues it for sending.
func (a *appender) submit(it *appendItem) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		it.p.results <- appendResult{item: it, err: ErrClosed}
		return
	}
	q := a.queues[it.p]
	if len(q) == 0 {
		a.ready = append(a.ready, it.p)
	}
	a.queues[it.p] = append(q, it)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// cancel answers errCancelled for p's items that are not sent yet.
func (a *appender) cancel(p *partition) {
	a.mu.Lock()
	q := a.queues[p]
	delete(a.queues, p)
	if len(q) > 0 {
		for i, r := range a.ready {
			if r == p {
				a.ready = append(a.ready[:i:i], a.ready[i+1:]...)
				break
			}
		}
	}
	a.mu.Unlock()
	for _, it := range q {
		p.results <- appendResult{item: it, err: errCancelled}
	}
}

func (a *appender) run() {
	defer a.shutdown()
	for {
		select {
		case <-a.wake:
		case <-a.m.ctx.Done():
			return
		}
		for a.m.ctx.Err() == nil {
			t := a.m.thr
			if !t.limited() {
				req, items, _ := a.next(maxProduceRequestBytes, nil)
				if len(items) == 0 {
					break
				}
				a.send(req, items)
				continue
			}
			// A throttled request goes whenever the bucket is out of
			// debt; the partitions the throttle does not select go
			// meanwhile, never waiting for it. Batches are taken off
			// the queues only when they go, so a partition that stops
			// meanwhile can withdraw them.
			due := t.due()
			if due {
				if req, items, size := a.next(t.requestLimit(), a.m.throttledPartition); len(items) > 0 {
					t.take(size)
					a.send(req, items)
					continue
				}
			}
			if req, items, _ := a.next(maxProduceRequestBytes, a.m.unthrottledPartition); len(items) > 0 {
				a.send(req, items)
				continue
			}
			if due {
				break // nothing queued (a submit wakes the loop again)
			}
			// A submit or a new throttle setting (poke) ends the wait
			// early, to look again.
			t.wait(a.m.ctx, a.wake)
		}
	}
}

// poke makes the loop look at the queues and the throttle again.
func (a *appender) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// shutdown fails everything still queued: the Manager is closing.
func (a *appender) shutdown() {
	a.mu.Lock()
	a.closed = true
	queues := a.queues
	a.queues, a.ready = nil, nil
	a.mu.Unlock()
	for p, q := range queues {
		for _, it := range q {
			p.results <- appendResult{item: it, err: ErrClosed}
		}
	}
}

// next takes the head batch of each ready partition that only selects
// (nil: every one), round robin, into one request of at most limit bytes of
// batches (or one larger batch); it returns the request, its items and
// their bytes.
func (a *appender) next(limit int, only func(*partition) bool) (*kmsg.ProduceRequest, []*appendItem, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var (
		items   []*appendItem
		size    int
		keep    []*partition
		skipped []*partition // not served this time: they keep their turn
		i       int
		seen    = make(map[*partition]bool)
	)
	for i = 0; i < len(a.ready); i++ {
		p := a.ready[i]
		q := a.queues[p]
		if len(q) == 0 || seen[p] {
			continue // one batch per partition per request
		}
		seen[p] = true
		if only != nil && !only(p) {
			skipped = append(skipped, p)
			continue
		}
		// A transactional batch goes alone: the request names its
		// transactional ID, which the broker authorizes.
		if txn := q[0].txn != nil; txn && len(items) > 0 {
			skipped = append(skipped, p)
			continue
		}
		if len(items) > 0 && size+len(q[0].raw) > limit {
			break
		}
		items = append(items, q[0])
		size += len(q[0].raw)
		if len(q) == 1 {
			delete(a.queues, p)
		} else {
			a.queues[p] = q[1:]
			keep = append(keep, p)
		}
		if items[0].txn != nil {
			i++
			break
		}
	}
	// Partitions not reached or skipped keep their turn; served ones go to
	// the back.
	rest := a.ready[min(i, len(a.ready)):]
	a.ready = append(append(append(make([]*partition, 0, len(skipped)+len(rest)+len(keep)), skipped...), rest...), keep...)
	if len(items) == 0 {
		return nil, nil, 0
	}

	req := kmsg.NewPtrProduceRequest()
	if txn := items[0].txn; txn != nil {
		req.TransactionID = &txn.id
	}
	req.Acks = -1
	req.TimeoutMillis = int32(a.m.cfg.produceTO.Milliseconds())
	topics := make(map[string]int)
	for _, it := range items {
		ti, ok := topics[it.p.key.Topic]
		if !ok {
			ti = len(req.Topics)
			topics[it.p.key.Topic] = ti
			t := kmsg.NewProduceRequestTopic()
			t.Topic = it.p.key.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = it.p.key.Partition
		rp.Records = it.raw
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
	}
	return req, items, size
}

// send issues req and returns once kgo has serialized it (or it failed).
func (a *appender) send(req *kmsg.ProduceRequest, items []*appendItem) {
	op := &orderedProduce{ProduceRequest: req, written: make(chan struct{})}
	start := time.Now()
	ok := a.m.goFunc(func() {
		resp, err := a.m.localBroker().Request(a.m.ctx, op)
		op.release()
		a.m.met.appendLatency.Observe(time.Since(start).Seconds())
		a.deliver(items, resp, err)
	})
	if !ok {
		a.deliver(items, nil, ErrClosed)
		return
	}
	select {
	case <-op.written:
	case <-a.m.ctx.Done():
	}
}

// deliver hands each item its result.
func (a *appender) deliver(items []*appendItem, resp kmsg.Response, err error) {
	type tp struct {
		t string
		p int32
	}
	var answers map[tp]*kmsg.ProduceResponseTopicPartition
	if err == nil {
		pr, ok := resp.(*kmsg.ProduceResponse)
		if !ok {
			err = fmt.Errorf("fetcher: unexpected produce response type %T", resp)
		} else {
			answers = make(map[tp]*kmsg.ProduceResponseTopicPartition)
			for i := range pr.Topics {
				t := &pr.Topics[i]
				for j := range t.Partitions {
					answers[tp{t.Topic, t.Partitions[j].Partition}] = &t.Partitions[j]
				}
			}
		}
	}
	for _, it := range items {
		r := appendResult{item: it, err: err}
		if err == nil {
			ans := answers[tp{it.p.key.Topic, it.p.key.Partition}]
			switch {
			case ans == nil:
				r.err = errMissingAnswer
			case ans.ErrorCode != 0:
				r.err = kerr.ErrorForCode(ans.ErrorCode)
				if ans.ErrorMessage != nil && *ans.ErrorMessage != "" {
					r.err = fmt.Errorf("%w: %s", r.err, *ans.ErrorMessage)
				}
			default:
				r.base = ans.BaseOffset
			}
		} else if errors.Is(err, context.Canceled) {
			r.err = ErrClosed
		}
		it.p.results <- r
	}
}

// orderedProduce is a produce request that tells the appender when kgo has
// serialized it: kgo handles a broker's requests one at a time in the order
// they were issued, so a request issued after that point is written after
// this one. Being its own type (not *kmsg.ProduceRequest) also keeps kgo from
// overwriting Acks with the client's setting. Versions stop at 11: v12 tells
// the broker that the client adds partitions to transactions implicitly
// (KIP-890), which the transaction replay does not (see txnVersions), and
// v13 names topics by ID.
type orderedProduce struct {
	*kmsg.ProduceRequest
	once    sync.Once
	written chan struct{}
}

func (r *orderedProduce) MaxVersion() int16 { return min(r.ProduceRequest.MaxVersion(), 11) }

func (r *orderedProduce) AppendTo(dst []byte) []byte {
	dst = r.ProduceRequest.AppendTo(dst)
	r.release()
	return dst
}

func (r *orderedProduce) release() { r.once.Do(func() { close(r.written) }) }

// producerIdentity is the sidecar's idempotent producer ID and epoch; gen
// is the Manager's count of them when InitProducerID handed it out (0: the
// producer of the destination's last batch, adoptLastWriter).
type producerIdentity struct {
	id    int64
	epoch int16
	gen   uint64
}

// producerIDs hands out the Manager's producer identity: one from
// InitProducerID (null transactional ID) on the local broker, replaced when
// a partition reports that its appends with it failed.
type producerIDs struct {
	m   *Manager
	sem chan struct{} // one InitProducerID at a time, ctx-aware

	mu     sync.Mutex // leaf lock
	cur    *producerIdentity
	gen    uint64
	states map[Partition]producerState // of partitions not running now
}

func newProducerIDs(m *Manager) *producerIDs {
	return &producerIDs{m: m, sem: make(chan struct{}, 1), states: make(map[Partition]producerState)}
}

// load returns the producer state a partition left when it last stopped.
func (s *producerIDs) load(p Partition) producerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.states[p]
}

// save keeps a stopping partition's producer state for its next start.
func (s *producerIDs) save(p Partition, st producerState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[p] = st
}

// get returns the current identity, or a new one if there is none or the
// current one is one of avoid (a partition's appends with it failed, or the
// broker's sequence for it on the partition is unknown). Identities are
// compared by producer ID and epoch: a partition may continue the Manager's
// own producer after another driver did (adoptLastWriter).
func (s *producerIDs) get(ctx context.Context, avoid ...*producerIdentity) (*producerIdentity, error) {
	usable := func() *producerIdentity {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur == nil {
			return nil
		}
		for _, a := range avoid {
			if a != nil && a.id == s.cur.id && a.epoch == s.cur.epoch {
				return nil
			}
		}
		return s.cur
	}
	if id := usable(); id != nil {
		return id, nil
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.sem }()
	if id := usable(); id != nil {
		return id, nil // another partition renewed it meanwhile
	}
	pid, epoch, err := s.m.initProducerID(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.cur = &producerIdentity{id: pid, epoch: epoch, gen: s.gen}
	return s.cur, nil
}

// generation returns how many identities InitProducerID has handed out.
func (s *producerIDs) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}
