package fetcher

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// session fetches for every started partition one source broker leads, on
// one goroutine (run), one fetch request at a time, each for many
// partitions. A partition is left out of a request while it holds more than
// PartitionBufferBytes of fetched data (backpressure). The session ends when
// no partition is attached or its mirror closes.
type session struct {
	mir    *mirror
	broker int32
	log    *zap.Logger
	wake   chan struct{} // capacity 1

	parts map[*partition]struct{} // guarded by mir.mu

	hwAt time.Time // when the leaders' high watermarks of followed partitions were last asked (run's)
}

func newSession(mir *mirror, broker int32) *session {
	return &session{
		mir:    mir,
		broker: broker,
		log:    mir.log.With(zap.Int32("source-broker", broker)),
		wake:   make(chan struct{}, 1),
		parts:  make(map[*partition]struct{}),
	}
}

func (s *session) wakeup() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// wanted is a partition in a fetch request, with the generation of its
// fetch position at the time.
type wanted struct {
	p        *partition
	gen      uint64
	off      int64
	follower bool // fetched from a preferred read replica, not from the leader
}

// leaderHWInterval is how often a session that fetches partitions from a
// follower asks their leaders for the high watermark (ListOffsets): a
// follower's trails the leader's, and lag, catch-up and --wait must see the
// leader's.
const leaderHWInterval = time.Second

func (s *session) run() {
	defer s.mir.wg.Done()
	s.mir.m.budget.sessionStarted()
	defer s.mir.m.budget.sessionEnded()
	s.log.Debug("fetch session started")
	defer s.log.Debug("fetch session ended")
	for {
		parts := s.members()
		if parts == nil {
			return
		}
		req, want := s.build(parts)
		if len(want) == 0 {
			select {
			case <-s.wake:
			case <-s.mir.ctx.Done():
			}
			continue
		}
		// Room in the memory budget first: the fetch asks for no more.
		reserved := s.mir.m.budget.reserve(s.mir.ctx, int64(req.MaxBytes))
		req.MaxBytes = int32(max(reserved, 1))
		start := time.Now()
		resp, err := s.mir.cl.Broker(int(s.broker)).Request(s.mir.ctx, &fetchRequest{req})
		s.mir.m.met.fetchLatency.WithLabelValues(s.mir.name).Observe(time.Since(start).Seconds())
		if err == nil {
			fr := resp.(*kmsg.FetchResponse)
			if fr.ThrottleMillis > 0 {
				s.mir.m.thm.source.WithLabelValues(s.mir.name).Add(float64(fr.ThrottleMillis) / 1000)
			}
			if err = kerr.ErrorForCode(fr.ErrorCode); err == nil {
				s.deliver(fr, want, reserved)
				s.leaderHWs(want)
				continue
			}
		}
		s.mir.m.budget.release(reserved)
		if s.mir.ctx.Err() != nil {
			err = errMirrorClosed
		} else {
			s.mir.m.met.countError(opFetch, err)
			s.log.Info("fetch failed", zap.Error(err))
		}
		for _, w := range want {
			if w.follower {
				s.fail(w, fmt.Errorf("%w: source fetch of %s from broker %d: %w", errFollowerFetch, w.p.key, s.broker, err))
				continue
			}
			s.fail(w, fmt.Errorf("source fetch of %s from broker %d: %w", w.p.key, s.broker, err))
		}
	}
}

// members returns the attached partitions; nil when the session ends (none
// attached, or the mirror closed: then every partition is told to look for
// its leader again).
func (s *session) members() []*partition {
	mir := s.mir
	mir.mu.Lock()
	defer mir.mu.Unlock()
	if mir.closed {
		for p := range s.parts {
			mir.detachLocked(p, s)
			p.queueError(p.fetchGen(), fmt.Errorf("source fetch of %s: %w", p.key, errMirrorClosed))
		}
	}
	if len(s.parts) == 0 {
		if mir.sessions[s.broker] == s {
			delete(mir.sessions, s.broker)
		}
		return nil
	}
	parts := make([]*partition, 0, len(s.parts))
	for p := range s.parts {
		parts = append(parts, p)
	}
	return parts
}

