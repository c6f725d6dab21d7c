package fetcher

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// checkResume compares the destination's last record, at offset leo-1, with
// the source's record at that offset before a run appends after it. A run
// resumes from the destination log end offset, and the pipeline checks the
// offset of every batch it appends, but nothing else tells a log that is
// shifted as a whole: a control batch the source does not have (a marker
// the destination's coordinator wrote again, or an ABORT of a fenced
// transaction) moves every later record one offset up, and a driver that
// starts after the batch that revealed it, on this sidecar or another one,
// would mirror on from the shifted end. Such a partition fails for good
// (ErrExactness), naming what the destination holds, except for markers
// the destination wrote twice, which are recorded and mirrored past
// (resumeRepeats, repeats.go). In exact mode leo is a source offset; the
// destination's is higher by the repeats recorded before it.
//
// A destination whose high watermark is below its log end offset cannot
// show its last record yet: the run waits (a retriable error). Nothing is
// compared where the source no longer has the record (below its log start,
// or compacted away); a source that is behind the destination is the
// stream's to judge (divergence). After a marker the run also waits until
// its transaction is complete (waitResumedMarker).
//
// Two markers at the resume point that end the transaction differently (the
// destination aborted a transaction the source committed, and the driver
// that saw it is gone) leave the offsets aligned: the partition fails as
// the driver would have (ErrTransactionAborted), and a driver the operator
// started with --recover (Manager.Recover) resumes after it.
func (p *partition) checkResume(mir *mirror, leo, start int64) error {
	at := leo - 1
	if at < start || at < 0 {
		return p.unconfirmed()
	}
	dAt := p.destOffset(at) // at, unless the destination wrote markers twice (repeats.go)
	from := max(dAt-1, p.destOffset(start), 0)
	dstRecords, err := p.m.fetchLocal(p.ctx, p.key, from)
	if errors.Is(err, kerr.OffsetOutOfRange) && from < dAt {
		from = dAt // the destination log starts at dAt
		dstRecords, err = p.m.fetchLocal(p.ctx, p.key, from)
	}
	if err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) {
			return p.unconfirmed()
		}
		return err
	}
	prev, last, err := batchesEndingAt(dstRecords, dAt)
	if err != nil {
		return err
	}
	if last == nil {
		// Beyond the high watermark: an append the in-sync replicas do
		// not all have yet (one of them is down, or its disk full).
		return p.notReplicated(leo)
	}
	leader, err := mir.leader(p.ctx, p.key, false)
	if err != nil {
		if p.ctx.Err() == nil {
			p.sourceTrouble(err)
		}
		return err
	}
	if p.omapLoaded && sameMarker(prev, last) {
		// The marker again, unless the source has it twice too.
		if err := p.resumeRepeats(mir, leader, dAt); err != nil {
			return err
		}
	}
	srcRecords, err := p.fetchSourceAt(mir, leader, at)
	if err != nil {
		return err
	}
	if srcRecords == nil {
		return p.unconfirmed()
	}
	src, err := batchHolding(srcRecords, at)
	if err != nil {
		return err
	}
	if src == nil {
		return p.unconfirmed()
	}
	err = compareResumePoint(prev, last, src, dAt, at)
	if err == nil && p.mapErr != nil && !sameRecordAt(last, src, dAt, at) {
		// Without the map only two equal records confirm the offsets.
		return fmt.Errorf("the resume point at destination offset %d holds no record to compare with the source's", dAt)
	}
	var oe *outcomeError
	switch {
	case errors.As(err, &oe) && p.recovering:
		p.log.Warn("resuming after a transaction the destination ended otherwise than the source, as the operator's --recover accepts",
			zap.Int64("marker-offset", at), zap.String("destination", outcome(oe.dstCommits)), zap.String("source", outcome(oe.srcCommits)))
	case errors.As(err, &oe):
		// The offsets still match: only the transaction's records are
		// read otherwise, which the operator may accept.
		return fmt.Errorf("%w: %s: its records are %s on the destination and %s on the source; "+
			"--recover resumes after it, re-creating the topic restores it",
			ErrTransactionAborted, err.Error(), verb(oe.dstCommits), verb(oe.srcCommits))
	case err != nil:
		return fmt.Errorf("%w: %s: the destination's offsets no longer match the source's from there on; "+
			"--start --reseed re-mirrors the topic", ErrExactness, err.Error())
	}
	if batchIsControl(last) {
		return p.waitResumedMarker(last, src, leo)
	}
	return nil
}

