package fetcher

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/internal/partstate"
)

// partition is the driver of one mirrored partition: a goroutine (run) that
// owns the partition's state machine and append pipeline. The fetch session
// that fetches for it hands data over through fetch (under mu); the appender
// hands results over through results.
type partition struct {
	m          *Manager
	key        Partition
	log        *zap.Logger
	promLabels []*dto.LabelPair // of its per-partition series (metrics.go)

	ctx    context.Context // cancelled by Stop and Close
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned: nothing in flight

	results chan appendResult // capacity maxInFlight: never blocks the appender
	wake    chan struct{}     // capacity 1: fetched data or a fetch error queued

	// Owned by the driver goroutine.
	prod          producerState          // loaded from and saved to the Manager
	txns          map[int64]*txnProducer // by source producer ID; looked up again by every runOnce
	txnCl         *kgo.Client            // the partition's transaction client (txnClients)
	adds          []*txnAdd              // AddPartitionsToTxn sent ahead by this runOnce (waitAdds)
	completion    time.Duration          // moving average of how long transactions took to complete after EndTxn
	omap          []OffsetShift          // the offset map: translate mode's, loaded by every runOnce; exact mode's repeats (repeats.go), loaded once
	omapLoaded    bool                   // exact mode: omap was loaded by this driver, which alone adds to it since
	extra         int64                  // exact mode: destination minus source offset at the log end (markers written twice)
	mapErr        error                  // exact mode: why the offset map could not be loaded (only a confirmed resume point may start)
	attempt       int                    // consecutive retriable failures
	waits         int                    // consecutive attempts that found the local broker not leading yet
	appended      bool                   // the local broker acknowledged an append of this driver
	pendingDelete int64                  // DeleteRecords(this) once aligned; -1: none
	recovering    bool                   // started by Recover: checkResume accepts a differing transaction outcome

	mu      sync.Mutex // guards the fields below; taken after mirror.mu
	state   State
	lastErr string
	srcErr  bool // lastErr is a failed fetch or source look-up: the next successful fetch ends it
	perm    bool // FAILED for good: see PartitionStatus.Permanent
	srcHW   int64
	srcLSO  int64
	dstLEO  int64
	records int64
	bytes   int64
	fillers int64
	shift   int64 // source minus destination offset at the cursor (exact mode: -extra)
	fetch   fetchState
	fresh   freshness // lag in time, last fetch, reachability (freshness.go)
}

// producerState is where a partition stands with the sidecar's producer:
// which identity it appends with and the next sequence. The Manager keeps it
// across Stop and Start of the partition: the broker remembers the last
// sequences of a producer ID per partition, so a restarted partition must
// continue them (starting over at 0 would be a duplicate or out of order).
//
// After appends whose outcome is unknown (a dropped connection, a timeout,
// a retriable error), the identity is kept: batches at..upTo-1 went out with
// it, sequences seq, seq+1, ... at offsets at, at+1, ... (only the sidecar's
// idempotent batches are in flight together), and the broker may append any
// prefix of them, even after the driver read the LEO again. resume maps the
// LEO to the sequence the broker expects there, so a batch sent again
// carries the sequences it had: the broker answers a repeat of one of its
// last five batches as a duplicate, at its original offset, and refuses
// anything else out of order, instead of appending it twice.
//
// A LEO beyond every append this driver sent means that another driver
// appended meanwhile (leadership moved away and came back), and that driver
// may have continued ident (adoptLastWriter): the broker's sequence for it
// is then the last batch's, and a stale one could even repeat one of that
// driver's last five batches, which the broker would answer at their
// offsets. resume drops ident (left): the driver continues the last batch's
// producer, or takes an identity other than left.
type producerState struct {
	ident       *producerIdentity // nil: get a new one before appending
	stale       *producerIdentity // the identity whose append failed
	left        *producerIdentity // the identity given up because another driver appended after it
	seq         int32             // next base sequence for ident, at destination offset at
	at          int64             // see upTo
	upTo        int64             // > at: the outcome of appends at..upTo-1 with ident is unknown
	suspect     bool              // the batch at at was refused out of order: the broker's sequence differs
	established bool              // the broker has state for ident on this partition (see pipeline.room)
	lastAck     time.Time         // when a batch was last acknowledged
}

// resume sets the next sequence for the destination LEO leo. When the
// broker's sequence there cannot be known, it drops the identity: as stale
// after a truncation (leo below at) or when the batch at leo was already
// refused out of order with the sequence that the range gives, the driver
// then takes a new producer ID; as left when another writer appended
// beyond upTo, the driver then continues the last batch's producer if it
// can (adoptLastWriter).
func (ps *producerState) resume(leo int64) {
	if ps.ident != nil {
		switch {
		case leo < ps.at || (ps.suspect && leo == ps.at):
			ps.stale, ps.ident = ps.ident, nil
		case leo > ps.upTo:
			ps.left, ps.ident = ps.ident, nil
		case leo > ps.at:
			// Some of the unknown appends landed: the broker holds state
			// for ident here now.
			ps.seq = nextSequence(ps.seq, int32(leo-ps.at))
			ps.established, ps.lastAck = true, time.Now()
		}
	}
	ps.at, ps.upTo, ps.suspect = leo, leo, false
}

