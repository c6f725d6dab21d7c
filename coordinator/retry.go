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
func (s *Service) retryFailed(now time.Time) {
	statuses := s.cfg.DataPlane.Status()
	s.mu.Lock()
	var due []fetcher.Partition
	seen := map[fetcher.Partition]bool{}
	for _, ps := range statuses {
		p := ps.Partition
		seen[p] = true
		if s.running[p] == nil {
			continue
		}
		r := s.retries[p]
		switch {
		case ps.State == fetcher.StateMirroring && r != nil:
			delete(s.retries, p)
		case ps.State == fetcher.StateFailed && !ps.Permanent:
			if r == nil {
				r = &retryState{}
				s.retries[p] = r
			}
			if r.attempt >= maxAutoRetries {
				continue
			}
			if r.nextAt.IsZero() {
				r.nextAt = now.Add(retryBackoff(r.attempt))
				continue
			}
			if !now.Before(r.nextAt) {
				r.attempt++
				r.nextAt = time.Time{}
				s.applyLocked(p, partstate.Retry)
				due = append(due, p)
			}
		}
	}
	for p := range s.retries {
		if !seen[p] || s.running[p] == nil {
			delete(s.retries, p)
		}
	}
	s.mu.Unlock()
	for _, p := range due {
		s.log.Info("retrying a FAILED partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic),
			zap.Int32("partition", p.Partition), zap.Int16("attempt", s.retryAttempt(p)), zap.Int("of", maxAutoRetries))
		if err := s.cfg.DataPlane.Start(p); err != nil {
			s.log.Warn("retry of a FAILED partition", zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
		}
	}
}

// retryAttempt returns the automatic retries made for p so far.
func (s *Service) retryAttempt(p fetcher.Partition) int16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.retries[p]; r != nil {
		return r.attempt
	}
	return 0
}

// resetRetries forgets the retries of a topic's partitions, so that an
// operator's --start grants new automatic retries.
func (s *Service) resetRetries(mirror, topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.retries {
		if p.Mirror == mirror && p.Topic == topic {
			delete(s.retries, p)
		}
	}
}

// restartRequested restarts the FAILED partitions this sidecar drives of
// topics whose RestartGen grew since the last pass (an operator's --start),
// with new automatic retries. The first pass only records the generations.
func (s *Service) restartRequested(st *fsm.State) {
	statuses := s.cfg.DataPlane.Status()
	s.mu.Lock()
	var due []fetcher.Partition
	bumped := map[string]bool{}
	for name, t := range st.Topics {
		seen, known := s.restartGen[name]
		s.restartGen[name] = t.RestartGen
		if known && t.RestartGen > seen && t.Status == fsm.TopicActive {
			bumped[name] = true
		}
	}
	for _, ps := range statuses {
		if bumped[ps.Topic] && ps.State == fetcher.StateFailed && s.running[ps.Partition] != nil {
			s.applyLocked(ps.Partition, partstate.Restart)
			due = append(due, ps.Partition)
		}
	}
	s.mu.Unlock()
	for _, p := range due {
		s.resetRetries(p.Mirror, p.Topic)
		s.log.Info("restarting a FAILED partition on the operator's request", zap.String("mirror", p.Mirror),
			zap.String("topic", p.Topic), zap.Int32("partition", p.Partition))
		if err := s.cfg.DataPlane.Start(p); err != nil {
			s.log.Warn("restart of a FAILED partition", zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
		}
	}
}