// adoptLastWriter continues the producer of the destination's last batch
// (at dLEO-1) when the driver has no producer identity of its own for the
// partition: at its first start in this process, or after another writer
// appended. That batch is an idempotent data batch of the sidecar that drove
// the partition before, in this process's previous life (a kill -9 or a
// crash) or on another host (leadership moved), and that sidecar's appends
// still in flight (in its socket buffer or the broker's request queue) may
// be handled only now. Under a new producer ID such a late append and this
// driver's append of the same source batch would be two writers' batches,
// the second one at shifted offsets (ErrExactness). Under the same producer
// ID, epoch and next sequence they are one to the broker: whichever it
// handles second is a duplicate (answered at the first one's offset) or
// out of order (refused, and the LEO read again tells where to go on);
// either way nothing lands twice. It reports false (take the Manager's
// identity) for a destination that is empty, ends with a transactional or
// control batch, or whose last batch is of the identity whose append
// failed (the broker holds no usable state for it).
func (p *partition) adoptLastWriter(dLEO int64) (bool, error) {
	if dLEO <= 0 {
		return false, nil
	}
	raw, err := p.m.fetchLocal(p.ctx, p.key, dLEO-1)
	if errors.Is(err, kerr.OffsetOutOfRange) {
		return false, nil // emptied meanwhile (DeleteRecords): nothing to continue
	}
	if err != nil {
		return false, err
	}
	last, err := batchHolding(raw, dLEO-1)
	if err != nil {
		return false, err
	}
	if last == nil {
		// Beyond the high watermark, perhaps the late append itself.
		return false, p.notReplicated(dLEO)
	}
	rb, err := parseBatch(last)
	if err != nil {
		return false, err
	}
	if batchNext(last) != dLEO || rb.Attributes&(attrTransactional|attrControl) != 0 || rb.ProducerID < 0 || rb.FirstSequence < 0 {
		return false, nil
	}
	if st := p.prod.stale; st != nil && st.id == rb.ProducerID && st.epoch == rb.ProducerEpoch {
		return false, nil
	}
	// gen 0: not handed out by InitProducerID here. It may still be the
	// Manager's own producer, continued by another driver meanwhile.
	p.prod.ident = &producerIdentity{id: rb.ProducerID, epoch: rb.ProducerEpoch}
	p.prod.seq = nextSequence(rb.FirstSequence, rb.LastOffsetDelta+1)
	p.prod.established = false // its first batch goes alone
	p.log.Info("appending with the producer ID of the destination's last batch",
		zap.Int64("producer-id", rb.ProducerID), zap.Int16("producer-epoch", rb.ProducerEpoch), zap.Int32("next-sequence", p.prod.seq))
	return true, nil
}

// notReplicated is the retriable error of a start whose destination last
// batch, below log end offset leo, is above the high watermark.
func (p *partition) notReplicated(leo int64) error {
	return fmt.Errorf("the destination's high watermark of %s is below its log end offset %d: resuming once its last batch is replicated", p.key, leo)
}

// fetchSourceAt fetches p's batches from the source leader from offset
// on, nil where the source no longer has offset (below its log start).
func (p *partition) fetchSourceAt(mir *mirror, leader int32, offset int64) ([]byte, error) {
	raw, _, _, err := mir.fetchOnce(p.ctx, leader, p.key, offset, p.m.cfg.partMax)
	switch {
	case errors.Is(err, kerr.OffsetOutOfRange):
		return nil, nil
	case err != nil && p.ctx.Err() == nil:
		p.sourceTrouble(err)
	}
	return raw, err
}