// fetchState is the hand-over between the partition's driver and the fetch
// session of its source leader.
type fetchState struct {
	sess     *session  // the session the partition is attached to; nil: none
	leader   int32     // the source leader the driver attached the partition to
	replica  int32     // the preferred read replica sess fetches from (KIP-392); -1: the leader
	until    time.Time // when fetching from replica ends: the leader is asked again
	gen      uint64    // bumped when the driver resets the position: stale data is dropped
	active   bool      // the driver wants data
	inflight bool      // a fetch for gen is out
	sentAt   time.Time // when the fetch in flight was sent
	offset   int64     // next offset to fetch
	maxBytes int32     // per-partition fetch size; grows when a batch does not fit
	partMax  int32     // the mirror's max.partition.fetch.bytes, from the last reset
	fetchMax int32     // the mirror's fetch.max.bytes, from the last reset
	queue    []fetched
	queued   int // bytes in queue
}

// fetched is one fetch response for the partition, or a fetch error.
type fetched struct {
	offset  int64 // the fetch offset
	records []byte
	err     error
	held    int64 // bytes of records charged to the memory budget (budget.go)
}

func newPartition(m *Manager, key Partition, counters [3]int64) *partition {
	p := &partition{
		m:             m,
		key:           key,
		log:           m.log.With(zap.String("mirror", key.Mirror), zap.String("topic", key.Topic), zap.Int32("partition", key.Partition)),
		promLabels:    partitionLabels(key),
		done:          make(chan struct{}),
		results:       make(chan appendResult, m.cfg.maxInFlight),
		wake:          make(chan struct{}, 1),
		pendingDelete: -1,
		state:         StateUnknown,
		srcHW:         -1,
		srcLSO:        -1,
		fetch:         fetchState{leader: -1, replica: -1},
		dstLEO:        -1,
		records:       counters[0],
		bytes:         counters[1],
		fillers:       counters[2],
	}
	now := time.Now()
	p.fresh = freshness{created: now, behind: true, behindAt: now}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.txnCl = m.txnCls[m.txnRR.Add(1)%uint32(len(m.txnCls))]
	p.prod = m.pids.load(key)
	m.met.partitions.WithLabelValues(StateUnknown.String()).Inc()
	return p
}

// status returns a snapshot.
func (p *partition) status() PartitionStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statusLocked()
}

func (p *partition) statusLocked() PartitionStatus {
	lag := int64(-1)
	if p.srcHW >= 0 && p.dstLEO >= 0 {
		lag = max(0, p.srcHW-p.dstLEO-p.shift)
	}
	now := time.Now()
	return PartitionStatus{
		Partition:               p.key,
		State:                   p.state,
		SourceHighWatermark:     p.srcHW,
		SourceLogStartOffset:    p.srcLSO,
		DestinationLogEndOffset: p.dstLEO,
		Lag:                     lag,
		LagTime:                 p.lagTimeLocked(now),
		LastFetch:               p.fresh.lastFetch,
		SourceUnreachableSince:  p.unreachableSinceLocked(now),
		LastError:               p.lastErr,
		Permanent:               p.perm && p.state == StateFailed,
		RecordsMirrored:         p.records,
		BytesMirrored:           p.bytes,
		FillerRecords:           p.fillers,
		FromFollower:            p.fetch.sess != nil && p.fetch.replica >= 0,
		Follower:                p.fetch.replica,
	}
}

// setState moves the partition as the partition state machine
// (internal/partstate) says event ev does, with reason as LastError when
// non-empty, and notifies; an event the table does not take from the
// current state changes nothing (STOPPED is final for a driver, FAILED
// yields only to STOPPED).
func (p *partition) setState(ev partstate.Event, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setStateLocked(ev, reason)
}

func (p *partition) setStateLocked(ev partstate.Event, reason string) {
	t := partstate.Next(p.state, ev)
	if !t.Changes() {
		return
	}
	st := t.To
	p.m.met.partitions.WithLabelValues(p.state.String()).Dec()
	if st != StateStopped {
		p.m.met.partitions.WithLabelValues(st.String()).Inc()
	}
	p.state = st
	if reason != "" {
		p.lastErr, p.srcErr = reason, false
	}
	p.m.notify.stateChanged(p.statusLocked())
}

// retire takes a FAILED partition that Start replaces out of the state
// gauge, without a notification: the replacement reports its own states.
func (p *partition) retire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m.met.partitions.WithLabelValues(p.state.String()).Dec()
	p.state = partstate.Next(p.state, partstate.Removed).To
}

// requestStop cancels the driver; a running partition shows STOPPING until
// the Manager removes it.
func (p *partition) requestStop() {
	p.mu.Lock()
	p.setStateLocked(partstate.Remove, "")
	p.mu.Unlock()
	p.cancel()
}

func (p *partition) setLastError(err error) {
	p.mu.Lock()
	p.lastErr, p.srcErr = err.Error(), false
	p.mu.Unlock()
}

