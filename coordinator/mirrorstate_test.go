package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// TestStateCoordinator runs the __mirror_state coordinator on a kfake
// destination (one broker, ID 0): no answers before the topic's partitions
// are known or loaded, writes fenced by the destination leader epoch,
// states that a new coordinator loads from the topic, a coordinator whose
// broker no longer leads the partition, or leads it at a new leader epoch,
// refusing to write, and tombstones.
func TestStateCoordinator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, cl, store := newStateStore(t, 2)
	st := fsm.NewState()
	st.Mirrors["m"] = &fsm.Mirror{Name: "m"}
	p := statestore.PartitionFor("m", 2)

	write := func(sc *stateCoordinator, epoch int32, state int8, reason string) *protocol.WriteMirrorStatesResponse {
		t.Helper()
		var pd protocol.WriteMirrorStatesRequestPartition
		pd.Default()
		pd.PartitionIndex, pd.State, pd.DestinationLeaderEpoch = 3, state, epoch
		if reason != "" {
			pd.Reason = &reason
		}
		return sc.write(ctx, &protocol.WriteMirrorStatesRequest{MirrorName: "m",
			Topics: []protocol.WriteMirrorStatesRequestTopic{{Name: "t", Partitions: []protocol.WriteMirrorStatesRequestPartition{pd}}}}, 1000)
	}
	// read returns the error code and the one state of t-3 (-1 if none).
	read := func(sc *stateCoordinator) (int16, int8, string) {
		t.Helper()
		resp := sc.read(&protocol.ReadMirrorStatesRequest{MirrorName: "m"})
		if resp.ErrorCode != 0 || len(resp.Topics) == 0 {
			return resp.ErrorCode, -1, ""
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].PartitionIndex != 3 {
			t.Fatalf("read = %+v, want only t-3", resp.Topics)
		}
		rp := resp.Topics[0].Partitions[0]
		return 0, rp.State, deref(rp.Reason)
	}
	loaded := func() *stateCoordinator {
		t.Helper()
		sc := newStateCoordinator(store, cl, 0, zaptest.NewLogger(t))
		if err := sc.refresh(ctx, st); err != nil {
			t.Fatal(err)
		}
		return sc
	}

	sc := newStateCoordinator(store, cl, 0, zaptest.NewLogger(t))
	if code, _, _ := read(sc); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("read before the first refresh: code %d, want COORDINATOR_NOT_AVAILABLE", code)
	}
	// Partitions and leaders known, the partition not loaded yet.
	sc.mu.Lock()
	sc.n, sc.leaders = 2, map[int32]int32{p: 0}
	sc.mu.Unlock()
	if code, _, _ := read(sc); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("read while loading: code %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	if resp := write(sc, 5, statestore.StateMirroring, ""); resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("write while loading: code %d, want COORDINATOR_LOAD_IN_PROGRESS", resp.ErrorCode)
	}

	sc = loaded()
	if code, state, _ := read(sc); code != 0 || state != -1 {
		t.Fatalf("read of an empty topic: code %d, state %d; want no state", code, state)
	}
	if resp := write(sc, 5, statestore.StateMirroring, ""); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("write at epoch 5: %+v", resp)
	}
	// A writer with an older destination leader epoch (a former owner)
	// is fenced, and nothing changes.
	if resp := write(sc, 4, statestore.StateFailed, "stale"); resp.Topics[0].Partitions[0].ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("write at epoch 4 after 5: %+v, want FENCED_LEADER_EPOCH", resp)
	}
	if _, state, _ := read(sc); state != statestore.StateMirroring {
		t.Fatalf("state after a fenced write = %d, want MIRRORING", state)
	}
	if resp := write(sc, 6, statestore.StateFailed, "corrupt batch at offset 7"); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("write at epoch 6: %+v", resp)
	}

	// A new coordinator (another sidecar after a leader change) loads
	// what was written, and fences by the loaded epoch too.
	sc2 := loaded()
	if _, state, reason := read(sc2); state != statestore.StateFailed || reason != "corrupt batch at offset 7" {
		t.Fatalf("new coordinator reads state %d reason %q, want FAILED with the reason", state, reason)
	}
	if resp := write(sc2, 5, statestore.StateMirroring, ""); resp.Topics[0].Partitions[0].ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("write at epoch 5 to the new coordinator: %+v, want FENCED_LEADER_EPOCH", resp)
	}

	// A coordinator whose broker (7) does not lead the partition, but
	// that still believes it does, refuses to write and forgets it.
	stale := newStateCoordinator(store, cl, 7, zaptest.NewLogger(t))
	stale.mu.Lock()
	stale.n, stale.leaders = 2, map[int32]int32{p: 7}
	stale.loaded[p] = map[statestore.Key]statestore.PartitionState{}
	stale.mu.Unlock()
	if resp := write(stale, 9, statestore.StateMirroring, ""); resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("write to a coordinator that lost the partition: %+v, want NOT_COORDINATOR", resp)
	}
	if code, _, _ := read(stale); code != kerr.NotCoordinator.Code {
		t.Fatalf("read from a coordinator that lost the partition: code %d, want NOT_COORDINATOR", code)
	}
	if _, state, _ := read(loaded()); state != statestore.StateFailed {
		t.Fatalf("after the refused write the topic holds state %d, want FAILED", state)
	}

	// A coordinator whose broker leads the partition at another leader
	// epoch than it loaded it at (it lost the partition and got it back)
	// may miss its successor's writes: it forgets the partition and loads
	// it again before it writes.
	if resp := write(sc2, 7, statestore.StateMirroring, ""); resp.ErrorCode != 0 {
		t.Fatalf("write at epoch 7: %+v", resp)
	}
	sc.mu.Lock()
	sc.epochs[p]--
	sc.mu.Unlock()
	if resp := write(sc, 8, statestore.StatePaused, ""); resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("write to a coordinator loaded at an old leader epoch: %+v, want NOT_COORDINATOR", resp)
	}
	if code, _, _ := read(sc); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("read after the refused write: code %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	if err := sc.refresh(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, state, _ := read(sc); state != statestore.StateMirroring {
		t.Fatalf("after loading again the coordinator reads state %d, want its successor's MIRRORING", state)
	}

	// Deleting the mirror tombstones its states.
	if err := sc2.tombstone(ctx, "m", []*fsm.MirrorTopic{{Name: "t", Mirror: "m", Partitions: 4}}); err != nil {
		t.Fatal(err)
	}
	if code, state, _ := read(loaded()); code != 0 || state != -1 {
		t.Fatalf("after the tombstones: code %d, state %d; want no state", code, state)
	}
}

