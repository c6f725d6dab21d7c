package fetcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// freshness is what a partition knows about how current its copy is: the
// lag in time, the last successful fetch and whether its source can be
// reached (DESIGN.md, "Lag in time and an unreachable source"). Guarded by
// partition.mu.
type freshness struct {
	created    time.Time // the driver's creation
	behindAt   time.Time // since when it is behind: the last catch-up before it fell behind, or the creation
	lastFetch  time.Time // the last successful fetch response; zero: none yet
	trouble    time.Time // the first failed fetch or source look-up since lastFetch; zero: none
	troubleErr error     // the last of those failures
	caughtUpAt time.Time // the destination held all the source had as of this moment; zero: never
	marks      []hwMark  // source high watermarks seen at fetch times that the destination has not reached
	behind     bool      // not caught up (since the start, or for unreachableAfter): the next catch-up is logged
	unreach    bool      // the unreachable source was logged: the next successful fetch is logged
}

// hwMark is a source high watermark and the time the fetch that saw it was
// sent: once the destination log end offset reaches hw, the destination
// holds every record the source had at that time.
type hwMark struct {
	at time.Time
	hw int64
}

// maxHWMarks bounds the marks of a partition copying a backlog: a full
// list takes the newer mark in place of its last one (a later time, a
// higher watermark: the lag in time errs high, never low).
const maxHWMarks = 32

// reachedLocked reports whether the destination holds source offset hw-1.
func (p *partition) reachedLocked(hw int64) bool {
	return p.dstLEO >= 0 && p.dstLEO+p.shift >= hw
}

// fetchedLocked records a successful fetch sent at sent that saw source
// high watermark hw (-1: none).
func (p *partition) fetchedLocked(sent time.Time, hw int64) {
	fr := &p.fresh
	fr.lastFetch, fr.trouble, fr.troubleErr = time.Now(), time.Time{}, nil
	if p.srcErr && p.state != StateFailed {
		p.lastErr, p.srcErr = "", false
	}
	if fr.unreach {
		fr.unreach = false
		p.log.Info("source reachable again")
	}
	p.markLocked(sent, hw)
}

// markLocked records that the source's high watermark was hw (-1: none)
// for a request sent at sent.
func (p *partition) markLocked(sent time.Time, hw int64) {
	fr := &p.fresh
	if hw < 0 {
		return
	}
	switch n := len(fr.marks); {
	case p.reachedLocked(hw):
		fr.caughtUpAt = sent
	case n > 0 && fr.marks[n-1].hw >= hw:
		// An older fetch saw as much: its earlier time stands.
	case n == maxHWMarks:
		fr.marks[n-1] = hwMark{at: sent, hw: hw}
	default:
		fr.marks = append(fr.marks, hwMark{at: sent, hw: hw})
	}
}

// progressLocked takes the marks the destination reached, after its log
// end offset or the source high watermark moved, and logs a catch-up.
func (p *partition) progressLocked() {
	fr := &p.fresh
	i := 0
	for ; i < len(fr.marks) && p.reachedLocked(fr.marks[i].hw); i++ {
		fr.caughtUpAt = fr.marks[i].at
	}
	if i > 0 {
		fr.marks = append(fr.marks[:0], fr.marks[i:]...)
	}
	now := time.Now()
	switch {
	case fr.behind && p.srcHW >= 0 && p.reachedLocked(p.srcHW) && !fr.caughtUpAt.IsZero() &&
		now.Sub(fr.caughtUpAt) < p.m.cfg.unreachable:
		// Caught up with a recent fetch (not with the last high watermark
		// an unreachable source gave).
		fr.behind = false
		p.log.Info("partition caught up with the source",
			zap.Int64("destination-log-end-offset", p.dstLEO), zap.Int64("source-high-watermark", p.srcHW),
			zap.Duration("behind-for", now.Sub(fr.behindAt).Round(time.Millisecond)))
	default:
		p.checkBehindLocked(now)
	}
}

// checkBehindLocked logs, once, that a caught-up partition's lag in time
// passed the unreachable threshold.
func (p *partition) checkBehindLocked(now time.Time) {
	fr := &p.fresh
	if fr.behind || p.state == StateFailed || p.state == StateStopped || p.lagTimeLocked(now) < p.m.cfg.unreachable {
		return
	}
	fr.behind, fr.behindAt = true, fr.created
	if !fr.caughtUpAt.IsZero() {
		fr.behindAt = fr.caughtUpAt
	}
	p.log.Warn("partition fell behind the source",
		zap.Duration("lag-time", p.lagTimeLocked(now).Round(time.Millisecond)),
		zap.Int64("lag-records", max(0, p.srcHW-p.dstLEO-p.shift)))
}

