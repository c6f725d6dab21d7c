package coordinator

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/partstate"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// peerClient sends a request to another sidecar's admin endpoint
// (raftnode.Peers).
type peerClient interface {
	Do(ctx context.Context, addr string, req protocol.Request) (protocol.Response, error)
}

// addressBook finds a sidecar's admin endpoint in the controller state.
type addressBook interface {
	AdminAddr(broker int32) string
}

// endOffsets reads the destination's log end offsets (Destination).
type endOffsets interface {
	EndOffsets(ctx context.Context, topic string) (map[int32]int64, error)
}

// stateWriter is this sidecar's writer to __mirror_state (DESIGN D6): it
// queues the states of the partitions it drives, with the destination
// leader epoch that fences them, and sends them to each mirror's
// coordinator (the local stateCoordinator, or a peer's through
// WriteMirrorStates); it reads states back (ReadMirrorStates), records the
// boundaries of pauses and stops, and is the data plane's offset map store
// (fetcher.OffsetMaps, offsetmap.go). The flush loop is its goroutine; mu
// guards only the queue and the epochs. Without a __mirror_state (coord is
// nil) it writes nothing.
type stateWriter struct {
	brokerID int32
	coord    *stateCoordinator // nil without __mirror_state
	peers    peerClient
	addrs    addressBook
	dest     endOffsets
	now      func() time.Time
	log      *zap.Logger

	flushNow chan struct{} // asks the flush loop to run now

	mu      sync.Mutex
	pending map[fetcher.Partition]stateUpdate // states not yet written
	epochs  map[fetcher.Partition]int32       // destination leader epochs of the partitions led here
}

// stateUpdate is a partition state an owner has to persist.
type stateUpdate struct {
	status  fetcher.PartitionStatus
	epoch   int32
	attempt int16 // automatic retries so far
}

func newStateWriter(w *stateWriter) *stateWriter {
	w.flushNow = make(chan struct{}, 1)
	w.pending = map[fetcher.Partition]stateUpdate{}
	w.epochs = map[fetcher.Partition]int32{}
	return w
}

// setEpochs records the destination leader epochs of the partitions the
// local broker leads, as the reconciler last saw them.
func (w *stateWriter) setEpochs(epochs map[fetcher.Partition]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, e := range epochs {
		w.epochs[p] = e
	}
}

// epoch returns the destination leader epoch recorded for p.
func (w *stateWriter) epoch(p fetcher.Partition) (int32, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.epochs[p]
	return e, ok
}

// queue queues status (its State is the partition's new state) for the
// mirror's coordinator; a newer state of the same partition replaces a
// queued one. It never blocks.
func (w *stateWriter) queue(status fetcher.PartitionStatus, attempt int16) {
	if w.coord == nil {
		return
	}
	w.mu.Lock()
	w.pending[status.Partition] = stateUpdate{status: status, epoch: w.epochs[status.Partition], attempt: attempt}
	w.mu.Unlock()
	select {
	case w.flushNow <- struct{}{}:
	default:
	}
}

// dropTransitional drops a queued PAUSING or STOPPING of p: the pause or
// stop sequence of the operation records the resting state of every
// partition, and a late write must not overwrite it.
func (w *stateWriter) dropTransitional(p fetcher.Partition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if u, ok := w.pending[p]; ok && (u.status.State == partstate.Pausing || u.status.State == partstate.Stopping) {
		delete(w.pending, p)
	}
}

// drop forgets what is queued for p (its mirror was deleted).
func (w *stateWriter) drop(p fetcher.Partition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, p)
}

// run sends queued states to their coordinators until ctx ends, retrying
// what could not be written.
func (w *stateWriter) run(ctx context.Context) {
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.flushNow:
		case <-retry.C:
		}
		w.flush(ctx)
	}
}

// flushSoon writes the queued states now, bounded, so that a state
// entered before the driver is removed is recorded first; what cannot be
// written stays queued for the flush loop.
func (w *stateWriter) flushSoon(ctx context.Context) {
	if w.coord == nil {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w.flush(fctx)
}

// persistAtShutdown bounds flushAll at shutdown, so that a __mirror_state
// coordinator that cannot be reached leaves the shutdown time to close raft.
const persistAtShutdown = 2 * time.Second

// flushAll writes everything queued, retrying within persistAtShutdown
// and ctx.
func (w *stateWriter) flushAll(ctx context.Context) {
	if w.coord == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, persistAtShutdown)
	defer cancel()
	for {
		w.flush(ctx)
		w.mu.Lock()
		left := len(w.pending)
		w.mu.Unlock()
		if left == 0 {
			return
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			w.log.Warn("partition states not persisted at shutdown", zap.Int("partitions", left))
			return
		}
	}
}

