package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// stateCoordinator is this sidecar's part of the __mirror_state service
// (DESIGN D6): the coordinator of a mirror is the sidecar beside the leader
// of partition PartitionFor(mirror) of __mirror_state. It loads each
// partition its broker leads before serving it (COORDINATOR_LOAD_IN_PROGRESS
// until then), and again when the partition's leader epoch changed since
// (its broker lost the partition and got it back: a successor may have
// written meanwhile). It answers ReadMirrorStates from memory and writes
// WriteMirrorStates through its own broker only (statestore.WriteVia), so
// that it cannot write once its broker lost the partition, fencing writers
// whose destination leader epoch is older than the one recorded.
type stateCoordinator struct {
	store    *statestore.Store
	cl       *kgo.Client
	brokerID int32
	log      *zap.Logger

	// writing serializes the writes to each state partition, from
	// reading a key's previous state to recording the new one: two writes
	// of one key in flight together would each merge with (and fence by)
	// the state before both, and the second to land would undo the first
	// (a stale owner's write passing its fence, an offset shift lost).
	writing sync.Map // partition -> *sync.Mutex

	mu      sync.Mutex
	n       int32                                                  // partitions of __mirror_state, 0 until known
	leaders map[int32]int32                                        // partition -> leader broker
	loaded  map[int32]map[statestore.Key]statestore.PartitionState // partitions led here, loaded
	epochs  map[int32]int32                                        // partition -> its leader epoch when loaded
}

// stateLeader is a state partition's leader and leader epoch.
type stateLeader struct{ broker, epoch int32 }

func newStateCoordinator(store *statestore.Store, cl *kgo.Client, brokerID int32, log *zap.Logger) *stateCoordinator {
	return &stateCoordinator{store: store, cl: cl, brokerID: brokerID, log: log,
		leaders: map[int32]int32{}, loaded: map[int32]map[statestore.Key]statestore.PartitionState{}, epochs: map[int32]int32{}}
}

// refresh creates the topic once a mirror exists, learns its partitions'
// leaders, loads the partitions this broker newly leads (or leads at a new
// leader epoch) and forgets those it no longer leads, and drops cached
// states of deleted mirrors.
func (c *stateCoordinator) refresh(ctx context.Context, st *fsm.State) error {
	if len(st.Mirrors) == 0 && c.partitions() == 0 {
		return nil
	}
	if c.partitions() == 0 {
		if err := c.store.EnsureTopic(ctx); err != nil {
			return err
		}
		n, err := c.store.NumPartitions(ctx)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.n = n
		c.mu.Unlock()
	}
	leaders, err := c.currentLeaders(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.setLeadersLocked(leaders)
	for p := range c.loaded {
		if l := leaders[p]; l.broker != c.brokerID || l.epoch != c.epochs[p] {
			delete(c.loaded, p) // resigned, or led again after a successor: nothing stale survives
		}
	}
	var toLoad []int32
	for p, l := range leaders {
		if _, ok := c.loaded[p]; !ok && l.broker == c.brokerID {
			toLoad = append(toLoad, p)
		}
	}
	c.mu.Unlock()
	for _, p := range toLoad {
		start := time.Now()
		states, _, err := c.store.Load(ctx, p)
		if err != nil {
			return fmt.Errorf("load %s-%d: %w", statestore.TopicName, p, err)
		}
		c.mu.Lock()
		// Loaded after the leader epoch was learnt: if it changed during
		// the load, the next refresh sees a new epoch and loads again.
		if c.leaders[p] == c.brokerID {
			c.loaded[p], c.epochs[p] = states, leaders[p].epoch
		}
		c.mu.Unlock()
		c.log.Info("coordinator partition loaded", zap.Int32("partition", p), zap.Int("records", len(states)),
			zap.Duration("took", time.Since(start)))
	}
	c.mu.Lock()
	for _, states := range c.loaded {
		for k := range states {
			if _, ok := st.Mirrors[k.Mirror]; !ok {
				delete(states, k)
			}
		}
	}
	c.mu.Unlock()
	return nil
}

// setLeadersLocked records the state partitions' leaders. c.mu is held.
func (c *stateCoordinator) setLeadersLocked(leaders map[int32]stateLeader) {
	c.leaders = make(map[int32]int32, len(leaders))
	for p, l := range leaders {
		c.leaders[p] = l.broker
	}
}

// currentLeaders asks the destination for the leaders and leader epochs of
// the state topic's partitions.
func (c *stateCoordinator) currentLeaders(ctx context.Context) (map[int32]stateLeader, error) {
	md, err := destinationMetadata(ctx, c.cl, []string{statestore.TopicName})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", statestore.TopicName, err)
	}
	leaders := map[int32]stateLeader{}
	for p, pm := range md[statestore.TopicName].partitions {
		if pm.err == nil {
			leaders[p] = stateLeader{broker: pm.leader, epoch: pm.epoch}
		}
	}
	return leaders, nil
}