// waitResumedMarker waits, before a run appends after the marker at
// offset leo-1 (last on the destination, src on the source), until the
// destination shows the marker's transaction complete: an earlier run may
// have ended while it waited for that (replayMarker), and until then the
// coordinator may write the marker again, which must land right behind it,
// with nothing appended in between. It then checks that the marker is still
// the last batch.
func (p *partition) waitResumedMarker(last, src []byte, leo int64) error {
	dst, err := parseBatch(last)
	if err != nil {
		return err
	}
	srb, err := parseBatch(src)
	if err != nil {
		return err
	}
	tp := &txnProducer{srcPID: srb.ProducerID, id: TransactionalID(p.key, srb.ProducerID), pid: dst.ProducerID, epoch: dst.ProducerEpoch}
	ctx, cancel := context.WithTimeout(p.ctx, txnCompleteTimeout)
	defer cancel()
	d := time.Millisecond
	for {
		done, err := p.txnCompleted(ctx, tp, leo-1)
		if err != nil && !retriableTxnError(err) {
			return err
		}
		if done {
			break
		}
		if !sleepCtx(ctx, d) {
			if p.ctx.Err() != nil {
				return p.ctx.Err()
			}
			return fmt.Errorf("the destination did not complete transaction %s within %s after its marker at offset %d (last: %v)",
				tp, txnCompleteTimeout, leo-1, err)
		}
		d = min(2*d, 100*time.Millisecond)
	}
	now, err := p.localLEO(p.ctx)
	if err != nil {
		return err
	}
	if now > leo {
		// Its coordinator wrote the marker again (repeats.go).
		return p.absorbRepeats(tp, leo-1, now)
	}
	if now != leo {
		return fmt.Errorf("%w: the destination log end offset of %s moved from %d to %d while transaction %s completed",
			ErrExactness, p.key, leo, now, tp)
	}
	return nil
}

// outcomeError is a resume point where both logs hold a transaction marker
// and the two end the transaction differently.
type outcomeError struct {
	at                     int64
	dstCommits, srcCommits bool
}

func (e *outcomeError) Error() string {
	return fmt.Sprintf("the destination's transaction marker at offset %d is %s, the source's %s",
		e.at, outcome(e.dstCommits), outcome(e.srcCommits))
}

// verb says what a transaction's marker made of its records.
func verb(commits bool) string {
	if commits {
		return "committed"
	}
	return "aborted"
}

// batchIsControl reports whether the v2 batch b is a control batch.
func batchIsControl(b []byte) bool {
	return len(b) >= batchHeaderSize && binary.BigEndian.Uint16(b[offAttributes:])&attrControl != 0
}

// compareResumePoint compares the destination batch last (ending at
// destination offset dAt; prev the one before it, nil if not fetched) with
// the source batch src that holds source offset at.
func compareResumePoint(prev, last, src []byte, dAt, at int64) error {
	dst, err := parseBatch(last)
	if err != nil {
		return err
	}
	srb, err := parseBatch(src)
	if err != nil {
		return err
	}
	dCtl, sCtl := dst.Attributes&attrControl != 0, srb.Attributes&attrControl != 0
	switch {
	case dCtl && sCtl:
		dc, err1 := markerCommits(&dst)
		sc, err2 := markerCommits(&srb)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if dc != sc {
			return &outcomeError{at: at, dstCommits: dc, srcCommits: sc}
		}
		return nil
	case dCtl:
		if prev != nil {
			if prb, err := parseBatch(prev); err == nil && prb.Attributes&attrControl != 0 &&
				prb.ProducerID == dst.ProducerID && prb.ProducerEpoch == dst.ProducerEpoch {
				return fmt.Errorf("the destination holds two transaction markers of producer ID %d, epoch %d, at offsets %d and %d, "+
					"where the source has one marker and then a record: the destination's transaction coordinator wrote the marker again",
					dst.ProducerID, dst.ProducerEpoch, prb.FirstOffset, dAt)
			}
		}
		return fmt.Errorf("the destination holds a transaction marker (producer ID %d, epoch %d) at offset %d where the source has a record: "+
			"the destination ended a transaction the source did not end there (an earlier owner's request, or a fence)",
			dst.ProducerID, dst.ProducerEpoch, dAt)
	case sCtl:
		return fmt.Errorf("the destination holds a record at offset %d where the source has a transaction marker", at)
	}
	d, err := firstLiveRecord(last, &dst, dAt)
	if err != nil {
		return err
	}
	s, err := firstLiveRecord(src, &srb, at)
	if err != nil || s.Offset != at || d.Offset != dAt {
		return nil // no record at at on one side (compacted): nothing to compare
	}
	sameTime := d.Timestamp == s.Timestamp || dst.Attributes&attrLogAppendTime != 0 || srb.Attributes&attrLogAppendTime != 0
	if !sameTime || !bytes.Equal(d.Key, s.Key) || (d.Key == nil) != (s.Key == nil) ||
		!bytes.Equal(d.Value, s.Value) || (d.Value == nil) != (s.Value == nil) ||
		!slices.EqualFunc(d.Headers, s.Headers, func(a, b kmsg.Header) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
		return fmt.Errorf("the destination's record at offset %d (timestamp %d) is not the source's record at offset %d (timestamp %d)",
			dAt, d.Timestamp, at, s.Timestamp)
	}
	return nil
}

