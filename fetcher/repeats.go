package fetcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// Markers the destination wrote twice (DESIGN.md D2, "Repeated markers").
// A destination transaction coordinator writes a marker again when the
// partition leader appended the first one and the answer was lost (the
// leader was cut off, froze, died or ran out of disk) or the coordinator
// moved before it completed the transaction; Kafka's partitions append the
// repeat as another control batch, and no client can make them refuse it.
// Consumers never see control batches, so the records are still the
// source's, but every later source offset is one higher on the
// destination. An exact-mode partition records that as an offset shift in
// its offset map in __mirror_state (the store of translate mode's shifts),
// before it appends anything after the repeat, and mirrors on: the pipeline
// keeps working in source offsets and p.extra (destination minus source
// offset at the log end) converts where it meets the destination's
// (ListOffsets, produce answers, DeleteRecords, the resume check). The
// group offset sync translates committed offsets by the map, and the lag
// counts the shift.

// loadRepeats loads the offset map of an exact-mode partition once per
// driver (only the driver adds to it while it runs), leo the destination
// log end offset. Shifts beyond leo belong to a log that is gone (the
// topic was re-created, or an unclean election truncated it): a shift
// restating the mapping at leo replaces them. While the map cannot be read
// (the mirror's coordinator is away: its sidecar died), p.mapErr says why,
// and the run starts only where the resume check confirms, by a record
// equal to the source's at the same offset, that nothing is shifted there.
func (p *partition) loadRepeats(leo int64) {
	if p.omapLoaded || p.m.cfg.offsetMaps == nil {
		return
	}
	p.mapErr = nil
	m, err := p.m.cfg.offsetMaps.LoadOffsetMap(p.ctx, p.key)
	if err == nil {
		if valid := validShifts(m, leo); len(valid) < len(m) {
			reset := OffsetShift{Source: leo + lastShift(valid), Destination: leo}
			if err = p.m.cfg.offsetMaps.AppendOffsetShifts(p.ctx, p.key, []OffsetShift{reset}); err == nil {
				p.log.Warn("offset map shifts beyond the destination log end offset dropped",
					zap.Int64("destination-log-end-offset", leo), zap.Int("dropped", len(m)-len(valid)))
				m = append(valid, reset)
			}
		}
	}
	if err != nil {
		p.mapErr = fmt.Errorf("the offset map of %s cannot be read: %w", p.key, err)
		return
	}
	p.omap, p.omapLoaded = m, true
	p.setExtra(-lastShift(m))
}

func (p *partition) setExtra(extra int64) {
	p.extra = extra
	p.mu.Lock()
	p.shift = -extra
	p.mu.Unlock()
}

// localLEO returns the destination log end offset in the pipeline's
// offsets (source offsets in exact mode).
func (p *partition) localLEO(ctx context.Context) (int64, error) {
	leo, err := p.m.listLocalLEO(ctx, p.key)
	return leo - p.extra, err
}

// destOffset returns the destination offset of source offset src in exact
// mode.
func (p *partition) destOffset(src int64) int64 {
	return TranslateOffset(p.omap, src)
}

// markerRun is a run of consecutive control batches that end transactions
// of one producer ID the same way (and, on the destination, with one
// epoch).
type markerRun struct {
	first, next int64 // the offset of the run's first batch, and the one after its last
	n           int64 // control batches in the run
	pid         int64
	epoch       int16
	commit      bool
}

// runsOf returns the marker runs of raw's batches in order; a batch that is
// not a marker ends a run and begins none. withEpoch tells whether the
// epoch must match too.
func runsOf(raw []byte, withEpoch bool) ([]markerRun, error) {
	var runs []markerRun
	open := false
	for len(raw) > 0 {
		b, err := nextBatch(raw)
		if err != nil || b == nil {
			return runs, err
		}
		raw = raw[len(b):]
		if !batchIsControl(b) {
			open = false
			continue
		}
		rb, err := parseBatch(b)
		if err != nil {
			return nil, err
		}
		commit, err := markerCommits(&rb)
		if err != nil {
			return nil, err
		}
		if open {
			r := &runs[len(runs)-1]
			if r.next == rb.FirstOffset && r.pid == rb.ProducerID && r.commit == commit && (!withEpoch || r.epoch == rb.ProducerEpoch) {
				r.n, r.next = r.n+1, batchNext(b)
				continue
			}
		}
		runs = append(runs, markerRun{first: rb.FirstOffset, next: batchNext(b), n: 1, pid: rb.ProducerID, epoch: rb.ProducerEpoch, commit: commit})
		open = true
	}
	return runs, nil
}

// repeatError is the reason a partition fails when the batches behind a
// marker are not that marker again.
func (p *partition) repeatError(at, leo int64, tp *txnProducer) error {
	return fmt.Errorf("%w: the destination log end offset of %s is %d after the transaction marker at offset %d of %s, "+
		"and what follows the marker is not the marker again: the destination ended a transaction the source did not end there; "+
		"--start --reseed re-mirrors the topic", ErrExactness, p.key, leo, at, tp)
}