// stillLeads checks with fresh metadata, before a write, that this
// sidecar's broker leads state partition p at the leader epoch it loaded
// it at: a coordinator whose broker lost the partition and got it back must
// not write from states that miss its successor's writes. If not, the
// partition is forgotten (and loaded again by the next refresh). WriteVia
// fences a broker that lost the partition on its own.
func (c *stateCoordinator) stillLeads(ctx context.Context, p int32) bool {
	leaders, err := c.currentLeaders(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && leaders[p].broker == c.brokerID && leaders[p].epoch == c.epochs[p] {
		return true
	}
	if err == nil {
		c.setLeadersLocked(leaders)
	}
	delete(c.loaded, p)
	return false
}

// forget drops state partition p after a write through this sidecar's
// broker failed in a way that says it may no longer lead it.
func (c *stateCoordinator) forget(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.loaded, p)
}

func (c *stateCoordinator) partitions() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// coordinatorOf returns the broker whose sidecar coordinates mirror, or -1.
func (c *stateCoordinator) coordinatorOf(mirror string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return -1
	}
	l, ok := c.leaders[statestore.PartitionFor(mirror, c.n)]
	if !ok {
		return -1
	}
	return l
}

// partitionOf returns mirror's partition if this sidecar coordinates it and
// has loaded it, else the error code to answer with.
func (c *stateCoordinator) partitionOf(mirror string) (int32, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return 0, kerr.CoordinatorNotAvailable.Code
	}
	p := statestore.PartitionFor(mirror, c.n)
	if c.leaders[p] != c.brokerID {
		return 0, kerr.NotCoordinator.Code
	}
	if _, ok := c.loaded[p]; !ok {
		return 0, kerr.CoordinatorLoadInProgress.Code
	}
	return p, 0
}

// write handles WriteMirrorStates.
func (c *stateCoordinator) write(ctx context.Context, r *protocol.WriteMirrorStatesRequest, nowMs int64) *protocol.WriteMirrorStatesResponse {
	resp := &protocol.WriteMirrorStatesResponse{}
	p, code := c.partitionOf(r.MirrorName)
	if code == 0 {
		wmu, _ := c.writing.LoadOrStore(p, new(sync.Mutex))
		wmu.(*sync.Mutex).Lock()
		defer wmu.(*sync.Mutex).Unlock()
		// Again: the partition may have been given up or loaded anew
		// while an earlier write went out.
		p, code = c.partitionOf(r.MirrorName)
	}
	if code != 0 {
		resp.ErrorCode = code
		resp.ErrorMessage = strPtr(fmt.Sprintf("this sidecar is not ready to coordinate mirror %s", r.MirrorName))
		return resp
	}
	var recs []statestore.Record
	for _, t := range r.Topics {
		rt := protocol.WriteMirrorStatesResponseTopic{Name: t.Name}
		for _, pd := range t.Partitions {
			key := statestore.PartitionStateKey(r.MirrorName, t.Name, pd.PartitionIndex)
			res := protocol.WriteMirrorStatesResponsePartition{PartitionIndex: pd.PartitionIndex}
			c.mu.Lock()
			prev, had := c.loaded[p][key]
			c.mu.Unlock()
			if had && pd.DestinationLeaderEpoch >= 0 && prev.WriterLeaderEpoch > pd.DestinationLeaderEpoch {
				res.ErrorCode = kerr.FencedLeaderEpoch.Code
				rt.Partitions = append(rt.Partitions, res)
				continue
			}
			var v statestore.PartitionState
			if pd.State == protocol.StateUnchanged {
				// Offset shifts only: everything else stays.
				v = prev
				if !had {
					v = statestore.PartitionState{State: statestore.StateUnknown, PreviousState: statestore.StateNotRecorded, LastSourceOffset: -1}
				}
				v.WriterLeaderEpoch, v.WriterBrokerID, v.UpdatedMs = max(v.WriterLeaderEpoch, pd.DestinationLeaderEpoch), -1, nowMs
			} else {
				v = statestore.PartitionState{
					State: pd.State, PreviousState: pd.PreviousState, RetryAttempt: pd.RetryAttempt,
					LastSourceOffset: pd.LastSourceOffset, WriterLeaderEpoch: pd.DestinationLeaderEpoch,
					WriterBrokerID: -1, UpdatedMs: nowMs,
				}
				if pd.Reason != nil {
					v.Reason = *pd.Reason
				}
				if had && v.PreviousState == statestore.StateNotRecorded && prev.State != v.State {
					v.PreviousState = prev.State
				}
				if had && v.LastSourceOffset < 0 {
					v.LastSourceOffset = prev.LastSourceOffset
				}
			}
			// The offset map of a partition (translate mode, or the repeated
			// markers of an exact-mode one) grows at its end; shifts beyond
			// the first new one were recorded for appends that failed and
			// are replaced.
			v.OffsetMap = slices.Clone(prev.OffsetMap)
			if len(pd.OffsetMap) > 0 {
				first := pd.OffsetMap[0].DestinationOffset
				v.OffsetMap = slices.DeleteFunc(v.OffsetMap, func(s statestore.OffsetShift) bool { return s.DestinationOffset > first })
			}
			for _, s := range pd.OffsetMap {
				v.OffsetMap = append(v.OffsetMap, statestore.OffsetShift{SourceOffset: s.SourceOffset, DestinationOffset: s.DestinationOffset})
			}
			recs = append(recs, statestore.Record{Key: key, Value: &v})
			rt.Partitions = append(rt.Partitions, res)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		return resp
	}
	if !c.stillLeads(ctx, p) {
		resp.ErrorCode = kerr.NotCoordinator.Code
		resp.ErrorMessage = strPtr(fmt.Sprintf("this sidecar no longer coordinates mirror %s", r.MirrorName))
		resp.Topics = nil
		return resp
	}
	if err := c.store.WriteVia(ctx, c.brokerID, p, recs); err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		var ke *kerr.Error
		if errors.As(err, &ke) {
			resp.ErrorCode = ke.Code
		}
		if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch) {
			c.forget(p)
			resp.ErrorCode = kerr.NotCoordinator.Code
		}
		resp.ErrorMessage = strPtr(err.Error())
		resp.Topics = nil
		return resp
	}
	c.mu.Lock()
	if states, ok := c.loaded[p]; ok {
		for _, rec := range recs {
			states[rec.Key] = *rec.Value
		}
	}
	c.mu.Unlock()
	return resp
}

