package fetcher

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// appendItem is one rewritten batch on its way to the local broker.
type appendItem struct {
	p       *partition
	raw     []byte // the batch as sent: the sidecar's producer fields, CRC recomputed
	base    int64  // source base offset: the broker must append it here
	last    int64  // source last offset
	num     int32
	seqNext int32        // the sequence after this batch
	fillers int32        // filler records in it: num for filler batches
	rebuilt bool         // a source batch rebuilt with its compaction holes filled
	merged  int32        // source batches coalesced into this one; 0: a source batch as it is
	txn     *txnProducer // the destination transaction of a transactional batch; nil: the sidecar's idempotent producer

	res *appendResult // set by the driver when its result arrived
}

// appendResult is the local broker's answer for one item. Every item handed
// to the appender gets exactly one result.
type appendResult struct {
	item *appendItem
	err  error
	base int64 // offset the broker appended the batch at
}

// pipeline tracks one runOnce's appends of a partition, in order. It belongs
// to the driver goroutine.
type pipeline struct {
	p        *partition
	inflight []*appendItem // submitted, oldest first
	leo      int64         // confirmed destination LEO
	next     int64         // destination LEO once everything in flight landed
	seqAcked int32         // sequence after the last confirmed batch of the idempotent producer
	err      error         // the first append error; nothing more is submitted
	// An idempotent append failed. unsure: it was sent and may still be
	// appended (sentEnd: the end of the sent batches), see producerState;
	// suspect: the batch at leo was refused out of order; renew: the
	// broker holds no usable state for the producer ID.
	unsure, suspect, renew bool
	sentEnd                int64
	// translate: mirror.offsets=translate; the source cursor is then
	// next+shift (in exact mode source and destination offsets are equal).
	translate bool
	shift     int64

	// established: the broker holds state for our producer ID on this
	// partition (see room).
	established bool

	// Items submitted and completed so far, and the fetched bytes given
	// back to the memory budget once the items submitted before them
	// completed (budget.go).
	submitted, completed uint64
	leases               []heldLease
}

// producerStateGrace is how long after its last acknowledged batch we trust
// the broker to still hold our producer state for a partition (Kafka keeps
// it for producer.id.expiration.ms, one day by default).
const producerStateGrace = time.Minute

// roomFor reports whether a batch of producer tp (nil: the sidecar's
// idempotent producer) may be sent now. The batches in flight are always
// of one producer: a batch of another waits until nothing is in flight, so
// that the broker's refusal of one batch (NOT_ENOUGH_REPLICAS,
// NOT_LEADER...) makes the ones behind it fail with sequence errors rather
// than be appended in its place, which the sequences of different
// producers would not prevent. For the same reason, while the broker has
// no state for the producer on this partition, a batch goes alone: Kafka
// accepts any sequence number as the first batch of a producer it does not
// know, so if a first batch were refused before being appended, a
// pipelined successor would be appended in its place, at the wrong offset.
// Once one batch is acknowledged, the broker rejects gaps
// (OUT_OF_ORDER_SEQUENCE_NUMBER) and up to MaxInFlightPerPartition batches
// may be in flight, as long as batches keep being acknowledged (see
// producerStateGrace).
func (pl *pipeline) roomFor(tp *txnProducer) bool {
	n := len(pl.inflight)
	switch {
	case n == 0:
		return true
	case pl.inflight[0].txn != tp || n >= pl.p.m.cfg.maxInFlight:
		return false
	case tp == nil:
		return pl.established && time.Since(pl.p.prod.lastAck) < producerStateGrace
	}
	return tp.established && time.Since(tp.lastAck) < producerStateGrace
}

// room reports whether another batch of the producer whose batches are in
// flight may be sent now.
func (pl *pipeline) room() bool {
	if len(pl.inflight) == 0 {
		return true
	}
	return pl.roomFor(pl.inflight[0].txn)
}

// submit hands it to the appender. The caller checked room.
func (pl *pipeline) submit(it *appendItem) {
	pl.inflight = append(pl.inflight, it)
	pl.submitted++
	pl.next = it.last + 1
	pl.p.m.app.submit(it)
}

// waitRoom handles results until there is room for another append of the
// idempotent producer; it returns the append error or ctx's.
func (pl *pipeline) waitRoom() error { return pl.waitFor(func() bool { return pl.roomFor(nil) }) }

// waitIdle handles results until nothing is in flight; it returns the
// append error or ctx's.
func (pl *pipeline) waitIdle() error {
	return pl.waitFor(func() bool { return len(pl.inflight) == 0 })
}

// waitFor handles results until done holds or an append failed.
func (pl *pipeline) waitFor(done func() bool) error {
	for pl.err == nil && !done() {
		select {
		case r := <-pl.p.results:
			pl.handle(r)
		case <-pl.p.ctx.Done():
			return pl.p.ctx.Err()
		}
	}
	return pl.err
}

// handle records a result and completes items in submission order.
func (pl *pipeline) handle(r appendResult) {
	r.item.res = &r
	for len(pl.inflight) > 0 && pl.inflight[0].res != nil {
		it := pl.inflight[0]
		pl.inflight = pl.inflight[1:]
		pl.completed++
		pl.complete(it)
	}
	pl.releaseCompleted()
}

