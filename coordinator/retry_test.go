package coordinator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
)

// scriptedPlane is a DataPlane whose partition states the test sets and
// that records the partitions started.
type scriptedPlane struct {
	mu        sync.Mutex
	states    map[fetcher.Partition]fetcher.PartitionStatus
	started   []fetcher.Partition
	recovered []fetcher.Partition // by Recover (also in started)
}

func (d *scriptedPlane) SetMirror(string, []kgo.Opt, fetcher.MirrorSettings) error { return nil }
func (d *scriptedPlane) SetMirrorSettings(string, fetcher.MirrorSettings) error    { return nil }
func (d *scriptedPlane) SetReplicationThrottle(fetcher.ReplicationThrottle)        {}
func (d *scriptedPlane) RemoveMirror(string)                                       {}
func (d *scriptedPlane) StopPartitions(context.Context, []fetcher.Partition) map[fetcher.Partition]error {
	return nil
}

func (d *scriptedPlane) Start(p fetcher.Partition) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started = append(d.started, p)
	return nil
}

func (d *scriptedPlane) Recover(p fetcher.Partition) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started = append(d.started, p)
	d.recovered = append(d.recovered, p)
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

// TestRetryFailed checks the automatic retries of FAILED partitions with
// the default policy: after a backoff doubling from 100 ms up to 300 s, at
// most 20 times, never for a permanent failure, starting over once the
// partition mirrors again, and anew after an operator's restart.
func TestRetryFailed(t *testing.T) {
	plane := &scriptedPlane{states: map[fetcher.Partition]fetcher.PartitionStatus{}}
	s := newReconciler(&reconciler{dp: plane, writer: newStateWriter(&stateWriter{}), log: zaptest.NewLogger(t)})
	p := fetcher.Partition{Mirror: "m", Topic: "t", Partition: 0}
	perm := fetcher.Partition{Mirror: "m", Topic: "t", Partition: 1}
	s.running[p], s.running[perm] = &owned{state: fetcher.StateFailed}, &owned{state: fetcher.StateFailed}
	plane.set(p, fetcher.StateFailed, false)
	plane.set(perm, fetcher.StateFailed, true)
	st := fsm.NewState()
	st.Mirrors["m"] = &fsm.Mirror{Name: "m", Config: map[string]string{"bootstrap.servers": "src:9092"}}

	start := time.Unix(1_000_000, 0)
	now := start
	next := s.retryFailed(now, st) // the failure is seen: the first backoff begins
	var waits []time.Duration
	for attempt := int16(1); attempt <= 20; attempt++ {
		wait := next.Sub(now)
		waits = append(waits, wait)
		if again := s.retryFailed(next.Add(-time.Millisecond), st); !again.Equal(next) {
			t.Fatalf("attempt %d: due at %v, then at %v before it ran", attempt, next, again)
		}
		if got := plane.takeStarted(); len(got) != 0 {
			t.Fatalf("attempt %d: started %v before the backoff of %v passed", attempt, got, wait)
		}
		now = next
		if after := s.retryFailed(now, st); !after.IsZero() {
			t.Fatalf("attempt %d: another retry due at %v while the partition restarts", attempt, after)
		}
		if got := plane.takeStarted(); !slices.Equal(got, []fetcher.Partition{p}) {
			t.Fatalf("attempt %d: started %v after the backoff of %v, want only %v", attempt, got, wait, p)
		}
		if got := s.retryAttempt(p); got != attempt {
			t.Fatalf("retry attempt = %d, want %d", got, attempt)
		}
		s.StateChanged(fetcher.PartitionStatus{Partition: p, State: fetcher.StateFailed}) // it failed again
		next = s.retryFailed(now, st)                                                     // the next backoff begins
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	if !slices.Equal(waits[:4], want) {
		t.Fatalf("first backoffs %v, want %v", waits[:4], want)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] < waits[i-1] || waits[i] > 300*time.Second {
			t.Fatalf("backoffs %v: want doubling up to 300s", waits)
		}
	}
	if waits[len(waits)-1] != 300*time.Second {
		t.Fatalf("last backoff %v, want 300s", waits[len(waits)-1])
	}
	// Out of automatic retries: FAILED until an operator acts, and nothing
	// wakes the loop for it.
	if next := s.retryFailed(now.Add(time.Hour), st); !next.IsZero() || len(plane.takeStarted()) != 0 {
		t.Fatalf("after 20 automatic retries: next retry %v, started %v", next, plane.takeStarted())
	}
	rows := s.LocalRows(nil)
	got := map[int32]protocol.PartitionDetail{}
	for _, d := range rows[0].Topics[0].Partitions {
		got[d.PartitionIndex] = d
	}
	if d := got[0]; d.RetryAttempt != 20 || d.MaxRetryAttempts != 20 || d.NonRetryable {
		t.Fatalf("describe row of the retried partition: %d/%d non-retryable %v, want 20/20 retryable", d.RetryAttempt, d.MaxRetryAttempts, d.NonRetryable)
	}
	if d := got[1]; d.RetryAttempt != 0 || !d.NonRetryable {
		t.Fatalf("describe row of the permanent failure: %d retries, non-retryable %v", d.RetryAttempt, d.NonRetryable)
	}

	plane.mu.Lock()
	auto := len(plane.recovered)
	plane.mu.Unlock()
	if auto != 0 {
		t.Fatalf("%d automatic retries started with Recover, want Start: only the operator accepts the destination as it stands", auto)
	}

	// An operator's restart (a new RestartGen) restarts both with new
	// retries, with Recover; the permanent failure too, as the operator
	// asked.
	st.Topics["t"] = &fsm.MirrorTopic{Name: "t", Mirror: "m", Partitions: 2, Status: fsm.TopicActive, RestartGen: 1}
	s.restartRequested(st) // the first pass only records the generation
	if got := plane.takeStarted(); len(got) != 0 {
		t.Fatalf("the first pass started %v", got)
	}
	st.Topics["t"].RestartGen = 2
	s.restartRequested(st)
	started := plane.takeStarted()
	slices.SortFunc(started, func(a, b fetcher.Partition) int { return int(a.Partition - b.Partition) })
	if !slices.Equal(started, []fetcher.Partition{p, perm}) {
		t.Fatalf("the restart started %v, want %v", started, []fetcher.Partition{p, perm})
	}
	plane.mu.Lock()
	recovered := slices.Clone(plane.recovered)
	plane.mu.Unlock()
	if len(recovered) != 2 {
		t.Fatalf("the restart recovered %v, want both with Recover", recovered)
	}
	if got := s.retryAttempt(p); got != 0 {
		t.Fatalf("retry attempt after the restart = %d, want 0", got)
	}

	// Mirroring again forgets the retries.
	plane.set(p, fetcher.StateMirroring, false)
	s.retries[p] = &retryState{attempt: 2}
	s.retryFailed(now, st)
	if got := s.retryAttempt(p); got != 0 {
		t.Fatalf("retry attempt after MIRRORING = %d, want 0", got)
	}
	// A partition this sidecar no longer drives is forgotten.
	plane.set(p, fetcher.StateFailed, false)
	s.retries[p] = &retryState{attempt: 1}
	delete(s.running, p)
	s.retryFailed(now, st)
	if _, ok := s.retries[p]; ok || len(plane.takeStarted()) != 0 {
		t.Fatal("the retries of a partition no longer driven were kept or acted on")
	}
}