// setSourceError shows a failed fetch or source look-up as the last
// error until a fetch succeeds again.
func (p *partition) setSourceError(err error) {
	p.mu.Lock()
	p.lastErr, p.srcErr = err.Error(), true
	p.mu.Unlock()
}

func (p *partition) setLEO(leo int64) {
	p.mu.Lock()
	p.dstLEO = leo
	p.updateLagLocked()
	p.mu.Unlock()
}

func (p *partition) setSourceOffsets(hw, lso int64) {
	p.mu.Lock()
	if hw >= 0 {
		p.srcHW = hw
	}
	if lso >= 0 {
		p.srcLSO = lso
	}
	p.updateLagLocked()
	p.mu.Unlock()
}

// updateLagLocked follows a move of the destination log end offset or the
// source high watermark: the lag in time and the catch-up log
// (freshness.go); the lag metrics are read at scrape time (metrics.go).
func (p *partition) updateLagLocked() {
	if p.state != StateStopped {
		p.progressLocked()
	}
}

// run drives the partition until it is stopped, fails, or loses local
// leadership. Every attempt (runOnce) starts from the destination LEO and
// drains its appends before returning.
func (p *partition) run() {
	defer close(p.done)
	defer func() { p.m.pids.save(p.key, p.prod) }()
	defer p.detach()
	p.setState(partstate.Align, "")
	p.log.Info("partition starting")
	for {
		err := p.runOnce()
		if p.ctx.Err() != nil {
			p.log.Info("partition stopped")
			return
		}
		switch {
		case p.notReady(err):
			// A partition the destination has just created or moved here
			// is refused until the broker's log for it is ready; the
			// reconciler stops the driver if the broker does not lead it
			// after all (DESIGN.md, "Not the leader yet").
			p.waits++
			d := p.m.backoffUpTo(p.waits, notReadyWaitMax)
			if p.waits == 1 {
				p.log.Info("the local broker does not lead the partition yet: waiting before the first append", zap.Error(err))
			}
			p.setLastError(err)
			if !sleepCtx(p.ctx, d) {
				return
			}
			continue
		case errors.Is(err, errNotLeader):
			p.detach()
			p.m.notLeader(p)
			return
		case IsFatal(err):
			p.detach()
			p.log.Error("partition failed", zap.Error(err))
			p.mu.Lock()
			p.perm = IsPermanent(err)
			p.mu.Unlock()
			p.setState(partstate.Fail, err.Error())
			return
		case errors.Is(err, errRealign):
			p.log.Info("source log start moved beyond the destination log end offset: realigning", zap.Error(err))
			p.attempt = 0
			continue
		case errors.Is(err, errRepeatRecorded):
			p.attempt = 0
			continue
		}
		p.attempt++
		d := p.m.backoff(p.attempt)
		p.log.Warn("retriable error: resuming from the destination log end offset",
			zap.Error(err), zap.Int("attempt", p.attempt), zap.Duration("backoff", d))
		p.setLastError(err)
		if !sleepCtx(p.ctx, d) {
			return
		}
	}
}

// notReadyWaitMax bounds the wait between the attempts of a partition
// whose local broker does not lead it yet: it appends within about that
// long of the broker becoming ready.
const notReadyWaitMax = time.Second

// notReady reports whether err says that the local broker does not lead
// the partition, or does not know it, before this driver's first append
// was acknowledged: a broker that has just become the leader, or has just
// created the partition, refuses it for a while. Later, NOT_LEADER means
// that leadership moved: the driver stops.
func (p *partition) notReady(err error) bool {
	return !p.appended && (errors.Is(err, errNotLeader) || errors.Is(err, errLocalUnknown))
}