// build makes a fetch request for the partitions that want data and have
// buffer room. Its MaxBytes is at most the sum of their partition limits.
func (s *session) build(parts []*partition) (*kmsg.FetchRequest, []wanted) {
	m := s.mir.m
	req := m.newFetchRequest()
	settings := s.mir.settings.Load()
	settings.applyTo(req)
	if settings != nil {
		// Only the sessions send the rack: a leader may answer it with a
		// preferred read replica instead of records (deliver), which the
		// one-off fetches of the leader (fetchOnce) must not get.
		req.Rack = settings.ClientRack
	}
	var want []wanted
	var expired []wanted
	var sum int64
	defer func() { req.MaxBytes = int32(min(int64(req.MaxBytes), max(sum, 1))) }()
	defer func() {
		for _, w := range expired {
			// Fetched from a follower for as long as it may be: ask
			// the leader again, which may name a replica again.
			if s.mir.move(w.p, s, w.gen, -1) {
				s.log.Debug("preferred read replica expired: fetching from the leader", zap.Stringer("partition", w.p.key))
			}
		}
	}()
	topics := make(map[string]int)
	now := time.Now()
	for _, p := range parts {
		off, maxBytes, gen, follower, ok := p.takeFetch(s, now)
		if !ok {
			if follower {
				expired = append(expired, wanted{p: p, gen: gen})
			}
			continue
		}
		ti, ok := topics[p.key.Topic]
		if !ok {
			ti = len(req.Topics)
			topics[p.key.Topic] = ti
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.key.Topic
			req.Topics = append(req.Topics, t)
		}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, newFetchPartition(p.key.Partition, off, maxBytes))
		want = append(want, wanted{p: p, gen: gen, off: off, follower: follower})
		sum += int64(maxBytes)
	}
	return req, want
}

// deliver hands each wanted partition its part of the response. Each
// partition's records are charged to the memory budget out of the fetch's
// reservation; what they did not use goes back at once. When several
// partitions got records, each gets its own copy, so that no partition's
// slice pins the whole response after the others appended theirs.
func (s *session) deliver(fr *kmsg.FetchResponse, want []wanted, reserved int64) {
	type tp struct {
		t string
		p int32
	}
	answers := make(map[tp]*kmsg.FetchResponseTopicPartition)
	withData := 0
	for i := range fr.Topics {
		t := &fr.Topics[i]
		for j := range t.Partitions {
			answers[tp{t.Topic, t.Partitions[j].Partition}] = &t.Partitions[j]
			if len(t.Partitions[j].RecordBatches) > 0 {
				withData++
			}
		}
	}
	var charged int64
	for _, w := range want {
		ans := answers[tp{w.p.key.Topic, w.p.key.Partition}]
		if ans == nil {
			w.p.fetchAnswered(w.gen, nil, -1, -1, 0)
			continue
		}
		if w.follower && ans.ErrorCode != 0 {
			// Any error of a follower sends the partition back to the
			// leader; what it means is the leader's to say.
			err := kerr.ErrorForCode(ans.ErrorCode)
			s.mir.m.met.countError(opFetch, err)
			s.fail(w, fmt.Errorf("%w: fetch of %s at offset %d from broker %d: %w", errFollowerFetch, w.p.key, w.off, s.broker, err))
			continue
		}
		if err := fetchError(w.p.key, w.off, ans.ErrorCode); err != nil {
			s.mir.m.met.countError(opFetch, err)
			s.fail(w, err)
			continue
		}
		if r := ans.PreferredReadReplica; r >= 0 && r != s.broker && !w.follower && len(ans.RecordBatches) == 0 {
			// The leader names a replica in the client's rack (KIP-392)
			// and returns no records: fetch from there. Its answer
			// carries the leader's high watermark.
			w.p.fetchAnswered(w.gen, nil, ans.HighWatermark, ans.LogStartOffset, 0)
			if s.mir.move(w.p, s, w.gen, r) {
				s.mir.m.met.redirects.WithLabelValues(s.mir.name).Inc()
				s.log.Debug("fetching from the preferred read replica", zap.Stringer("partition", w.p.key), zap.Int32("replica", r))
			}
			continue
		}
		records := ans.RecordBatches
		if withData > 1 && len(records) > 0 {
			records = append(make([]byte, 0, len(records)), records...)
		}
		n := int64(len(records))
		charged += n
		if charged > reserved {
			// The broker returns a first batch whole even when it is
			// larger than MaxBytes.
			s.mir.m.budget.force(charged - max(reserved, charged-n))
		}
		if w.follower {
			// A follower's high watermark trails the leader's: lag and
			// catch-up go by the leader's (leaderHWs). The records are
			// the same, below the follower's high watermark.
			s.mir.m.met.followerBytes.WithLabelValues(s.mir.name).Add(float64(n))
			w.p.fetchAnswered(w.gen, records, -1, -1, n)
			continue
		}
		w.p.fetchAnswered(w.gen, records, ans.HighWatermark, ans.LogStartOffset, n)
	}
	s.mir.m.budget.release(reserved - charged)
}