func (pl *pipeline) complete(it *appendItem) {
	p, res := pl.p, it.res
	switch {
	case errors.Is(res.err, errCancelled):
		return // never sent; the following items were not sent either
	case res.err != nil:
		if it.txn == nil {
			pl.unsure = true
			pl.sentEnd = max(pl.sentEnd, it.last+1)
			if needsNewProducerID(res.err) {
				pl.renew = true
			}
			if pl.err == nil && it.base == pl.leo && errors.Is(res.err, kerr.OutOfOrderSequenceNumber) {
				pl.suspect = true
			}
		}
		if pl.err == nil { // the first failure decides; the LEO is read again anyway
			p.m.met.countError(opAppend, res.err)
			pl.err = classifyAppendError(res.err, it)
			if it.txn != nil {
				pl.err = txnFenced(pl.err, it.txn)
			}
		}
		return
	case res.base-p.extra != it.base:
		pl.renew = true
		pl.err = fmt.Errorf("%w: the local broker appended the batch of source offset %d at offset %d, want %d; "+
			"another writer appended to %s (only the sidecar may write to mirror topics)",
			ErrExactness, it.base, res.base, it.base+p.extra, p.key)
		p.log.Error("EXACTNESS INVARIANT VIOLATED: destination offsets no longer match the source",
			zap.Int64("source-offset", it.base), zap.Int64("destination-offset", res.base))
		return
	}
	// Appended where it belongs (possibly after an earlier failure whose
	// batch did land after all).
	pl.leo = it.last + 1
	p.appended, p.waits = true, 0
	if it.txn != nil {
		// tp.seq moved on when the batch was sent: the batches behind it
		// have their sequences already.
		it.txn.established, it.txn.lastAck = true, time.Now()
	} else {
		// Confirmed LEO and sequence move together, even after a
		// failure: they map the offsets of unknown appends to sequences.
		pl.seqAcked = it.seqNext
		pl.established = true
		p.prod.lastAck = time.Now()
		if pl.err == nil {
			p.attempt = 0
		}
	}
	n, fillers := int64(it.num-it.fillers), int64(it.fillers)
	p.mu.Lock()
	p.dstLEO = pl.leo + p.extra
	if p.state != StateFailed {
		p.lastErr, p.srcErr = "", false // a retriable error is over once appends succeed again
	}
	p.fillers += fillers
	if n > 0 { // not a filler batch
		p.records += n
		p.bytes += int64(len(it.raw))
	}
	p.updateLagLocked()
	p.mu.Unlock()
	if fillers > 0 {
		p.m.met.fillers.WithLabelValues(p.key.Mirror, p.key.Topic).Add(float64(fillers))
	}
	if n > 0 {
		if ts := batchMaxTimestamp(it.raw); ts > 0 {
			p.m.met.e2eLatency.WithLabelValues(p.key.Mirror).Observe(max(0, time.Since(time.UnixMilli(ts)).Seconds()))
		}
		p.m.met.records.WithLabelValues(p.key.Mirror, p.key.Topic).Add(float64(n))
		p.m.met.bytes.WithLabelValues(p.key.Mirror, p.key.Topic).Add(float64(len(it.raw)))
	}
	if it.rebuilt {
		p.m.met.rebuilt.WithLabelValues(p.key.Mirror, p.key.Topic).Inc()
	}
	if it.merged > 0 {
		p.m.met.coalesced.WithLabelValues(p.key.Mirror, p.key.Topic).Add(float64(it.merged))
		p.m.met.coalescedInto.WithLabelValues(p.key.Mirror, p.key.Topic).Inc()
	}
}

// drain waits for every result: afterwards no append of this pipeline is in
// flight. With cancel (stopping, or after an append error) batches the
// appender has not sent yet are withdrawn; otherwise (a fetch or inspection
// error) they are sent, so the destination gets every valid batch before
// the partition fails or restarts. A stop during the wait withdraws them
// too.
func (pl *pipeline) drain(cancel bool) {
	p := pl.p
	if cancel {
		p.m.app.cancel(p)
	}
	for len(pl.inflight) > 0 {
		if cancel {
			pl.handle(<-p.results)
			continue
		}
		select {
		case r := <-p.results:
			pl.handle(r)
		case <-p.ctx.Done():
			cancel = true
			p.m.app.cancel(p)
		}
	}
}

// needsNewProducerID reports whether a produce error means the broker holds
// no usable state for the producer ID. Every other error keeps it (see
// producerState): sequences make a batch the broker may already have safe
// to send again.
func needsNewProducerID(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.UnknownProducerID) ||
		errors.Is(err, kerr.InvalidProducerIDMapping)
}

// classifyAppendError maps a produce error to what happens to the partition:
// NOT_LEADER stops it, authorization and record errors fail it, anything
// else (retriable codes, sequence errors, connection errors) restarts it
// from the destination LEO.
func classifyAppendError(err error, it *appendItem) error {
	ke, ok := errors.AsType[*kerr.Error](err)
	if !ok {
		return fmt.Errorf("append of source offset %d: %w", it.base, err)
	}
	switch ke {
	case kerr.NotLeaderForPartition:
		return fmt.Errorf("%w: append of source offset %d: %w", errNotLeader, it.base, err)
	case kerr.UnknownTopicOrPartition:
		return fmt.Errorf("%w: append of source offset %d: %w", errLocalUnknown, it.base, err)
	case kerr.TopicAuthorizationFailed:
		return fmt.Errorf("%w (append of source offset %d)", ErrNotSuperUser, it.base)
	case kerr.OutOfOrderSequenceNumber, kerr.DuplicateSequenceNumber, kerr.InvalidProducerEpoch,
		kerr.UnknownProducerID, kerr.InvalidProducerIDMapping:
		return fmt.Errorf("append of source offset %d: %w", it.base, err)
	}
	if kerr.IsRetriable(ke) {
		return fmt.Errorf("append of source offset %d: %w", it.base, err)
	}
	return fmt.Errorf("%w: %s at source offset %d (batch of %d records, %d bytes): %s",
		ErrAppendRejected, ke.Message, it.base, it.num, len(it.raw), ke.Description)
}