// runOnce reads the destination LEO, aligns the partition with the source
// log start if needed, and mirrors until an error. It never returns with an
// append in flight.
func (p *partition) runOnce() error {
	ctx := p.ctx
	leo, err := p.m.listLocalLEO(ctx, p.key)
	if err != nil {
		return err
	}
	p.setLEO(leo)
	dLEO := leo // the destination's own offset, before repeats are taken off
	mir, err := p.m.mirror(p.key.Mirror)
	if err != nil {
		return err
	}
	if !mir.settings.Load().TranslateOffsets {
		// The pipeline works in source offsets: past markers the
		// destination wrote twice, the destination's are higher.
		p.loadRepeats(leo)
		leo -= p.extra
	}
	p.prod.resume(leo)
	if p.prod.ident == nil {
		adopted, err := p.adoptLastWriter(dLEO)
		if err != nil {
			return err
		}
		if !adopted {
			id, err := p.m.pids.get(ctx, p.prod.stale, p.prod.left)
			if err != nil {
				return err
			}
			p.prod.ident, p.prod.seq, p.prod.established = id, 0, false
			p.prod.left = nil
			p.log.Info("appending with a new producer ID", zap.Int64("producer-id", id.id))
		}
	}
	start, err := mir.listOffset(ctx, p.key, -2)
	if err != nil {
		if ctx.Err() == nil {
			p.sourceTrouble(err)
		}
		return err
	}
	p.setSourceOffsets(-1, start)
	if !mir.settings.Load().TranslateOffsets && leo > start {
		if err := p.checkResume(mir, leo, start); err != nil {
			if p.mapErr != nil && !errors.Is(err, errRepeatRecorded) {
				return fmt.Errorf("%w (%v): waiting until the mirror's coordinator answers", p.mapErr, err)
			}
			return err
		}
	} else if p.mapErr != nil && leo > 0 {
		return fmt.Errorf("%w: waiting until the mirror's coordinator answers", p.mapErr)
	}

	p.txns = make(map[int64]*txnProducer)
	pl := &pipeline{p: p, leo: leo, next: leo, seqAcked: p.prod.seq,
		established: p.prod.established && time.Since(p.prod.lastAck) < producerStateGrace}
	fetchFrom := leo
	if mir.settings.Load().TranslateOffsets {
		if p.m.cfg.offsetMaps == nil {
			return fmt.Errorf("%w: mirror %s translates offsets, but the data plane has no offset map store", ErrInvalidOption, p.key.Mirror)
		}
		if p.omap, err = p.m.cfg.offsetMaps.LoadOffsetMap(ctx, p.key); err != nil {
			return fmt.Errorf("loading the offset map of %s: %w", p.key, err)
		}
		p.omap = validShifts(p.omap, leo)
		// No fillers: the cursor starts where the map puts the LEO, or at
		// the source log start beyond it.
		pl.translate = true
		fetchFrom = max(sourceOffsetOf(p.omap, leo), start)
		p.setShift(pl, fetchFrom)
	} else if leo < start {
		p.setState(partstate.Align, "")
		fetchFrom, err = p.fillGap(pl, mir, leo, start)
	}
	if err == nil {
		if p.pendingDelete < 0 {
			p.setState(partstate.Aligned, "")
		}
		err = p.stream(pl, mir, fetchFrom)
	}
	p.pauseFetch()
	pl.drain(ctx.Err() != nil || pl.err != nil)
	p.waitAdds()
	pl.releaseAll()
	if pl.err != nil && !IsFatal(err) && !errors.Is(err, errNotLeader) {
		err = pl.err // an append failed: it decides what happens next
	}
	switch {
	case pl.renew:
		// The broker holds no usable state for our producer ID: continue
		// with a new one, from sequence 0.
		p.prod.stale, p.prod.ident = p.prod.ident, nil
	case pl.unsure:
		// Appends after the confirmed LEO may still land: the next
		// runOnce's LEO tells the sequence to continue with.
		p.prod.seq, p.prod.at, p.prod.upTo, p.prod.suspect = pl.seqAcked, pl.leo, pl.sentEnd, pl.suspect
	default:
		p.prod.seq, p.prod.at, p.prod.upTo = pl.seqAcked, pl.leo, pl.leo
	}
	p.prod.established = pl.established && !pl.renew
	return err
}

// fillGap closes a leading gap (destination LEO < source log start S): it
// fetches the batch holding S, appends fillers (copies of the first live
// record) up to that batch's base offset, and schedules DeleteRecords(S). It
// returns the offset the stream fetches from (S: the source refuses fetches
// below its log start, even inside the batch that holds S).
func (p *partition) fillGap(pl *pipeline, mir *mirror, leo, start int64) (int64, error) {
	b, err := p.fetchFirstBatch(mir, start)
	if err != nil {
		return 0, err
	}
	rb, err := parseBatch(b)
	if err != nil {
		return 0, err
	}
	if err := checkBatch(b, &rb); err != nil {
		return 0, err
	}
	target := rb.FirstOffset
	if target < leo {
		return 0, fmt.Errorf("%w: source batch %d..%d holds the source log start offset %d, destination log end offset %d",
			ErrBatchStraddle, rb.FirstOffset, rb.FirstOffset+int64(rb.LastOffsetDelta), start, leo)
	}
	var rec fillerRecord
	switch {
	case rb.Attributes&attrControl != 0:
		// A transaction marker is no record to copy: the fillers up to it
		// copy the next live record after it.
		rec, err = p.liveAfter(mir, rb.FirstOffset+1)
	case !liveAtOrAfter(b, &rb, start):
		// Compaction emptied the batch holding S from S on: the stream's
		// hole plan fills up to the next live record once it is fetched.
		p.log.Info("leading gap: no live record in the batch holding the source log start offset; filling with the next one",
			zap.Int64("destination-log-end-offset", leo), zap.Int64("source-log-start-offset", start))
		p.pendingDelete = start
		return start, nil
	default:
		rec, err = firstLiveRecord(b, &rb, start)
	}
	if err != nil {
		return 0, err
	}
	p.log.Info("leading gap: writing fillers",
		zap.Int64("destination-log-end-offset", leo), zap.Int64("source-log-start-offset", start),
		zap.Int64("filler-end-offset", target), zap.Int64("copied-offset", rec.Offset))
	if err := p.submitFillers(pl, &rec, leo, target, false); err != nil {
		return 0, err
	}
	p.pendingDelete = start
	return start, nil
}

