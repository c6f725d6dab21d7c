package coordinator

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
)

// scriptedPlane is a DataPlane whose partition states the test sets and
// that records the partitions started.
type scriptedPlane struct {
	mu      sync.Mutex
	states  map[fetcher.Partition]fetcher.PartitionStatus
	started []fetcher.Partition
}

func (d *scriptedPlane) SetMirror(string, []kgo.Opt, fetcher.MirrorSettings) error { return nil }
func (d *scriptedPlane) SetMirrorSettings(string, fetcher.MirrorSettings) error    { return nil }
func (d *scriptedPlane) RemoveMirror(string)                                       {}
func (d *scriptedPlane) Stop(context.Context, fetcher.Partition) error             { return nil }

func (d *scriptedPlane) Start(p fetcher.Partition) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started = append(d.started, p)
	return nil
}

func (d *scriptedPlane) Status() []fetcher.PartitionStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []fetcher.PartitionStatus
	for _, s := range d.states {
		out = append(out, s)
	}
	return out
}

func (d *scriptedPlane) set(p fetcher.Partition, st fetcher.State, permanent bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.states[p] = fetcher.PartitionStatus{Partition: p, State: st, Permanent: permanent}
}

// takeStarted returns the partitions started since the last call.
func (d *scriptedPlane) takeStarted() []fetcher.Partition {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.started
	d.started = nil
	return out
}

// TestRetryFailed checks the automatic retries of FAILED partitions: after
// a growing backoff, at most maxAutoRetries times, never for a permanent
// failure, starting over once the partition mirrors again, and anew after
// an operator's --start.
func TestRetryFailed(t *testing.T) {
	plane := &scriptedPlane{states: map[fetcher.Partition]fetcher.PartitionStatus{}}
	s := newReconciler(&reconciler{dp: plane, writer: newStateWriter(&stateWriter{}), log: zaptest.NewLogger(t)})
	p := fetcher.Partition{Mirror: "m", Topic: "t", Partition: 0}
	perm := fetcher.Partition{Mirror: "m", Topic: "t", Partition: 1}
	s.running[p], s.running[perm] = &owned{state: fetcher.StateFailed}, &owned{state: fetcher.StateFailed}
	plane.set(p, fetcher.StateFailed, false)
	plane.set(perm, fetcher.StateFailed, true)

	now := time.Unix(1_000_000, 0)
	s.retryFailed(now) // the failure is seen: the first backoff begins
	for attempt := range int16(maxAutoRetries) {
		wait := retryBackoff(attempt)
		s.retryFailed(now.Add(wait - time.Millisecond))
		if got := plane.takeStarted(); len(got) != 0 {
			t.Fatalf("attempt %d: started %v before the backoff of %v passed", attempt+1, got, wait)
		}
		now = now.Add(wait)
		s.retryFailed(now)
		if got := plane.takeStarted(); !slices.Equal(got, []fetcher.Partition{p}) {
			t.Fatalf("attempt %d: started %v after the backoff of %v, want only %v", attempt+1, got, wait, p)
		}
		if got := s.retryAttempt(p); got != attempt+1 {
			t.Fatalf("retry attempt = %d, want %d", got, attempt+1)
		}
		s.retryFailed(now) // it failed again: the next backoff begins
	}
	if retryBackoff(1) <= retryBackoff(0) || retryBackoff(60) != retryBackoffMax {
		t.Fatalf("backoffs %v, %v, %v: want growing up to %v", retryBackoff(0), retryBackoff(1), retryBackoff(60), retryBackoffMax)
	}
	// Out of automatic retries: FAILED until an operator acts.
	s.retryFailed(now.Add(time.Hour))
	if got := plane.takeStarted(); len(got) != 0 {
		t.Fatalf("started %v after %d automatic retries", got, maxAutoRetries)
	}

	// An operator's --start (a new RestartGen) restarts it with new retries;
	// the permanent failure is restarted too, as the operator asked.
	st := fsm.NewState()
	st.Topics["t"] = &fsm.MirrorTopic{Name: "t", Mirror: "m", Partitions: 2, Status: fsm.TopicActive, RestartGen: 1}
	s.restartRequested(st) // the first pass only records the generation
	if got := plane.takeStarted(); len(got) != 0 {
		t.Fatalf("the first pass started %v", got)
	}
	st.Topics["t"].RestartGen = 2
	s.restartRequested(st)
	got := plane.takeStarted()
	slices.SortFunc(got, func(a, b fetcher.Partition) int { return int(a.Partition - b.Partition) })
	if !slices.Equal(got, []fetcher.Partition{p, perm}) {
		t.Fatalf("--start restarted %v, want %v", got, []fetcher.Partition{p, perm})
	}
	if got := s.retryAttempt(p); got != 0 {
		t.Fatalf("retry attempt after --start = %d, want 0", got)
	}

	// Mirroring again forgets the retries.
	plane.set(p, fetcher.StateMirroring, false)
	s.retries[p] = &retryState{attempt: 2}
	s.retryFailed(now)
	if got := s.retryAttempt(p); got != 0 {
		t.Fatalf("retry attempt after MIRRORING = %d, want 0", got)
	}
	// A partition this sidecar no longer drives is forgotten.
	plane.set(p, fetcher.StateFailed, false)
	s.retries[p] = &retryState{attempt: 1}
	delete(s.running, p)
	s.retryFailed(now)
	if _, ok := s.retries[p]; ok || len(plane.takeStarted()) != 0 {
		t.Fatal("the retries of a partition no longer driven were kept or acted on")
	}
}
