package coordinator

import (
	"time"

	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/partstate"
)

// Automatic retries of FAILED partitions (DESIGN D12): a failed partition
// is restarted after a backoff, up to maxAutoRetries times; after that it
// stays FAILED until an operator starts its topic again (--start), which
// resets the count. A partition that reaches MIRRORING again starts over.
// A permanent failure (fetcher.PartitionStatus.Permanent) is never retried
// automatically.
const (
	maxAutoRetries   = 3
	retryBackoffBase = 10 * time.Second
	retryBackoffMax  = 2 * time.Minute
)

// retryState tracks the automatic retries of one partition.
type retryState struct {
	attempt int16
	nextAt  time.Time // zero until the failure has been seen
}

// retryBackoff is the wait before automatic retry number attempt+1.
func retryBackoff(attempt int16) time.Duration {
	d := retryBackoffBase << attempt
	if d > retryBackoffMax || d <= 0 {
		d = retryBackoffMax
	}
	return d
}

// retryFailed restarts the FAILED partitions this sidecar drives whose
// backoff has passed, and forgets the retries of partitions that recovered
// or that it no longer drives. Called by reconcile.
func (r *reconciler) retryFailed(now time.Time) {
	statuses := r.dp.Status()
	r.mu.Lock()
	var due []fetcher.Partition
	seen := map[fetcher.Partition]bool{}
	for _, ps := range statuses {
		p := ps.Partition
		seen[p] = true
		if r.running[p] == nil {
			continue
		}
		rs := r.retries[p]
		switch {
		case ps.State == fetcher.StateMirroring && rs != nil:
			delete(r.retries, p)
		case ps.State == fetcher.StateFailed && !ps.Permanent:
			if rs == nil {
				rs = &retryState{}
				r.retries[p] = rs
			}
			if rs.attempt >= maxAutoRetries {
				continue
			}
			if rs.nextAt.IsZero() {
				rs.nextAt = now.Add(retryBackoff(rs.attempt))
				continue
			}
			if !now.Before(rs.nextAt) {
				rs.attempt++
				rs.nextAt = time.Time{}
				r.applyLocked(p, partstate.Retry)
				due = append(due, p)
			}
		}
	}
	for p := range r.retries {
		if !seen[p] || r.running[p] == nil {
			delete(r.retries, p)
		}
	}
	r.mu.Unlock()
	for _, p := range due {
		r.log.Info("retrying a FAILED partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic),
			zap.Int32("partition", p.Partition), zap.Int16("attempt", r.retryAttempt(p)), zap.Int("of", maxAutoRetries))
		if err := r.dp.Start(p); err != nil {
			r.log.Warn("retry of a FAILED partition", zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
		}
	}
}

// retryAttempt returns the automatic retries made for p so far.
func (r *reconciler) retryAttempt(p fetcher.Partition) int16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retryAttemptLocked(p)
}

func (r *reconciler) retryAttemptLocked(p fetcher.Partition) int16 {
	if rs := r.retries[p]; rs != nil {
		return rs.attempt
	}
	return 0
}

// resetRetries forgets the retries of a topic's partitions, so that an
// operator's --start grants new automatic retries.
func (r *reconciler) resetRetries(mirror, topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.retries {
		if p.Mirror == mirror && p.Topic == topic {
			delete(r.retries, p)
		}
	}
}

// restartRequested restarts the FAILED partitions this sidecar drives of
// topics whose RestartGen grew since the last pass (an operator's --start),
// with new automatic retries. The first pass only records the generations.
func (r *reconciler) restartRequested(st *fsm.State) {
	statuses := r.dp.Status()
	r.mu.Lock()
	var due []fetcher.Partition
	bumped := map[string]bool{}
	for name, t := range st.Topics {
		seen, known := r.restartGen[name]
		r.restartGen[name] = t.RestartGen
		if known && t.RestartGen > seen && t.Status == fsm.TopicActive {
			bumped[name] = true
		}
	}
	for _, ps := range statuses {
		if bumped[ps.Topic] && ps.State == fetcher.StateFailed && r.running[ps.Partition] != nil {
			r.applyLocked(ps.Partition, partstate.Restart)
			due = append(due, ps.Partition)
		}
	}
	r.mu.Unlock()
	for _, p := range due {
		r.resetRetries(p.Mirror, p.Topic)
		r.log.Info("restarting a FAILED partition on the operator's request", zap.String("mirror", p.Mirror),
			zap.String("topic", p.Topic), zap.Int32("partition", p.Partition))
		if err := r.dp.Start(p); err != nil {
			r.log.Warn("restart of a FAILED partition", zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
		}
	}
}
