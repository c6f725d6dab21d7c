package coordinator

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/partstate"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// StateChanged is the data plane's OnStateChange callback: a driver of a
// partition this sidecar drives reports its state, which moves the
// partition as the partition state machine says; a new state is queued for
// its mirror's coordinator. It never blocks; a newer state of the same
// partition replaces a queued one.
func (s *Service) StateChanged(ps fetcher.PartitionStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.running[ps.Partition]
	if o == nil {
		return // a late report of a driver this sidecar let go
	}
	o.last = ps
	if ev, ok := reportEvent(ps.State); ok && s.applyLocked(ps.Partition, ev).Changes() {
		s.signalFlush()
	}
}

// signalFlush asks the flush loop to run now.
func (s *Service) signalFlush() {
	select {
	case s.flushNow <- struct{}{}:
	default:
	}
}

// flushSoon writes the queued states now, bounded, so that a state
// entered before the driver is removed is recorded first; what cannot be
// written stays queued for the flush loop.
func (s *Service) flushSoon(ctx context.Context) {
	if s.states == nil {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s.flush(fctx)
}

// persistAtShutdown bounds PersistStates, so that a __mirror_state
// coordinator that cannot be reached leaves the shutdown time to close raft.
const persistAtShutdown = 2 * time.Second

// PersistStates is the shutdown's "persist state" step, after the data
// plane closed: every partition this sidecar still drives is released
// (its state recorded with the last destination log end offset its driver
// reported, for the next owner) and every queued state is written, within
// ctx.
func (s *Service) PersistStates(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, persistAtShutdown)
	defer cancel()
	s.mu.Lock()
	for p := range s.running {
		s.applyLocked(p, partstate.Release)
		delete(s.running, p)
	}
	s.mu.Unlock()
	for {
		s.flush(ctx)
		s.mu.Lock()
		left := len(s.pending)
		s.mu.Unlock()
		if left == 0 || !sleepCtx(ctx, 100*time.Millisecond) {
			if left > 0 {
				s.log.Warn("partition states not persisted at shutdown", zap.Int("partitions", left))
			}
			return
		}
	}
}

// flushLoop sends queued partition states to their coordinators until ctx
// ends, retrying what could not be written.
func (s *Service) flushLoop(ctx context.Context) {
	defer s.wg.Done()
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.flushNow:
		case <-retry.C:
		}
		s.flush(ctx)
	}
}

// flush sends every queued state, grouped by mirror.
func (s *Service) flush(ctx context.Context) {
	s.mu.Lock()
	if len(s.pending) == 0 {
		s.mu.Unlock()
		return
	}
	byMirror := map[string][]stateUpdate{}
	for _, u := range s.pending {
		byMirror[u.status.Mirror] = append(byMirror[u.status.Mirror], u)
	}
	s.mu.Unlock()
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
			pd.RetryAttempt = s.retryAttempt(u.status.Partition)
			if u.status.State == fetcher.StateFailed && u.status.LastError != "" {
				pd.Reason = strPtr(u.status.LastError)
			}
			byTopic[u.status.Topic] = append(byTopic[u.status.Topic], pd)
		}
		for _, t := range sortedKeys(byTopic) {
			req.Topics = append(req.Topics, protocol.WriteMirrorStatesRequestTopic{Name: t, Partitions: byTopic[t]})
		}
		if err := s.writeStates(ctx, req); err != nil {
			s.log.Debug("partition states not persisted yet; will retry", zap.String("mirror", mirror), zap.Error(err))
			continue
		}
		s.mu.Lock()
		for _, u := range updates {
			if cur, ok := s.pending[u.status.Partition]; ok && cur.status.State == u.status.State && cur.status.LastError == u.status.LastError {
				delete(s.pending, u.status.Partition)
			}
		}
		s.mu.Unlock()
	}
}

// writeStates sends a WriteMirrorStates request to the mirror's
// coordinator, locally when that is this sidecar.
func (s *Service) writeStates(ctx context.Context, req *protocol.WriteMirrorStatesRequest) error {
	_, err := s.writeStatesResp(ctx, req)
	return err
}

// writeStatesResp is writeStates that also returns the response, with the
// partitions' results.
func (s *Service) writeStatesResp(ctx context.Context, req *protocol.WriteMirrorStatesRequest) (*protocol.WriteMirrorStatesResponse, error) {
	coord := s.states.coordinatorOf(req.MirrorName)
	var resp *protocol.WriteMirrorStatesResponse
	switch {
	case coord < 0:
		return nil, errNoCoordinator
	case coord == s.cfg.BrokerID:
		resp = s.states.write(ctx, req, s.cfg.Now().UnixMilli())
	default:
		addr := s.adminAddr(coord)
		if addr == "" {
			return nil, errNoCoordinator
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := s.cfg.Peers.Do(wctx, addr, req)
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
func (s *Service) readStates(ctx context.Context, mirror string) map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition {
	out, _ := s.readStatesOf(ctx, &protocol.ReadMirrorStatesRequest{MirrorName: mirror})
	return out
}

// readStatesOf sends req to its mirror's coordinator and returns the
// persisted states by partition.
func (s *Service) readStatesOf(ctx context.Context, req *protocol.ReadMirrorStatesRequest) (map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition, error) {
	if s.states == nil {
		return nil, errNoCoordinator
	}
	mirror := req.MirrorName
	var resp *protocol.ReadMirrorStatesResponse
	coord := s.states.coordinatorOf(mirror)
	switch {
	case coord < 0:
		return nil, errNoCoordinator
	case coord == s.cfg.BrokerID:
		resp = s.states.read(req)
	default:
		addr := s.adminAddr(coord)
		if addr == "" {
			return nil, errNoCoordinator
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := s.cfg.Peers.Do(rctx, addr, req)
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
func (s *Service) persistBoundary(ctx context.Context, mirror string, topics []*fsm.MirrorTopic, state fetcher.State) {
	if s.states == nil || len(topics) == 0 {
		return
	}
	leo := map[string]map[int32]int64{}
	for _, t := range topics {
		offs, err := s.cfg.Destination.EndOffsets(ctx, t.Name)
		if err != nil {
			s.log.Warn("end offsets for the stop boundary", zap.String("topic", t.Name), zap.Error(err))
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
		if state == fetcher.StateStopped {
			req.StoppedTopics = append(req.StoppedTopics, t.Name)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := s.writeStates(ctx, req)
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.log.Warn("could not persist the stop boundary", zap.String("mirror", mirror), zap.Error(err))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// adminAddr returns the admin endpoint of a broker's sidecar, or "".
func (s *Service) adminAddr(broker int32) string {
	var addr string
	s.cfg.Node.FSM().Read(func(st *fsm.State) {
		if sc, ok := st.Sidecars[broker]; ok {
			addr = sc.AdminAddr
		}
	})
	return addr
}

// stateName names a persisted state code.
func stateName(code int8) string { return statestore.StateName(code) }
