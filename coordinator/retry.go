package coordinator

import (
	"cmp"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/partstate"
)

// Automatic retries of FAILED partitions (DESIGN D12): a failed partition
// is restarted after a backoff that doubles from the mirror's
// mirror.partition.retry.backoff.ms (100 ms) up to
// mirror.partition.retry.backoff.max.ms (300 s), at most
// mirror.partition.retry.max.attempts (20) times; after that it stays
// FAILED until an operator recovers it (--recover, or --start of its
// topic), which resets the count. A partition that reaches MIRRORING again
// starts over. A permanent failure (fetcher.PartitionStatus.Permanent) is
// never retried automatically.
const (
	// RetryBackoffKey is mirror.partition.retry.backoff.ms: the wait before
	// the first automatic retry of a FAILED partition; it doubles with
	// every retry.
	RetryBackoffKey = "mirror.partition.retry.backoff.ms"
	// RetryBackoffMaxKey is mirror.partition.retry.backoff.max.ms: the
	// longest wait between two automatic retries.
	RetryBackoffMaxKey = "mirror.partition.retry.backoff.max.ms"
	// RetryMaxAttemptsKey is mirror.partition.retry.max.attempts: how many
	// automatic retries a FAILED partition gets (0: none).
	RetryMaxAttemptsKey = "mirror.partition.retry.max.attempts"

	defaultRetryBackoff     = 100 * time.Millisecond
	defaultRetryBackoffMax  = 300 * time.Second
	defaultRetryMaxAttempts = 20
)

// retryPolicy is a mirror's automatic retry policy of FAILED partitions.
type retryPolicy struct {
	backoff, backoffMax time.Duration
	maxAttempts         int16
}

// defaultRetryPolicy is the policy of a mirror that sets none of the keys.
var defaultRetryPolicy = retryPolicy{defaultRetryBackoff, defaultRetryBackoffMax, defaultRetryMaxAttempts}

// mirrorRetryPolicy returns the retry policy of mirror m (the defaults for
// nil). The values were checked when the config was accepted
// (checkMirrorKeys); a bad one falls back to its default.
func mirrorRetryPolicy(m *fsm.Mirror) retryPolicy {
	out := defaultRetryPolicy
	if m == nil {
		return out
	}
	if ms, err := strconv.ParseInt(mirrorSetting(m, RetryBackoffKey), 10, 64); err == nil && ms >= 1 {
		out.backoff = time.Duration(ms) * time.Millisecond
	}
	if ms, err := strconv.ParseInt(mirrorSetting(m, RetryBackoffMaxKey), 10, 64); err == nil && ms >= 1 {
		out.backoffMax = time.Duration(ms) * time.Millisecond
	}
	out.backoffMax = max(out.backoffMax, out.backoff)
	if n, err := strconv.ParseInt(mirrorSetting(m, RetryMaxAttemptsKey), 10, 16); err == nil && n >= 0 {
		out.maxAttempts = int16(n)
	}
	return out
}

// checkRetryKeys checks the retry keys of a mirror config together: the
// maximum backoff must not be below the first.
func checkRetryKeys(config map[string]string) error {
	first, err1 := strconv.ParseInt(cmp.Or(config[RetryBackoffKey], mirrorKeys[RetryBackoffKey].def), 10, 64)
	most, err2 := strconv.ParseInt(cmp.Or(config[RetryBackoffMaxKey], mirrorKeys[RetryBackoffMaxKey].def), 10, 64)
	if err1 == nil && err2 == nil && most < first {
		return fmt.Errorf("mirror config %s=%d is below %s=%d: the longest wait between retries must be at least the first",
			RetryBackoffMaxKey, most, RetryBackoffKey, first)
	}
	return nil
}

// retryState tracks the automatic retries of one partition.
type retryState struct {
	attempt int16
	nextAt  time.Time // zero until the failure has been seen
}

// backoff is the wait before automatic retry number attempt+1: the first
// backoff doubled attempt times, at most backoffMax.
func (p retryPolicy) backoffFor(attempt int16) time.Duration {
	d := p.backoff
	for range attempt {
		if d >= p.backoffMax {
			break
		}
		d *= 2
	}
	return min(d, p.backoffMax)
}

// retryFailed restarts the FAILED partitions this sidecar drives whose
// backoff has passed, by their mirror's retry policy in st, and forgets the
// retries of partitions that recovered or that it no longer drives. It
// returns when the next retry is due (zero if none is pending), so that the
// loop wakes up for it. Called by reconcile.
func (r *reconciler) retryFailed(now time.Time, st *fsm.State) time.Time {
	statuses := r.dp.Status()
	r.mu.Lock()
	var due []fetcher.Partition
	var next time.Time
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
			policy := mirrorRetryPolicy(st.Mirrors[p.Mirror])
			if rs == nil {
				rs = &retryState{}
				r.retries[p] = rs
			}
			if rs.attempt >= policy.maxAttempts {
				continue
			}
			if rs.nextAt.IsZero() {
				rs.nextAt = now.Add(policy.backoffFor(rs.attempt))
			}
			if now.Before(rs.nextAt) {
				if next.IsZero() || rs.nextAt.Before(next) {
					next = rs.nextAt
				}
				continue
			}
			rs.attempt++
			rs.nextAt = time.Time{}
			r.applyLocked(p, partstate.Retry)
			due = append(due, p)
			r.log.Info("retrying a FAILED partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic),
				zap.Int32("partition", p.Partition), zap.Int16("attempt", rs.attempt), zap.Int16("of", policy.maxAttempts),
				zap.String("error", ps.LastError))
		}
	}
	for p := range r.retries {
		if !seen[p] || r.running[p] == nil {
			delete(r.retries, p)
		}
	}
	r.mu.Unlock()
	for _, p := range due {
		if err := r.dp.Start(p); err != nil {
			r.log.Warn("retry of a FAILED partition", zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
		}
	}
	return next
}

// retryInfo returns what describe shows of p's automatic retries: the
// retries made so far, the most its mirror allows, and whether its failure
// is one that is never retried automatically. r.mu is held.
func (r *reconciler) retryInfoLocked(ps fetcher.PartitionStatus, m *fsm.Mirror) (attempt, most int16, nonRetryable bool) {
	return r.retryAttemptLocked(ps.Partition), mirrorRetryPolicy(m).maxAttempts, ps.Permanent
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
		if err := r.dp.Recover(p); err != nil {
			r.log.Warn("restart of a FAILED partition", zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
		}
	}
}