// leaderHWs asks the leaders for the high watermarks of the partitions of
// want that were fetched from this follower, at most every
// leaderHWInterval (kgo sends ListOffsets to each partition's leader). A
// failure keeps the last ones: the follower fetches go on either way.
func (s *session) leaderHWs(want []wanted) {
	if time.Since(s.hwAt) < leaderHWInterval {
		return
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	topics := make(map[string]int)
	parts := make(map[Partition]wanted)
	for _, w := range want {
		if !w.follower {
			continue
		}
		ti, ok := topics[w.p.key.Topic]
		if !ok {
			ti = len(req.Topics)
			topics[w.p.key.Topic] = ti
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = w.p.key.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = w.p.key.Partition
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = -1
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
		parts[w.p.key] = w
	}
	if len(parts) == 0 {
		return
	}
	sent := time.Now()
	s.hwAt = sent
	resp, err := req.RequestWith(s.mir.ctx, s.mir.cl)
	if err != nil {
		s.mir.m.met.countError(opListOffsets, err)
		s.log.Debug("leader high watermarks of followed partitions", zap.Error(err))
		return
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			w, ok := parts[Partition{Mirror: s.mir.name, Topic: rt.Topic, Partition: rp.Partition}]
			if !ok {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				s.mir.m.met.countError(opListOffsets, err)
				continue
			}
			w.p.leaderHW(w.gen, sent, rp.Offset)
		}
	}
}

// fail detaches the partition and queues err for its driver, unless the
// driver has moved on (a newer fetch position or another session).
func (s *session) fail(w wanted, err error) {
	mir := s.mir
	mir.mu.Lock()
	defer mir.mu.Unlock()
	if !w.p.fetchFailed(s, w.gen, err) {
		return
	}
	mir.detachLocked(w.p, s)
}

// fetchRequest caps Fetch at v12 (v13 names topics by ID) and tells kgo its
// long-poll time, as kgo does for *kmsg.FetchRequest.
type fetchRequest struct{ *kmsg.FetchRequest }

func (r *fetchRequest) MaxVersion() int16 { return min(r.FetchRequest.MaxVersion(), 12) }
func (r *fetchRequest) Timeout() int32    { return r.MaxWaitMillis }
func (r *fetchRequest) SetTimeout(int32)  {}

// newFetchRequest returns a sessionless read_uncommitted consumer fetch.
func (m *Manager) newFetchRequest() *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(m.cfg.fetchMaxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = m.cfg.fetchMax
	req.IsolationLevel = 0
	req.SessionID = 0
	req.SessionEpoch = -1
	return req
}

func newFetchPartition(partition int32, offset int64, maxBytes int32) kmsg.FetchRequestTopicPartition {
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = -1
	rp.FetchOffset = offset
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = maxBytes
	return rp
}

// The partition's side of the hand-over.

// takeFetch returns the partition's fetch position if session s should
// fetch it now, and marks the fetch in flight; follower tells that s is a
// preferred read replica. With !ok and follower, the time to fetch from the
// replica is over: the session moves the partition back to its leader.
func (p *partition) takeFetch(s *session, now time.Time) (offset int64, maxBytes int32, gen uint64, follower, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := &p.fetch
	if f.sess != s || !f.active || f.inflight {
		return 0, 0, 0, false, false
	}
	follower = f.replica >= 0 && f.replica == s.broker
	if follower && !now.Before(f.until) {
		return 0, 0, f.gen, true, false
	}
	if f.queued >= p.m.cfg.bufferBytes {
		return 0, 0, 0, false, false
	}
	f.inflight, f.sentAt = true, now
	return f.offset, f.maxBytes, f.gen, follower, true
}

// leaderHW takes the leader's high watermark hw of a partition fetched from
// a follower, asked at sent, if generation gen is still current.
func (p *partition) leaderHW(gen uint64, sent time.Time, hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen != p.fetch.gen || hw < 0 {
		return
	}
	p.srcHW = hw
	p.markLocked(sent, hw)
	p.updateLagLocked()
}

func (p *partition) fetchGen() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetch.gen
}