// sourceTrouble records a failed fetch or source look-up.
func (p *partition) sourceTrouble(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sourceTroubleLocked(err)
}

func (p *partition) sourceTroubleLocked(err error) {
	fr := &p.fresh
	now := time.Now()
	if fr.trouble.IsZero() {
		fr.trouble = now
	}
	fr.troubleErr = err
	p.watchLocked(now)
}

// watchLocked logs, once per transition, that the partition fell behind or
// that its source became unreachable. Called on fetch failures and by the
// Manager's watch loop, since a hung source produces no failure for a while.
func (p *partition) watchLocked(now time.Time) {
	fr := &p.fresh
	p.checkBehindLocked(now)
	if since := p.unreachableSinceLocked(now); !since.IsZero() && !fr.unreach {
		fr.unreach = true
		fields := []zap.Field{zap.Int64("last-known-source-high-watermark", p.srcHW)}
		if fr.troubleErr != nil {
			fields = append(fields, zap.Error(fr.troubleErr))
		}
		p.log.Warn("source unreachable: no fetch succeeded since "+since.UTC().Format(time.RFC3339), fields...)
	}
}

// watch runs watchLocked for every partition until the Manager closes.
func (m *Manager) watch() {
	t := time.NewTicker(min(time.Second, m.cfg.unreachable/4))
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case now := <-t.C:
			for _, p := range m.partitions() {
				p.mu.Lock()
				p.watchLocked(now)
				p.mu.Unlock()
			}
		}
	}
}

// lagTimeLocked is PartitionStatus.LagTime.
func (p *partition) lagTimeLocked(now time.Time) time.Duration {
	base := p.fresh.caughtUpAt
	if base.IsZero() {
		base = p.fresh.created
	}
	return max(0, now.Sub(base))
}

// unreachableSinceLocked is PartitionStatus.SourceUnreachableSince.
func (p *partition) unreachableSinceLocked(now time.Time) time.Time {
	if p.state == StateFailed || p.state == StateStopped {
		return time.Time{}
	}
	fr := &p.fresh
	since := fr.lastFetch
	if since.IsZero() {
		since = fr.created
	}
	after := p.m.cfg.unreachable
	if now.Sub(since) < after {
		return time.Time{}
	}
	hung := p.fetch.inflight && now.Sub(p.fetch.sentAt) >= after
	if fr.trouble.IsZero() && !hung {
		return time.Time{}
	}
	return since
}

// SourceHealth is whether this sidecar reaches a mirror's source cluster.
type SourceHealth struct {
	Mirror string
	// Err is why no source broker answered; nil if one did.
	Err error
	// Unreachable counts the mirror's partitions here whose source is
	// unreachable (PartitionStatus.SourceUnreachableSince): their leaders
	// may be cut off while another source broker answers.
	Unreachable int
}

// CheckSources asks each mirror's source cluster for broker metadata (one
// answer from any of its brokers is enough) and counts each mirror's
// unreachable partitions, in mirror name order; it returns when every
// source answered or ctx ended.
func (m *Manager) CheckSources(ctx context.Context) []SourceHealth {
	m.mu.Lock()
	mirrors := make([]*mirror, 0, len(m.mirrors))
	for _, mir := range m.mirrors {
		mirrors = append(mirrors, mir)
	}
	m.mu.Unlock()
	slices.SortFunc(mirrors, func(a, b *mirror) int { return strings.Compare(a.name, b.name) })
	out := make([]SourceHealth, len(mirrors))
	var wg sync.WaitGroup
	for i, mir := range mirrors {
		out[i].Mirror = mir.name
		wg.Add(1)
		go func() { // bounded by ctx; waited for below
			defer wg.Done()
			if err := mir.cl.Ping(ctx); err != nil {
				out[i].Err = fmt.Errorf("no broker of the source of mirror %s answered: %w", mir.name, err)
			}
		}()
	}
	wg.Wait()
	index := make(map[string]int, len(out))
	for i, h := range out {
		index[h.Mirror] = i
	}
	for _, st := range m.Status() {
		if i, ok := index[st.Mirror]; ok && !st.SourceUnreachableSince.IsZero() {
			out[i].Unreachable++
		}
	}
	return out
}
