package fetcher

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Translate mode (mirror.offsets=translate, DESIGN.md D2) writes no fillers:
// compaction holes, empty batches and a leading gap are left out, batches
// with holes inside are compacted (their live records renumbered), and the
// destination offsets fall behind the source's by the holes so far. Each
// change of that shift is an OffsetShift, stored durably (OffsetMaps)
// before the batch it describes is appended, so that the driver can
// resume and group offset sync can translate committed offsets exactly.

// OffsetShift maps source offset Source to destination offset Destination;
// later source offsets follow one for one up to the next shift.
type OffsetShift struct {
	Source      int64
	Destination int64
}

// OffsetMaps keeps the offset maps of translate-mode partitions.
type OffsetMaps interface {
	// LoadOffsetMap returns the shifts of p in order (none: no shift yet).
	LoadOffsetMap(ctx context.Context, p Partition) ([]OffsetShift, error)
	// AppendOffsetShifts adds shifts to p's map durably before returning.
	AppendOffsetShifts(ctx context.Context, p Partition, shifts []OffsetShift) error
}

// TranslateOffset returns the destination offset of source offset source
// under the offset map m: the destination offset of the first record at or
// after it. A source offset in a hole maps to the record after the hole.
func TranslateOffset(m []OffsetShift, source int64) int64 {
	i := sort.Search(len(m), func(i int) bool { return m[i].Source > source })
	d := source // before the first shift: identical
	if i > 0 {
		d = m[i-1].Destination + (source - m[i-1].Source)
	}
	if i < len(m) {
		d = min(d, m[i].Destination)
	}
	return d
}

// sourceOffsetOf returns the source offset that belongs at destination
// offset dest (the next one to append when dest is the log end offset).
func sourceOffsetOf(m []OffsetShift, dest int64) int64 {
	i := sort.Search(len(m), func(i int) bool { return m[i].Destination > dest })
	if i == 0 {
		return dest
	}
	e := m[i-1]
	return e.Source + (dest - e.Destination)
}

// validShifts returns the shifts of m that can describe a log ending at
// destination offset leo: a shift recorded for a batch whose append then
// failed lies beyond the log end offset, and the next append records the
// shift anew.
func validShifts(m []OffsetShift, leo int64) []OffsetShift {
	i := sort.Search(len(m), func(i int) bool { return m[i].Destination > leo })
	return m[:i]
}

// lastShift returns source minus destination offset after the last shift.
func lastShift(m []OffsetShift) int64 {
	if len(m) == 0 {
		return 0
	}
	return m[len(m)-1].Source - m[len(m)-1].Destination
}

// MaxOffsetShifts is how many offset shifts a translate-mode partition may
// record: its whole map is one __mirror_state value, about 17 bytes a
// shift, which must stay below the topic's 1 MiB message size. A partition
// that needs more fails with ErrOffsetMapFull instead of writing a value
// the destination would refuse.
const MaxOffsetShifts = 50_000

// maxOffsetShifts is MaxOffsetShifts; tests lower it.
var maxOffsetShifts = MaxOffsetShifts

// recordShifts stores, of shifts (source offsets in order, each the place
// of a record about to be appended), those that change the shift.
func (p *partition) recordShifts(shifts []OffsetShift) error {
	cur := lastShift(p.omap)
	var keep []OffsetShift
	for _, s := range shifts {
		if s.Source-s.Destination != cur {
			keep = append(keep, s)
			cur = s.Source - s.Destination
		}
	}
	if len(keep) == 0 {
		return nil
	}
	if n := len(p.omap) + len(keep); n > maxOffsetShifts {
		return fmt.Errorf("%w: %s needs %d offset shifts at source offset %d, more than the %d its __mirror_state record holds "+
			"(one per run of compaction holes); mirror this topic with mirror.offsets=exact instead",
			ErrOffsetMapFull, p.key, n, keep[0].Source, maxOffsetShifts)
	}
	if err := p.m.cfg.offsetMaps.AppendOffsetShifts(p.ctx, p.key, keep); err != nil {
		return fmt.Errorf("recording the offset map of %s: %w", p.key, err)
	}
	p.omap = append(p.omap, keep...)
	p.log.Debug("offset shift recorded", zap.Int64("source-offset", keep[len(keep)-1].Source),
		zap.Int64("destination-offset", keep[len(keep)-1].Destination), zap.Int("shifts", len(p.omap)))
	return nil
}

// submitTranslated appends the checked source batch b (parsed as rb,
// starting at or after the source cursor) in translate mode.
func (p *partition) submitTranslated(pl *pipeline, b []byte, rb *kmsg.RecordBatch, action batchAction) error {
	last := rb.FirstOffset + int64(rb.LastOffsetDelta)
	switch {
	case action == actionMarker:
		if err := pl.waitIdle(); err != nil {
			return err
		}
		if err := p.recordShifts([]OffsetShift{{rb.FirstOffset, pl.next}}); err != nil {
			return err
		}
		if err := p.replayMarker(pl, rb, pl.next, nil); err != nil {
			return err
		}
		p.setShift(pl, last+1)
		return nil
	case rb.NumRecords == 0: // an empty batch left by compaction
		p.setShift(pl, last+1)
		return nil
	}
	raw, n, rebuilt := b, rb.NumRecords, false
	var shifts []OffsetShift
	if int64(rb.NumRecords) != int64(rb.LastOffsetDelta)+1 {
		h, err := decodeHoledBatch(b, rb)
		if err != nil {
			return err
		}
		raw, rebuilt = compactBatch(p.m.zst, h), true
		for i, r := range h.recs {
			shifts = append(shifts, OffsetShift{rb.FirstOffset + int64(r.delta), pl.next + int64(i)})
		}
	} else {
		shifts = []OffsetShift{{rb.FirstOffset, pl.next}}
	}
	if err := p.recordShifts(shifts); err != nil {
		return err
	}
	if rb.Attributes&attrTransactional != 0 {
		if err := p.submitTxnBatch(pl, raw, rb.ProducerID, pl.next, n, 0, rebuilt); err != nil {
			return err
		}
	} else {
		if err := pl.waitRoom(); err != nil {
			return err
		}
		it := p.newItem(raw, pl.next, n, 0)
		it.rebuilt = rebuilt
		pl.submit(it)
	}
	p.setShift(pl, last+1)
	return nil
}

// setShift records that the source cursor is at srcNext while the
// destination's next offset is pl.next.
func (p *partition) setShift(pl *pipeline, srcNext int64) {
	pl.shift = srcNext - pl.next
	p.mu.Lock()
	p.shift = pl.shift
	p.mu.Unlock()
}