// fetchAnswered takes the data of a fetch for generation gen (nil records:
// nothing new); held bytes of it are charged to the memory budget, given
// back if the data is dropped. The next fetch starts after the last
// complete batch.
func (p *partition) fetchAnswered(gen uint64, records []byte, hw, lso int64, held int64) {
	p.mu.Lock()
	f := &p.fetch
	if gen != f.gen {
		p.mu.Unlock()
		p.m.budget.release(held)
		return // the driver reset its position meanwhile
	}
	f.inflight = false
	if hw >= 0 {
		p.srcHW = hw
	}
	if lso >= 0 {
		p.srcLSO = lso
	}
	p.fetchedLocked(f.sentAt, hw)
	p.updateLagLocked()
	queued := false
	if len(records) > 0 {
		next, complete := f.offset, false
		for rest := records; ; {
			b, err := nextBatch(rest)
			if err != nil || b == nil {
				break
			}
			next, complete = max(next, batchNext(b)), true
			rest = rest[len(b):]
		}
		if complete {
			f.queue = append(f.queue, fetched{offset: f.offset, records: records, held: held})
			f.queued += len(records)
			f.offset, f.maxBytes = next, cmp.Or(f.partMax, p.m.cfg.partMax)
			queued, held = true, 0
		} else {
			// Only a partial batch: the batch is larger than the
			// partition's fetch size (old brokers do not return an
			// oversized first batch whole). Ask for more next time.
			f.maxBytes = min(max(f.maxBytes, 1<<16)*2, max(cmp.Or(f.fetchMax, p.m.cfg.fetchMax), f.partMax))
		}
	}
	p.mu.Unlock()
	p.m.budget.release(held) // nothing kept
	if queued {
		p.wakeDriver()
	}
}

// fetchFailed queues a fetch error for generation gen from session s and
// stops fetching; false if the error is stale.
func (p *partition) fetchFailed(s *session, gen uint64, err error) bool {
	p.mu.Lock()
	f := &p.fetch
	if gen != f.gen || f.sess != s {
		if gen == f.gen {
			f.inflight = false
		}
		p.mu.Unlock()
		return false
	}
	f.inflight, f.active = false, false
	f.queue = append(f.queue, fetched{offset: f.offset, err: err})
	if !errors.Is(err, errMirrorClosed) { // a replaced client is no trouble of the source
		p.sourceTroubleLocked(err)
	}
	p.mu.Unlock()
	p.wakeDriver()
	return true
}

// queueError queues err for the driver if gen is still current.
func (p *partition) queueError(gen uint64, err error) {
	p.mu.Lock()
	f := &p.fetch
	if gen != f.gen {
		p.mu.Unlock()
		return
	}
	f.inflight, f.active = false, false
	f.queue = append(f.queue, fetched{offset: f.offset, err: err})
	p.mu.Unlock()
	p.wakeDriver()
}

func (p *partition) wakeDriver() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}