// absorbRepeats handles a destination log end offset leo (source offsets)
// beyond at+1 once tp's transaction, its marker for source offset at, is
// complete: if every batch after the marker is the marker again, they are
// recorded and the partition mirrors on; otherwise it fails.
func (p *partition) absorbRepeats(tp *txnProducer, at, leo int64) error {
	if p.mapErr != nil {
		return fmt.Errorf("%w: the destination log end offset is %d after the transaction marker at offset %d", p.mapErr, leo, at)
	}
	if !p.omapLoaded {
		// Translate mode, or no offset map store: nowhere to record it.
		return fmt.Errorf("%w: the destination log end offset of %s is %d after the transaction marker at offset %d of %s: "+
			"the destination wrote a control batch the source does not have (a transaction coordinator sends a marker again "+
			"when it moved or timed out between writing the markers and completing the transaction)",
			ErrExactness, p.key, leo, at, tp)
	}
	dAt := p.destOffset(at)
	raw, err := p.m.fetchLocal(p.ctx, p.key, dAt)
	if err != nil {
		return err
	}
	runs, err := runsOf(raw, true)
	if err != nil {
		return err
	}
	want := leo - at // the marker and its repeats, up to the log end
	if len(runs) == 0 || runs[0].first != dAt || runs[0].pid != tp.pid || runs[0].epoch != tp.epoch {
		return p.repeatError(at, leo, tp)
	}
	switch r := runs[0]; {
	case r.n >= want:
		// The whole log end is the marker again (more of it than leo
		// showed if another repeat landed meanwhile).
		return p.recordRepeats(at+1, dAt+r.n, r.n-1)
	case batchEnds(raw) > r.next:
		return p.repeatError(at, leo, tp)
	}
	// The rest is above the high watermark, not readable yet: the next
	// run finds it at its resume point.
	return fmt.Errorf("the destination's batches after the transaction marker at offset %d of %s are not replicated yet", dAt, p.key)
}

// batchEnds returns the offset after the last complete batch of raw.
func batchEnds(raw []byte) int64 {
	end := int64(-1)
	for len(raw) > 0 {
		b, err := nextBatch(raw)
		if err != nil || b == nil {
			break
		}
		raw = raw[len(b):]
		end = batchNext(b)
	}
	return end
}

// maxRepeatScan is how far before the resume point the resume check looks
// for the first of a run of markers.
const maxRepeatScan = 64

// resumeRepeats looks, at the resume point (destination offset dAt, the
// last batch, and the one before it both markers of one producer ID and
// epoch ending their transactions the same way), whether the destination
// holds the marker more often than the source: an earlier driver stopped
// before it recorded the repeats. It records them and returns
// errRepeatRecorded, or nil when the source has as many markers there.
func (p *partition) resumeRepeats(mir *mirror, leader int32, dAt int64) error {
	from := max(dAt-maxRepeatScan, 0)
	raw, err := p.m.fetchLocal(p.ctx, p.key, from)
	if errors.Is(err, kerr.OffsetOutOfRange) {
		from = max(dAt-1, 0)
		raw, err = p.m.fetchLocal(p.ctx, p.key, from)
	}
	if err != nil {
		return err
	}
	runs, err := runsOf(raw, true)
	if err != nil {
		return err
	}
	var run *markerRun
	for i := range runs {
		if runs[i].first <= dAt && dAt < runs[i].next {
			run = &runs[i]
		}
	}
	if run == nil || run.next != dAt+1 {
		return nil // not a run ending at the resume point after all
	}
	if run.first == from && from > 0 {
		return fmt.Errorf("%w: %s holds more than %d transaction markers of producer ID %d in a row before offset %d; "+
			"--start --reseed re-mirrors the topic", ErrExactness, p.key, maxRepeatScan, run.pid, dAt+1)
	}
	sFirst := sourceOffsetOf(p.omap, run.first)
	srcRecords, err := p.fetchSourceAt(mir, leader, sFirst)
	if err != nil || srcRecords == nil {
		return err
	}
	srcRuns, err := runsOf(srcRecords, false)
	if err != nil {
		return err
	}
	if len(srcRuns) == 0 || srcRuns[0].first != sFirst || srcRuns[0].commit != run.commit {
		return nil // the source has no such marker there: the resume check names what differs
	}
	if srcRuns[0].n >= run.n {
		return nil
	}
	if err := p.recordRepeats(sFirst+srcRuns[0].n, run.next, run.n-srcRuns[0].n); err != nil {
		return err
	}
	return fmt.Errorf("%w: %d at destination offset %d", errRepeatRecorded, run.n-srcRuns[0].n, run.first)
}

// recordRepeats records that source offset srcNext is at destination
// offset dstNext, after n markers the destination wrote again, before
// anything is appended behind them. A failure to record is retriable: the
// next run finds the markers at its resume point.
func (p *partition) recordRepeats(srcNext, dstNext, n int64) error {
	shift := OffsetShift{Source: srcNext, Destination: dstNext}
	if len(p.omap)+1 > maxOffsetShifts {
		return fmt.Errorf("%w: %s needs another offset shift at source offset %d, more than the %d its __mirror_state record holds; "+
			"--start --reseed re-mirrors the topic", ErrOffsetMapFull, p.key, srcNext, maxOffsetShifts)
	}
	if err := p.m.cfg.offsetMaps.AppendOffsetShifts(p.ctx, p.key, []OffsetShift{shift}); err != nil {
		return fmt.Errorf("recording the offset map of %s: %w", p.key, err)
	}
	p.omap = append(p.omap, shift)
	p.setExtra(dstNext - srcNext)
	p.m.met.repeatedMarkers.WithLabelValues(p.key.Mirror, p.key.Topic).Add(float64(n))
	p.log.Warn("the destination's transaction coordinator wrote a marker again: mirroring on with destination offsets above the source's",
		zap.Int64("repeats", n), zap.Int64("source-offset", srcNext), zap.Int64("destination-offset", dstNext),
		zap.Int64("destination-minus-source", p.extra))
	return nil
}
