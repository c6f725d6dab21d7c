package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/partstate"
)

// Run keeps the data plane in step with the controller state and the
// destination's partition leadership until ctx ends (DESIGN D7): the
// sidecar drives exactly the active mirror partitions its broker leads. It
// runs on every controller change, on NOT_LEADER from the data plane, and
// every ReconcileInterval (leadership moves are not pushed to us). Beside
// it run the failover loop (runFailover), the metadata sync and topic
// discovery, each in its own goroutine so that a slow or unreachable source
// never holds up the others; Run waits for them.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.runFailover(ctx) })
	wg.Go(func() { s.runMetadataSync(ctx) })
	wg.Go(func() { s.runDiscovery(ctx) })
	tick := time.NewTicker(s.cfg.ReconcileInterval)
	defer tick.Stop()
	if s.states != nil {
		s.wg.Add(1)
		go s.flushLoop(ctx)
	}
	defer s.wg.Wait()
	for {
		watch := s.cfg.Node.FSM().Watch()
		if err := s.reconcile(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("reconcile", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-watch:
		case <-s.kick:
		case <-tick.C:
		}
	}
}

// reconcile runs one pass. It acts only once this sidecar's controller
// state has caught up with the raft group: a sidecar that restarts with an
// old state must not resume a topic that was stopped meanwhile.
func (s *Service) reconcile(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := s.cfg.Node.WaitCaughtUp(wctx)
	cancel()
	if err != nil {
		return nil // not yet; the next pass retries
	}
	st := s.state()
	s.syncSources(st)
	if s.states != nil {
		if err := s.states.refresh(ctx, st); err != nil && ctx.Err() == nil {
			s.log.Warn("mirror state coordinator", zap.Error(err))
		}
	}

	active := drivenTopics(st)
	want := map[fetcher.Partition]bool{}
	if len(active) > 0 {
		leaders, err := s.leaders(ctx, active)
		if err != nil {
			return err
		}
		s.mu.Lock()
		for _, name := range active {
			t := st.Topics[name]
			for p := range t.Partitions {
				if l, ok := leaders[name][p]; ok && l.leader == s.cfg.BrokerID {
					fp := fetcher.Partition{Mirror: t.Mirror, Topic: name, Partition: p}
					want[fp] = true
					s.epochs[fp] = l.epoch
				}
			}
		}
		s.mu.Unlock()
	}

	s.mu.Lock()
	var toStart, toStop []fetcher.Partition
	for p := range want {
		if s.running[p] == nil {
			toStart = append(toStart, p)
		}
	}
	for p := range s.running {
		if !want[p] {
			toStop = append(toStop, p)
		}
	}
	s.mu.Unlock()

	for _, p := range toStop {
		s.letGo(ctx, st, p)
	}
	s.retryFailed(s.cfg.Now())
	s.restartRequested(st)
	for _, p := range toStart {
		s.mu.Lock()
		// Recorded before the driver starts, so that none of its reports
		// is missed.
		s.running[p] = &owned{state: partstate.Next(partstate.Unknown, partstate.Lead).To}
		s.mu.Unlock()
		if err := s.cfg.DataPlane.Start(p); err != nil {
			s.mu.Lock()
			delete(s.running, p)
			s.mu.Unlock()
			s.log.Warn("start partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
			continue
		}
		s.log.Info("driving partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic), zap.Int32("partition", p.Partition))
	}
	return nil
}

// letGo stops driving p, which this sidecar no longer has to drive: its
// topic was paused (PAUSING until the driver is removed, then PAUSED) or
// stopped (STOPPING; the stop sequence of the operation records STOPPED),
// or its broker no longer leads it (the state stays as it is for the next
// owner, with the last destination log end offset). The entered state is
// recorded in __mirror_state before the driver is removed.
func (s *Service) letGo(ctx context.Context, st *fsm.State, p fetcher.Partition) {
	ev := partstate.Release
	if t := st.Topics[p.Topic]; t != nil && t.Mirror == p.Mirror {
		switch t.Status {
		case fsm.TopicPaused:
			ev = partstate.Pause
		case fsm.TopicStopped:
			ev = partstate.Stop
		}
	}
	if ev != partstate.Release {
		s.mu.Lock()
		s.applyLocked(p, ev)
		s.mu.Unlock()
		s.flushSoon(ctx)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := s.cfg.DataPlane.Stop(sctx, p)
	cancel()
	if err != nil {
		s.log.Warn("stop partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
		return
	}
	s.released(p)
	s.log.Info("no longer driving partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic), zap.Int32("partition", p.Partition))
}

// released applies Release to p, whose driver the data plane removed, and
// forgets it. A transitional state still queued is dropped: the pause or
// stop sequence of the operation records the resting state of every
// partition, and a late write must not overwrite it.
func (s *Service) released(p fetcher.Partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[p] == nil {
		return
	}
	s.applyLocked(p, partstate.Release)
	if u, ok := s.pending[p]; ok && (u.status.State == partstate.Pausing || u.status.State == partstate.Stopping) {
		delete(s.pending, p)
	}
	delete(s.running, p)
	s.signalFlush()
}

// applyLocked moves the partition this sidecar drives as the partition
// state machine says event ev does, and queues the new state for
// __mirror_state. UNKNOWN is never recorded (it means "no state"). A
// Release records the state as it is, with the last destination log end
// offset, for the next owner. s.mu is held.
func (s *Service) applyLocked(p fetcher.Partition, ev partstate.Event) partstate.Transition {
	o := s.running[p]
	if o == nil {
		return partstate.Transition{}
	}
	t := partstate.Next(o.state, ev)
	if !t.Allowed() {
		return t
	}
	o.state = t.To
	if (t.Changes() || t.Action == partstate.Forget) && o.state != partstate.Unknown && s.states != nil {
		status := o.last
		status.Partition, status.State = p, o.state
		s.pending[p] = stateUpdate{status: status, epoch: s.epochs[p]}
	}
	return t
}

// reportEvent is the event of a state the data plane reports of a driver:
// its own STOPPING and STOPPED (a driver being removed, removed) are the
// owner's to interpret (letGo, NotLeader), so they are no event here.
func reportEvent(st fetcher.State) (partstate.Event, bool) {
	switch st {
	case partstate.LogTruncation:
		return partstate.Align, true
	case partstate.Mirroring:
		return partstate.Aligned, true
	case partstate.Failed:
		return partstate.Fail, true
	}
	return 0, false
}

// drivenTopics returns the topics whose partitions are mirrored: the active
// ones, less the topics of a mirror whose source changed cluster, topics
// recreated on the source (DESIGN D10) and topics with diverged partitions
// (D9: not one record may be appended before the re-seed re-creates them).
func drivenTopics(st *fsm.State) []string {
	var out []string
	for name, t := range st.Topics {
		if t.Status == fsm.TopicActive && t.SyncFault == "" && len(t.Diverged) == 0 && st.Mirrors[t.Mirror] != nil && st.Mirrors[t.Mirror].SyncFault == "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// syncSources gives the data plane a source client for every mirror, and a
// new one when a mirror's source settings change; it removes deleted mirrors.
func (s *Service) syncSources(st *fsm.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, m := range st.Mirrors {
		cfg := sourceConfig(m.Config)
		settings := dataPlaneSettings(st, m)
		fp, sfp := fingerprint(cfg), fmt.Sprintf("%+v", settings)
		if s.sources[name] == fp {
			if s.settings[name] != sfp {
				if err := s.cfg.DataPlane.SetMirrorSettings(name, settings); err != nil {
					s.log.Error("cannot update the data plane settings of a mirror", zap.String("mirror", name), zap.Error(err))
					continue
				}
				s.settings[name] = sfp
			}
			continue
		}
		opts, err := s.cfg.SourceDialer(cfg)
		if err == nil {
			err = s.cfg.DataPlane.SetMirror(name, opts, settings)
		}
		if err != nil {
			s.log.Error("cannot configure the source client of a mirror", zap.String("mirror", name), zap.Error(err))
			continue
		}
		s.sources[name], s.settings[name] = fp, sfp
	}
	for name := range s.sources {
		if _, ok := st.Mirrors[name]; !ok {
			s.cfg.DataPlane.RemoveMirror(name)
			delete(s.sources, name)
			delete(s.settings, name)
			for p := range s.running {
				if p.Mirror == name {
					delete(s.running, p)
					delete(s.pending, p)
				}
			}
		}
	}
}

// owned is a partition this sidecar drives: where it stands in the
// partition state machine, and the data plane's last report of it.
type owned struct {
	state partstate.State
	last  fetcher.PartitionStatus
}

// leadership is a destination partition's leader and leader epoch.
type leadership struct{ leader, epoch int32 }

// leaders returns the destination leader of every partition of topics.
func (s *Service) leaders(ctx context.Context, topics []string) (map[string]map[int32]leadership, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(mctx, s.cfg.DestClient)
	if err != nil {
		return nil, fmt.Errorf("destination metadata: %w", err)
	}
	out := map[string]map[int32]leadership{}
	for _, t := range resp.Topics {
		if t.Topic == nil || kerr.ErrorForCode(t.ErrorCode) != nil {
			continue
		}
		m := map[int32]leadership{}
		for _, p := range t.Partitions {
			if kerr.ErrorForCode(p.ErrorCode) == nil {
				m[p.Partition] = leadership{leader: p.Leader, epoch: p.LeaderEpoch}
			}
		}
		out[*t.Topic] = m
	}
	return out, nil
}

// fingerprint identifies a config's content.
func fingerprint(cfg map[string]string) string {
	h := sha256.New()
	for _, k := range sortedKeys(cfg) {
		fmt.Fprintf(h, "%s=%s\n", k, cfg[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}