// read handles ReadMirrorStates; no topics means every topic of the mirror.
func (c *stateCoordinator) read(r *protocol.ReadMirrorStatesRequest) *protocol.ReadMirrorStatesResponse {
	resp := &protocol.ReadMirrorStatesResponse{}
	p, code := c.partitionOf(r.MirrorName)
	if code != 0 {
		resp.ErrorCode = code
		resp.ErrorMessage = strPtr(fmt.Sprintf("this sidecar is not ready to coordinate mirror %s", r.MirrorName))
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	byTopic := map[string][]protocol.ReadMirrorStatesResponsePartition{}
	want := map[string]map[int32]bool{}
	for _, t := range r.Topics {
		want[t.Name] = map[int32]bool{}
		for _, pd := range t.Partitions {
			want[t.Name][pd.PartitionIndex] = true
		}
	}
	for k, v := range c.loaded[p] {
		if k.Type != statestore.TypePartitionState || k.Mirror != r.MirrorName {
			continue
		}
		if len(want) > 0 {
			ps, ok := want[k.Topic]
			if !ok || (len(ps) > 0 && !ps[k.Partition]) {
				continue
			}
		}
		var rp protocol.ReadMirrorStatesResponsePartition
		rp.Default()
		rp.PartitionIndex = k.Partition
		rp.State = v.State
		rp.PreviousState = v.PreviousState
		rp.RetryAttempt = v.RetryAttempt
		rp.LastSourceOffset = v.LastSourceOffset
		if v.Reason != "" {
			rp.Reason = strPtr(v.Reason)
		}
		for _, s := range v.OffsetMap {
			rp.OffsetMap = append(rp.OffsetMap, protocol.OffsetShift{SourceOffset: s.SourceOffset, DestinationOffset: s.DestinationOffset})
		}
		byTopic[k.Topic] = append(byTopic[k.Topic], rp)
	}
	for _, t := range sortedKeys(byTopic) {
		resp.Topics = append(resp.Topics, protocol.ReadMirrorStatesResponseTopic{Name: t, Partitions: byTopic[t]})
	}
	return resp
}

// tombstone deletes every record of mirror (DeleteClusterMirror).
func (c *stateCoordinator) tombstone(ctx context.Context, mirror string, topics []*fsm.MirrorTopic) error {
	n := c.partitions()
	if n == 0 {
		return nil
	}
	p := statestore.PartitionFor(mirror, n)
	var recs []statestore.Record
	for _, t := range topics {
		for i := range t.Partitions {
			recs = append(recs, statestore.Record{Key: statestore.PartitionStateKey(mirror, t.Name, i)})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return c.store.Write(ctx, p, recs)
}