// submitFillers appends filler batches of copies of rec at the offsets
// from..to-1; with inTxn, and rec in a source transaction, in the
// destination transaction of rec's producer.
func (p *partition) submitFillers(pl *pipeline, rec *fillerRecord, from, to int64, inTxn bool) error {
	per := int64(rec.fillersPerBatch())
	for off := from; off < to; {
		n := min(per, to-off)
		raw := buildFillerBatch(p.m.zst, rec, int(n))
		if inTxn && rec.InTxn {
			binary.BigEndian.PutUint16(raw[offAttributes:], binary.BigEndian.Uint16(raw[offAttributes:])|attrTransactional)
			if err := p.submitTxnBatch(pl, raw, rec.ProducerID, off, int32(n), int32(n), false); err != nil {
				return err
			}
			off += n
			continue
		}
		if err := pl.waitRoom(); err != nil {
			return err
		}
		pl.submit(p.newItem(raw, off, int32(n), int32(n)))
		off += n
	}
	return nil
}

// submitHoles handles a source batch with compaction holes before or inside
// it (actionHoles, DESIGN.md D2): it plans it with what plan holds pending
// and submits the resulting fillers, rebuilt batches and source batches in
// offset order, or keeps them pending until the next live record arrives.
func (p *partition) submitHoles(pl *pipeline, plan *holePlan, b []byte, rb *kmsg.RecordBatch, cursor int64) error {
	steps, next, err := plan.planBatch(b, rb, cursor)
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		p.log.Debug("compaction hole: waiting for the next live record",
			zap.Int64("from", pl.next), zap.Int64("to", plan.end-1))
	}
	return p.submitSteps(pl, steps, next, -1)
}

// submitSteps submits planned steps in order; fillers copy next.
// Transactional source batches, as they are or rebuilt, are appended in
// their transaction, and so are fillers copying a record of a transaction,
// unless it is one of source producer marker's (-1: none), whose marker
// follows them.
func (p *partition) submitSteps(pl *pipeline, steps []step, next *fillerRecord, marker int64) error {
	for _, s := range steps {
		switch s.kind {
		case stepBatch:
			if txn := int16(binary.BigEndian.Uint16(s.raw[offAttributes:]))&attrTransactional != 0; txn {
				pid := int64(binary.BigEndian.Uint64(s.raw[offProducerID:]))
				if err := p.submitTxnBatch(pl, s.raw, pid, s.base, int32(s.n), 0, false); err != nil {
					return err
				}
				continue
			}
			if err := pl.waitRoom(); err != nil {
				return err
			}
			pl.submit(p.newItem(s.raw, s.base, int32(s.n), 0))
		case stepFillers:
			p.log.Debug("compaction hole: writing fillers",
				zap.Int64("from", s.base), zap.Int64("to", s.base+s.n-1), zap.Int64("fillers", s.n),
				zap.Int64("copied-offset", s.fillerOf))
			if err := p.submitFillers(pl, next, s.base, s.base+s.n, next.ProducerID != marker); err != nil {
				return err
			}
		case stepRebuild:
			raw, copies, err := rebuildBatch(p.m.zst, s.batch, next)
			if err != nil {
				return err
			}
			p.log.Debug("compaction holes inside a batch: rebuilt",
				zap.Int64("from", s.base), zap.Int64("to", s.base+s.n-1), zap.Int32("fillers", copies),
				zap.Int("live-records", len(s.batch.recs)), zap.Int("bytes", len(raw)))
			if s.batch.rb.Attributes&attrTransactional != 0 {
				if err := p.submitTxnBatch(pl, raw, s.batch.rb.ProducerID, s.base, int32(s.n), copies, true); err != nil {
					return err
				}
				continue
			}
			if err := pl.waitRoom(); err != nil {
				return err
			}
			it := p.newItem(raw, s.base, int32(s.n), copies)
			it.rebuilt = true
			pl.submit(it)
		}
	}
	return nil
}

// liveAfter fetches, directly from the source leader, the first live data
// record at or after offset from: what fillers before a transaction marker
// copy. errNoLiveRecord means there is none yet.
func (p *partition) liveAfter(mir *mirror, from int64) (fillerRecord, error) {
	leader, err := mir.leader(p.ctx, p.key, false)
	if err != nil {
		return fillerRecord{}, err
	}
	for offset := from; ; {
		records, _, _, err := mir.fetchOnce(p.ctx, leader, p.key, offset, p.m.cfg.partMax)
		if err != nil {
			return fillerRecord{}, err
		}
		progressed := false
		for {
			b, err := nextBatch(records)
			if err != nil {
				return fillerRecord{}, err
			}
			if b == nil {
				break
			}
			records = records[len(b):]
			if batchNext(b) <= offset {
				continue
			}
			progressed = true
			rb, err := parseBatch(b)
			if err == nil {
				err = checkBatch(b, &rb)
			}
			if err != nil {
				return fillerRecord{}, err
			}
			if rb.Attributes&attrControl == 0 && liveAtOrAfter(b, &rb, offset) {
				return firstLiveRecord(b, &rb, offset)
			}
			offset = batchNext(b)
		}
		if !progressed {
			return fillerRecord{}, fmt.Errorf("%w (compaction hole before the transaction marker at offset %d)", errNoLiveRecord, from-1)
		}
	}
}