// flush sends every queued state, grouped by mirror.
func (w *stateWriter) flush(ctx context.Context) {
	w.mu.Lock()
	if len(w.pending) == 0 {
		w.mu.Unlock()
		return
	}
	byMirror := map[string][]stateUpdate{}
	for _, u := range w.pending {
		byMirror[u.status.Mirror] = append(byMirror[u.status.Mirror], u)
	}
	w.mu.Unlock()
	for mirror, updates := range byMirror {
		req := &protocol.WriteMirrorStatesRequest{MirrorName: mirror}
		byTopic := map[string][]protocol.WriteMirrorStatesRequestPartition{}
		for _, u := range updates {
			var pd protocol.WriteMirrorStatesRequestPartition
			pd.Default()
			pd.PartitionIndex = u.status.Partition.Partition
			pd.State = int8(u.status.State)
			pd.DestinationLeaderEpoch = u.epoch
			pd.LastSourceOffset = u.status.DestinationLogEndOffset
			pd.RetryAttempt = u.attempt
			if u.status.State == fetcher.StateFailed && u.status.LastError != "" {
				pd.Reason = strPtr(u.status.LastError)
			}
			byTopic[u.status.Topic] = append(byTopic[u.status.Topic], pd)
		}
		for _, t := range sortedKeys(byTopic) {
			req.Topics = append(req.Topics, protocol.WriteMirrorStatesRequestTopic{Name: t, Partitions: byTopic[t]})
		}
		if err := w.writeStates(ctx, req); err != nil {
			w.log.Debug("partition states not persisted yet; will retry", zap.String("mirror", mirror), zap.Error(err))
			continue
		}
		w.mu.Lock()
		for _, u := range updates {
			if cur, ok := w.pending[u.status.Partition]; ok && cur.status.State == u.status.State && cur.status.LastError == u.status.LastError {
				delete(w.pending, u.status.Partition)
			}
		}
		w.mu.Unlock()
	}
}

// writeStatesResp is writeStates that also returns the response, with the
// partitions' results.
func (w *stateWriter) writeStatesResp(ctx context.Context, req *protocol.WriteMirrorStatesRequest) (*protocol.WriteMirrorStatesResponse, error) {
	if w.coord == nil {
		return nil, errNoCoordinator
	}
	coord := w.coord.coordinatorOf(req.MirrorName)
	var resp *protocol.WriteMirrorStatesResponse
	switch {
	case coord < 0:
		return nil, errNoCoordinator
	case coord == w.brokerID:
		resp = w.coord.write(ctx, req, w.now().UnixMilli())
	default:
		addr := w.addrs.AdminAddr(coord)
		if addr == "" {
			return nil, errNoCoordinator
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := w.peers.Do(wctx, addr, req)
		if err != nil {
			return nil, err
		}
		resp = r.(*protocol.WriteMirrorStatesResponse)
	}
	if resp.ErrorCode != 0 {
		return nil, protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage)
	}
	return resp, nil
}

// readStates asks a mirror's coordinator for its persisted partition
// states, keyed by partition; nil if it cannot be asked.
func (w *stateWriter) readStates(ctx context.Context, mirror string) map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition {
	out, _ := w.readStatesOf(ctx, &protocol.ReadMirrorStatesRequest{MirrorName: mirror})
	return out
}

// readStatesOf sends req to its mirror's coordinator and returns the
// persisted states by partition.
func (w *stateWriter) readStatesOf(ctx context.Context, req *protocol.ReadMirrorStatesRequest) (map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition, error) {
	if w.coord == nil {
		return nil, errNoCoordinator
	}
	mirror := req.MirrorName
	var resp *protocol.ReadMirrorStatesResponse
	coord := w.coord.coordinatorOf(mirror)
	switch {
	case coord < 0:
		return nil, errNoCoordinator
	case coord == w.brokerID:
		resp = w.coord.read(req)
	default:
		addr := w.addrs.AdminAddr(coord)
		if addr == "" {
			return nil, errNoCoordinator
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := w.peers.Do(rctx, addr, req)
		if err != nil {
			return nil, err
		}
		resp = r.(*protocol.ReadMirrorStatesResponse)
	}
	if resp.ErrorCode != 0 {
		return nil, protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage)
	}
	out := map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fetcher.Partition{Mirror: mirror, Topic: t.Name, Partition: p.PartitionIndex}] = p
		}
	}
	return out, nil
}

// persistBoundary records PAUSED or STOPPED for every partition of topics,
// with the destination log end offset as the stop boundary (DESIGN D9):
// the partition state machine's Finish, where a pause or stop ends.
func (w *stateWriter) persistBoundary(ctx context.Context, mirror string, topics []*fsm.MirrorTopic, state partstate.State) {
	if w.coord == nil || len(topics) == 0 {
		return
	}
	leo := map[string]map[int32]int64{}
	for _, t := range topics {
		offs, err := w.dest.EndOffsets(ctx, t.Name)
		if err != nil {
			w.log.Warn("end offsets for the stop boundary", zap.String("topic", t.Name), zap.Error(err))
		}
		leo[t.Name] = offs
	}
	req := &protocol.WriteMirrorStatesRequest{MirrorName: mirror}
	for _, t := range topics {
		rt := protocol.WriteMirrorStatesRequestTopic{Name: t.Name}
		for p := range t.Partitions {
			var pd protocol.WriteMirrorStatesRequestPartition
			pd.Default()
			pd.PartitionIndex = p
			pd.State = int8(state)
			if o, ok := leo[t.Name][p]; ok {
				pd.LastSourceOffset = o
			}
			rt.Partitions = append(rt.Partitions, pd)
		}
		req.Topics = append(req.Topics, rt)
		if state == partstate.Stopped {
			req.StoppedTopics = append(req.StoppedTopics, t.Name)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := w.writeStates(ctx, req)
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			w.log.Warn("could not persist the stop boundary", zap.String("mirror", mirror), zap.Error(err))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeStates sends a WriteMirrorStates request to the mirror's
// coordinator, locally when that is this sidecar.
func (w *stateWriter) writeStates(ctx context.Context, req *protocol.WriteMirrorStatesRequest) error {
	_, err := w.writeStatesResp(ctx, req)
	return err
}

// stateName names a persisted state code.
func stateName(code int8) string { return statestore.StateName(code) }