// TestStateWritesOfOneKeyInTurn: a write whose produce is slow (an
// acks=all write waits for a follower that froze) and a second write of
// the same partition state that comes meanwhile, from its former owner at
// an older destination leader epoch. The second must be judged against the
// first one's result: fenced, and the offset shift the first recorded kept.
// Judged against the state before both, it passed its fence and, landing
// last, dropped the shift (a chaos run then failed the partition).
func TestStateWritesOfOneKeyInTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, cl, store := newStateStore(t, 1)
	st := fsm.NewState()
	st.Mirrors["m"] = &fsm.Mirror{Name: "m"}
	sc := newStateCoordinator(store, cl, 0, zaptest.NewLogger(t))
	if err := sc.refresh(ctx, st); err != nil {
		t.Fatal(err)
	}
	write := func(pd protocol.WriteMirrorStatesRequestPartition) int16 {
		resp := sc.write(ctx, &protocol.WriteMirrorStatesRequest{MirrorName: "m",
			Topics: []protocol.WriteMirrorStatesRequestTopic{{Name: "t", Partitions: []protocol.WriteMirrorStatesRequestPartition{pd}}}}, 1000)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	state := func(epoch int32, shifts ...protocol.OffsetShift) protocol.WriteMirrorStatesRequestPartition {
		var pd protocol.WriteMirrorStatesRequestPartition
		pd.Default()
		pd.PartitionIndex, pd.State, pd.DestinationLeaderEpoch = 0, statestore.StateMirroring, epoch
		if len(shifts) > 0 {
			pd.State, pd.OffsetMap = protocol.StateUnchanged, shifts
		}
		return pd
	}
	if code := write(state(0)); code != 0 {
		t.Fatalf("first owner's state: error code %d", code)
	}

	// The next produce to __mirror_state (the shift's) is held until
	// released.
	held, release := make(chan struct{}), make(chan struct{})
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.DropControl() // this produce only
		close(held)
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	shifted := make(chan int16, 1)
	go func() { shifted <- write(state(1, protocol.OffsetShift{SourceOffset: 24, DestinationOffset: 25})) }()
	<-held
	stale := make(chan int16, 1)
	go func() { stale <- write(state(0)) }()
	// Give the stale write the chance to be judged while the shift is in
	// flight; with writes in turn it waits for the shift whatever the time.
	time.Sleep(100 * time.Millisecond)
	close(release)
	if code := <-shifted; code != 0 {
		t.Fatalf("the shift's write: error code %d", code)
	}
	if code := <-stale; code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("the former owner's write during the shift's: error code %d, want FENCED_LEADER_EPOCH", code)
	}
	fresh := newStateCoordinator(store, cl, 0, zaptest.NewLogger(t))
	if err := fresh.refresh(ctx, st); err != nil {
		t.Fatal(err)
	}
	resp := fresh.read(&protocol.ReadMirrorStatesRequest{MirrorName: "m"})
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("loaded states %+v, want t-0 only", resp.Topics)
	}
	if m := resp.Topics[0].Partitions[0].OffsetMap; len(m) != 1 || m[0].SourceOffset != 24 || m[0].DestinationOffset != 25 {
		t.Fatalf("loaded offset map %+v, want the shift 24 -> 25", m)
	}
}

// newStateStore returns a one-broker kfake destination, a client of it and
// a __mirror_state store with partitions partitions there, all closed when
// the test ends.
func newStateStore(t *testing.T, partitions int32) (*kfake.Cluster, *kgo.Client, *statestore.Store) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	store, err := statestore.New(cl, statestore.NumPartitions(partitions), statestore.ReplicationFactor(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return c, cl, store
}