// newItem rewrites the batch raw (source offsets base.., n records of which
// fillers are copies) with the sidecar's producer ID, epoch and next
// sequence.
func (p *partition) newItem(raw []byte, base int64, n, fillers int32) *appendItem {
	seq := p.prod.seq
	p.prod.seq = nextSequence(seq, n)
	rewriteBatch(raw, p.prod.ident.id, p.prod.ident.epoch, seq)
	return &appendItem{p: p, raw: raw, base: base, last: base + int64(n) - 1, num: n, seqNext: p.prod.seq, fillers: fillers}
}

// holdRunInFlight: with this many appends in flight a run at the end of
// the fetched data waits for an answer (or more data) before it is
// appended; one append waiting behind the one the broker handles keeps
// the partition's appends back to back.
const holdRunInFlight = 2

// submitRun appends the batches of run as one batch (as they are if it
// holds one), in its source producer's destination transaction if they are
// transactional, and empties it.
func (p *partition) submitRun(pl *pipeline, run *coalesceRun) error {
	defer run.reset()
	defer pl.hold(run.held)
	raw, merged := run.batches[0], int32(0)
	if len(run.batches) > 1 {
		var err error
		if raw, err = coalesceBatches(run); err != nil {
			return err
		}
		merged = int32(len(run.batches))
	}
	if run.txn() {
		return p.submitTxn(pl, &appendItem{p: p, raw: raw, base: run.base, last: run.next - 1, num: run.records, merged: merged}, run.pid)
	}
	if err := pl.waitRoom(); err != nil {
		return err
	}
	it := p.newItem(raw, run.base, run.records, 0)
	it.merged = merged
	pl.submit(it)
	return nil
}