// unconfirmed is what a resume point with nothing to compare gives: nil,
// unless the offset map could not be read (then only a compared record
// confirms that the log is not shifted there).
func (p *partition) unconfirmed() error {
	if p.mapErr == nil {
		return nil
	}
	return errors.New("the resume point holds no record to compare with the source's")
}

// sameRecordAt reports whether compareResumePoint, having found the
// destination batch last and the source batch src alike, compared records
// (at destination offset dAt and source offset at): both are data batches
// with a record there, not a control batch or a compaction hole.
func sameRecordAt(last, src []byte, dAt, at int64) bool {
	if batchIsControl(last) || batchIsControl(src) {
		return false
	}
	dst, err1 := parseBatch(last)
	srb, err2 := parseBatch(src)
	if err1 != nil || err2 != nil {
		return false
	}
	d, err1 := firstLiveRecord(last, &dst, dAt)
	s, err2 := firstLiveRecord(src, &srb, at)
	return err1 == nil && err2 == nil && d.Offset == dAt && s.Offset == at
}

// sameMarker reports whether prev and last are markers of one producer ID
// and epoch that end their transactions the same way.
func sameMarker(prev, last []byte) bool {
	if prev == nil || !batchIsControl(prev) || !batchIsControl(last) {
		return false
	}
	runs, err := runsOf(append(slices.Clip(prev), last...), true)
	return err == nil && len(runs) == 1 && runs[0].n == 2
}

func outcome(commit bool) string {
	if commit {
		return "COMMIT"
	}
	return "ABORT"
}

// batchesEndingAt returns, from raw batches, the batch that holds offset at
// and the one before it (nil if it is not among them); last is nil if no
// batch holds at.
func batchesEndingAt(raw []byte, at int64) (prev, last []byte, err error) {
	for len(raw) > 0 {
		b, err := nextBatch(raw)
		if err != nil || b == nil {
			return nil, nil, err
		}
		raw = raw[len(b):]
		if batchBase(b) <= at && at < batchNext(b) {
			return prev, b, nil
		}
		prev = b
	}
	return nil, nil, nil
}

// batchHolding returns the first of raw's batches that ends at or after
// offset at, nil if there is none or it begins after at.
func batchHolding(raw []byte, at int64) ([]byte, error) {
	for len(raw) > 0 {
		b, err := nextBatch(raw)
		if err != nil || b == nil {
			return nil, err
		}
		raw = raw[len(b):]
		if batchNext(b) > at {
			if batchBase(b) > at {
				return nil, nil
			}
			return b, nil
		}
	}
	return nil, nil
}

// fetchLocal fetches p from offset from the local broker, read_uncommitted,
// without waiting for more data than it has.
func (m *Manager) fetchLocal(ctx context.Context, p Partition, offset int64) ([]byte, error) {
	req := m.newFetchRequest()
	req.MaxWaitMillis = 0
	t := kmsg.NewFetchRequestTopic()
	t.Topic = p.Topic
	t.Partitions = append(t.Partitions, newFetchPartition(p.Partition, offset, m.cfg.partMax))
	req.Topics = append(req.Topics, t)
	resp, err := m.localBroker().Request(ctx, &fetchRequest{req})
	if err != nil {
		return nil, fmt.Errorf("destination fetch of %s at offset %d: %w", p, offset, err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return nil, fmt.Errorf("destination fetch of %s at offset %d: %w", p, offset, err)
	}
	for _, rt := range fr.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != p.Topic || rp.Partition != p.Partition {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				if ke, ok := errors.AsType[*kerr.Error](err); ok && ke != kerr.OffsetOutOfRange {
					return nil, localError(fmt.Sprintf("destination fetch at offset %d", offset), p, ke)
				}
				return nil, fmt.Errorf("destination fetch of %s at offset %d: %w", p, offset, err)
			}
			return rp.RecordBatches, nil
		}
	}
	return nil, fmt.Errorf("destination fetch of %s at offset %d: %w", p, offset, errMissingAnswer)
}