// TestRetryPolicyConfigured checks that a mirror's retry keys set the
// backoffs and the number of retries, and that bad values are refused by
// name.
func TestRetryPolicyConfigured(t *testing.T) {
	plane := &scriptedPlane{states: map[fetcher.Partition]fetcher.PartitionStatus{}}
	s := newReconciler(&reconciler{dp: plane, writer: newStateWriter(&stateWriter{}), log: zaptest.NewLogger(t)})
	p := fetcher.Partition{Mirror: "m", Topic: "t", Partition: 0}
	s.running[p] = &owned{state: fetcher.StateFailed}
	plane.set(p, fetcher.StateFailed, false)
	cfg := map[string]string{"bootstrap.servers": "src:9092", RetryBackoffKey: "1000", RetryBackoffMaxKey: "1500", RetryMaxAttemptsKey: "2"}
	if err := checkMirrorKeys(cfg); err != nil {
		t.Fatal(err)
	}
	st := fsm.NewState()
	st.Mirrors["m"] = &fsm.Mirror{Name: "m", Config: cfg}

	now := time.Unix(1_000_000, 0)
	var waits []time.Duration
	for next := s.retryFailed(now, st); !next.IsZero(); next = s.retryFailed(now, st) {
		waits = append(waits, next.Sub(now))
		now = next
		s.retryFailed(now, st)
		if len(plane.takeStarted()) != 1 {
			t.Fatalf("retry %d did not start the partition", len(waits))
		}
	}
	if want := []time.Duration{time.Second, 1500 * time.Millisecond}; !slices.Equal(waits, want) {
		t.Fatalf("backoffs %v, want %v", waits, want)
	}

	for _, bad := range []map[string]string{
		{RetryBackoffKey: "0"},
		{RetryBackoffMaxKey: "soon"},
		{RetryMaxAttemptsKey: "-1"},
		{RetryBackoffKey: "5000", RetryBackoffMaxKey: "1000"},
	} {
		err := checkMirrorKeys(bad)
		if err == nil {
			t.Fatalf("%v accepted", bad)
		}
		for k := range bad {
			if !strings.Contains(err.Error(), k) {
				t.Fatalf("%v: error %q does not name %s", bad, err, k)
			}
		}
	}
}