// stream mirrors from fetchFrom: it attaches the partition to the fetch
// session of its source leader, appends what arrives, and handles fetch
// errors, until ctx ends or an error needs a restart from the LEO.
func (p *partition) stream(pl *pipeline, mir *mirror, fetchFrom int64) error {
	ctx := p.ctx
	p.resetFetch(fetchFrom)
	var (
		needLeader = true
		leaderAt   time.Time // attach no earlier than this
		fetchErrs  int       // consecutive fetch errors, for backoff
		deleteAt   time.Time
		deleteErrs int
		cur        *fetched
		pos        int
		plan       = newHolePlan() // compaction holes waiting for the next live record
		run        coalesceRun     // small batches waiting to be appended as one
		timer      = time.NewTimer(time.Hour)
	)
	defer timer.Stop()
	defer func() {
		if cur != nil {
			pl.hold(cur.held) // released once the drain has the results
		}
		pl.hold(run.held)
	}()
	for {
		now := time.Now()
		if needLeader && !now.Before(leaderAt) {
			curMir, err := p.m.mirror(p.key.Mirror) // SetMirror may have replaced it
			if err == nil {
				mir = curMir
				err = p.attach(ctx, mir, fetchErrs > 0)
			}
			if err != nil {
				if IsFatal(err) || ctx.Err() != nil {
					return err
				}
				fetchErrs++
				// The backoff counts from now: the look-up itself may
				// have taken longer than the backoff.
				d := p.m.backoff(fetchErrs)
				leaderAt = time.Now().Add(d)
				p.setSourceError(err)
				p.sourceTrouble(err)
				p.log.Warn("no source leader yet", zap.Error(err), zap.Int("attempt", fetchErrs), zap.Duration("backoff", d))
			} else {
				needLeader = false
			}
		}
		if p.pendingDelete >= 0 && pl.leo >= p.pendingDelete && !now.Before(deleteAt) {
			if err := p.deleteFillers(ctx); err != nil {
				if IsFatal(err) || errors.Is(err, errNotLeader) || ctx.Err() != nil {
					return err
				}
				deleteErrs++
				deleteAt = now.Add(p.m.backoff(deleteErrs))
				p.setLastError(err)
			}
		}

		// Append what was fetched while there is room in flight.
		for pl.err == nil && pl.room() {
			if cur == nil {
				if cur = p.popFetched(); cur == nil {
					break
				}
				pos = 0
				if cur.err != nil {
					err := p.handleFetchError(ctx, mir, cur, pl)
					p.consumed(cur)
					cur = nil
					if err != nil {
						return err
					}
					fetchErrs++
					needLeader, leaderAt = true, time.Now().Add(p.m.backoff(fetchErrs))
					continue
				}
				fetchErrs = 0
			}
			b, err := nextBatch(cur.records[pos:])
			if err != nil {
				return err
			}
			if b == nil {
				if !run.empty() {
					if next := p.popFetchedData(); next != nil {
						// More was fetched already (a slow destination
						// leaves many small responses queued): the run
						// goes on into it. Its bytes are given back once
						// the run is appended.
						p.consumed(cur)
						run.held += cur.held
						cur, pos = next, 0
						continue
					}
					if len(pl.inflight) >= holdRunInFlight {
						// The broker takes a connection's requests one
						// at a time: while one append waits behind
						// another, a run sent now would wait too. It
						// grows with what is fetched meanwhile and goes
						// when the oldest append has its answer.
						break
					}
					// The end of what was fetched: append the run now
					// rather than wait for more.
					if err := p.submitRun(pl, &run); err != nil {
						return err
					}
					continue
				}
				p.consumed(cur)
				pl.hold(cur.held)
				cur = nil
				continue
			}
			pos += len(b)
			cursor := plan.cursor(pl.next)
			if !run.empty() {
				cursor = run.next
			}
			if pl.translate {
				cursor = pl.next + pl.shift
			}
			rb, action, err := inspectBatch(b, cursor)
			if err != nil {
				return err
			}
			if (action == actionAppend || action == actionTxn) && !pl.translate && !plan.pending() && coalescible(b, &rb) &&
				!mir.settings.Load().KeepBatchBoundaries && run.fits(b, &rb) {
				if run.empty() && action == actionTxn {
					// The first batch of a transaction here: its add
					// can go while the run grows and what is in
					// flight lands.
					if tp := p.txns[rb.ProducerID]; tp != nil {
						p.startAdd(tp)
					}
				}
				run.add(b, &rb)
				continue
			}
			if !run.empty() {
				// b does not join the run: append the run first (there
				// is room now), then look at b again.
				pos -= len(b)
				if err := p.submitRun(pl, &run); err != nil {
					return err
				}
				continue
			}
			if pl.translate {
				if action != actionSkip {
					if err := p.submitTranslated(pl, b, &rb, action); err != nil {
						return err
					}
				}
				continue
			}
			switch {
			case action == actionSkip:
				continue
			case action == actionMarker:
				if plan.pending() || rb.FirstOffset > cursor {
					// Fill the hole before the marker first, with copies
					// of the next live record after it.
					next, err := p.liveAfter(mir, rb.FirstOffset+1)
					if err != nil {
						return err
					}
					if err := p.submitSteps(pl, plan.flushBefore(cursor, rb.FirstOffset, &next), &next, rb.ProducerID); err != nil {
						return err
					}
				}
				if err := p.replayMarker(pl, &rb, rb.FirstOffset, cur.records[pos:]); err != nil {
					return err
				}
				continue
			case action == actionTxn && !plan.pending():
				if err := p.submitTxnBatch(pl, b, rb.ProducerID, rb.FirstOffset, rb.NumRecords, 0, false); err != nil {
					return err
				}
				continue
			case action == actionHoles || plan.pending():
				if err := p.submitHoles(pl, &plan, b, &rb, cursor); err != nil {
					return err
				}
				continue
			}
			if err := pl.waitRoom(); err != nil {
				return err
			}
			pl.submit(p.newItem(b, rb.FirstOffset, rb.NumRecords, 0))
		}
		if pl.err != nil {
			return pl.err
		}
		if cur != nil && !pl.translate && !plan.pending() {
			// While the appends in flight land, the next
			// transaction's AddPartitionsToTxn can go.
			next := pl.next
			if !run.empty() {
				next = run.next
			}
			p.addAhead(cur.records[pos:], next)
		}

		// Wait for something to do.
		var wakeAt time.Time
		if needLeader {
			wakeAt = leaderAt
		}
		if p.pendingDelete >= 0 && pl.leo >= p.pendingDelete && (wakeAt.IsZero() || deleteAt.Before(wakeAt)) {
			wakeAt = deleteAt
		}
		// Since Go 1.23 Stop and Reset leave no stale tick in timer.C.
		timer.Stop()
		if !wakeAt.IsZero() {
			timer.Reset(max(time.Until(wakeAt), 0))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-p.results:
			pl.handle(r)
		case <-p.wake:
		case <-timer.C:
		}
	}
}

// handleFetchError decides what a fetch error means. OFFSET_OUT_OF_RANGE is
// checked against the source log: below its start = realign (new leading
// gap), beyond its high watermark = divergence (FAILED). Other errors (and an
// out of range that no longer holds) return nil: refresh the leader, retry.
func (p *partition) handleFetchError(ctx context.Context, mir *mirror, f *fetched, pl *pipeline) error {
	err := f.err
	if errors.Is(err, errFollowerFetch) {
		// Whatever a follower answered (it may trail the leader, or no
		// longer hold the partition), the leader decides: no gap or
		// truncation is concluded from it.
		p.log.Info("fetch from a source follower failed: fetching from the leader", zap.Error(err))
		return nil
	}
	if IsFatal(err) {
		return err
	}
	if errors.Is(err, errMirrorClosed) {
		// The mirror's source client was replaced (new connection
		// settings) or closed: not a fault, the next look-up uses the
		// new client.
		p.log.Debug("source client replaced: looking up the source leader again")
		return nil
	}
	p.setSourceError(err)
	if !errors.Is(err, kerr.OffsetOutOfRange) {
		p.log.Info("fetch error: refreshing the source leader", zap.Error(err))
		return nil
	}
	start, err := mir.listOffset(ctx, p.key, -2)
	if err != nil {
		return nil
	}
	hw, err := mir.listOffset(ctx, p.key, -1)
	if err != nil {
		return nil
	}
	p.setSourceOffsets(hw, start)
	switch {
	case f.offset < start:
		return fmt.Errorf("%w: fetch offset %d, source log start offset %d", errRealign, f.offset, start)
	case f.offset > hw:
		return fmt.Errorf("%w: divergence at offset %d (source high watermark %d, destination log end offset %d): "+
			"the source lost records the destination has; re-seed the partition",
			ErrDivergence, hw, hw, pl.next)
	}
	return nil
}

