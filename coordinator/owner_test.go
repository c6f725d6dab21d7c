package coordinator

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/partstate"
	"github.com/sidemirror/sidemirror/protocol"
)

// stoppingPlane is a scriptedPlane that calls onStop when a partition's
// driver is removed, before StopPartitions returns.
// It records each call's partitions, and reports the partitions of fail
// as not stopped.
type stoppingPlane struct {
	scriptedPlane
	onStop func(p fetcher.Partition)
	calls  [][]fetcher.Partition
	fail   map[fetcher.Partition]error
}

func (d *stoppingPlane) StopPartitions(_ context.Context, ps []fetcher.Partition) map[fetcher.Partition]error {
	d.calls = append(d.calls, ps)
	for _, p := range ps {
		if d.fail[p] == nil {
			d.onStop(p)
		}
	}
	return d.fail
}

// TestOwnerRecordsItsStates drives partitions of a mirror whose
// __mirror_state coordinator is this sidecar (on a kfake destination) and
// checks what the owner records as the partition state machine moves
// them: the driver's reports; PAUSING before the driver of a paused topic
// is removed and PAUSED after; STOPPING before the driver of a stopped
// topic is removed, which stays for the stop sequence; the state as it is,
// with the last offset, when the broker no longer leads it; and at
// shutdown (Service.PersistStates) every partition still driven.
func TestOwnerRecordsItsStates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, cl, store := newStateStore(t, 1)
	st := fsm.NewState()
	st.Mirrors["m"] = &fsm.Mirror{Name: "m"}
	for _, name := range []string{"paused", "stopped", "moved", "active"} {
		st.Topics[name] = &fsm.MirrorTopic{Name: name, Mirror: "m", Partitions: 1, Status: fsm.TopicActive}
	}
	sc := newStateCoordinator(store, cl, 0, zaptest.NewLogger(t))
	if err := sc.refresh(ctx, st); err != nil {
		t.Fatal(err)
	}
	plane := &stoppingPlane{scriptedPlane: scriptedPlane{states: map[fetcher.Partition]fetcher.PartitionStatus{}}}
	w := newStateWriter(&stateWriter{brokerID: 0, coord: sc, now: time.Now, log: zaptest.NewLogger(t)})
	r := newReconciler(&reconciler{brokerID: 0, dp: plane, writer: w, now: time.Now, log: zaptest.NewLogger(t)})

	part := func(topic string) fetcher.Partition {
		return fetcher.Partition{Mirror: "m", Topic: topic, Partition: 0}
	}
	// recorded returns the state __mirror_state holds for topic's
	// partition and its last source offset.
	recorded := func(topic string) (string, int64) {
		t.Helper()
		resp := sc.read(&protocol.ReadMirrorStatesRequest{MirrorName: "m"})
		for _, rt := range resp.Topics {
			if rt.Name == topic && len(rt.Partitions) == 1 {
				return stateName(rt.Partitions[0].State), rt.Partitions[0].LastSourceOffset
			}
		}
		return "none", -1
	}
	// Every partition is driven and reports MIRRORING at offset 40.
	for _, topic := range []string{"paused", "stopped", "moved", "active"} {
		p := part(topic)
		r.running[p] = &owned{state: partstate.Next(partstate.Unknown, partstate.Lead).To}
		r.StateChanged(fetcher.PartitionStatus{Partition: p, State: fetcher.StateLogTruncation, DestinationLogEndOffset: 30})
		r.StateChanged(fetcher.PartitionStatus{Partition: p, State: fetcher.StateMirroring, DestinationLogEndOffset: 40})
		// The data plane's own STOPPING is no event of the owner's.
		r.StateChanged(fetcher.PartitionStatus{Partition: p, State: fetcher.StateStopping, DestinationLogEndOffset: 40})
	}
	w.flush(ctx)
	for _, topic := range []string{"paused", "stopped", "moved", "active"} {
		if got, off := recorded(topic); got != "MIRRORING" || off != 40 {
			t.Fatalf("%s recorded as %s at %d, want MIRRORING at 40", topic, got, off)
		}
	}

	st.Topics["paused"].Status = fsm.TopicPaused
	st.Topics["stopped"].Status = fsm.TopicStopped
	atRemoval := map[string]string{}
	plane.onStop = func(p fetcher.Partition) { atRemoval[p.Topic], _ = recorded(p.Topic) }
	r.letGo(ctx, st, []fetcher.Partition{part("paused"), part("stopped"), part("moved")})
	if len(plane.calls) != 1 || len(plane.calls[0]) != 3 {
		t.Fatalf("StopPartitions calls %v, want one for the three partitions", plane.calls)
	}
	w.flush(ctx)
	for topic, want := range map[string][2]string{
		"paused":  {"PAUSING", "PAUSED"},
		"stopped": {"STOPPING", "STOPPING"}, // STOPPED is the stop sequence's
		"moved":   {"MIRRORING", "MIRRORING"},
	} {
		if got, _ := recorded(topic); atRemoval[topic] != want[0] || got != want[1] {
			t.Errorf("%s: recorded %s when its driver was removed and %s after, want %s and %s", topic, atRemoval[topic], got, want[0], want[1])
		}
		if r.running[part(topic)] != nil {
			t.Errorf("%s is still driven after it was let go", topic)
		}
	}

	// A driver that does not stop in time stays driven (the next pass lets
	// it go again).
	plane.fail = map[fetcher.Partition]error{part("active"): context.DeadlineExceeded}
	r.letGo(ctx, st, []fetcher.Partition{part("active")})
	if r.running[part("active")] == nil {
		t.Fatal("a partition whose driver did not stop was forgotten")
	}

	// Shutdown: the driver of "active" ends at offset 55 (the data plane's
	// STOPPED, no event), and its state goes to __mirror_state with it.
	r.StateChanged(fetcher.PartitionStatus{Partition: part("active"), State: fetcher.StateStopped, DestinationLogEndOffset: 55})
	r.releaseAll()
	w.flushAll(ctx)
	if got, off := recorded("active"); got != "MIRRORING" || off != 55 {
		t.Fatalf("after PersistStates active is recorded as %s at %d, want MIRRORING at 55", got, off)
	}
}