// deleteFillers makes the source log start offset the destination's, so
// that nobody reads the leading fillers (DESIGN.md D2). Compact-only topics
// refuse (POLICY_VIOLATION): their compaction removes the fillers instead.
func (p *partition) deleteFillers(ctx context.Context) error {
	off := p.pendingDelete + p.extra
	err := p.m.deleteRecords(ctx, p.key, off)
	switch {
	case err == nil:
		p.log.Info("leading fillers deleted", zap.Int64("log-start-offset", off))
	case errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.InvalidRequest), errors.Is(err, kerr.OffsetOutOfRange):
		p.log.Warn("DeleteRecords refused: leading fillers stay readable until compaction or retention removes them",
			zap.Int64("log-start-offset", off), zap.Error(err))
	default:
		return err
	}
	p.pendingDelete = -1
	p.setState(partstate.Aligned, "")
	return nil
}

// fetchFirstBatch returns the first complete batch that ends at or after
// offset from, fetched directly from the source leader.
func (p *partition) fetchFirstBatch(mir *mirror, from int64) ([]byte, error) {
	leader, err := mir.leader(p.ctx, p.key, true)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	records, hw, lso, err := mir.fetchOnce(p.ctx, leader, p.key, from, p.m.cfg.partMax)
	if err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) {
			return nil, fmt.Errorf("%w: %w", errRealign, err)
		}
		if p.ctx.Err() == nil {
			p.sourceTrouble(err)
		}
		return nil, err
	}
	p.mu.Lock()
	p.fetchedLocked(sent, -1) // the high watermark is not the stream's yet
	p.mu.Unlock()
	p.setSourceOffsets(hw, lso)
	for len(records) > 0 {
		b, err := nextBatch(records)
		if err != nil {
			return nil, err
		}
		if b == nil {
			break
		}
		if batchNext(b) > from {
			return b, nil
		}
		records = records[len(b):]
	}
	return nil, fmt.Errorf("%w: no record at the source log start offset %d", errNoLiveRecord, from)
}

// resetFetch points fetching at offset, dropping anything fetched before.
func (p *partition) resetFetch(offset int64) {
	partMax, fetchMax := p.m.cfg.partMax, p.m.cfg.fetchMax
	if mir, err := p.m.mirror(p.key.Mirror); err == nil { // before p.mu: m.mu is never taken under it
		settings := mir.settings.Load()
		partMax, fetchMax = settings.partMax(partMax), settings.fetchMax(fetchMax)
	}
	p.mu.Lock()
	f := &p.fetch
	f.gen++
	f.active, f.inflight = true, false
	f.partMax, f.fetchMax = partMax, fetchMax
	f.offset, f.maxBytes = offset, f.partMax
	dropped := f.queue
	f.queue, f.queued = nil, 0
	s := f.sess
	p.mu.Unlock()
	p.m.releaseQueued(dropped)
	if s != nil {
		s.wakeup()
	}
}

// pauseFetch stops fetching until the next resetFetch and drops what was
// fetched.
func (p *partition) pauseFetch() {
	p.mu.Lock()
	f := &p.fetch
	f.gen++
	f.active, f.inflight = false, false
	dropped := f.queue
	f.queue, f.queued = nil, 0
	p.mu.Unlock()
	p.m.releaseQueued(dropped)
}

// popFetched returns the oldest fetched data or error, nil if none.
func (p *partition) popFetched() *fetched {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.fetch.queue) == 0 {
		return nil
	}
	f := p.fetch.queue[0]
	p.fetch.queue = p.fetch.queue[1:]
	return &f
}

// popFetchedData returns the next fetched response if one is queued and
// holds records, not an error.
func (p *partition) popFetchedData() *fetched {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.fetch.queue) == 0 || p.fetch.queue[0].err != nil {
		return nil
	}
	f := p.fetch.queue[0]
	p.fetch.queue = p.fetch.queue[1:]
	return &f
}

// consumed releases the buffer space of f and lets the session fetch again.
func (p *partition) consumed(f *fetched) {
	p.mu.Lock()
	p.fetch.queued -= len(f.records)
	s := p.fetch.sess
	p.mu.Unlock()
	if s != nil {
		s.wakeup()
	}
}

// attach resolves the source leader and attaches the partition to that
// broker's fetch session.
func (p *partition) attach(ctx context.Context, mir *mirror, refresh bool) error {
	leader, err := mir.leader(ctx, p.key, refresh)
	if err != nil {
		return err
	}
	p.detach()
	return mir.attach(p, leader)
}

// detach removes the partition from its fetch session, if any.
func (p *partition) detach() {
	p.mu.Lock()
	s := p.fetch.sess
	p.mu.Unlock()
	if s != nil {
		s.mir.detach(p, s)
	}
}

// sleepCtx waits d or until ctx ends; false if ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
