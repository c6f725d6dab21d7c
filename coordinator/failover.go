package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/protocol"
)

// This file is DESIGN D7's answer to a sidecar that dies (kill -9) or
// freezes (SIGSTOP) while its broker keeps leading mirror partitions: the
// raft leader checks every sidecar, moves leadership of a dead sidecar's
// mirror partitions to brokers whose sidecars are alive, and moves it back
// once the sidecar is alive again.
//
// Leadership moves without data movement: the replica list is reordered
// (same set, a live in-sync replica first) with AlterPartitionReassignments
// and the preferred leader elected. The original order is recorded in the
// controller state (RecordReplicaOrder) before anything changes, so that
// any later raft leader can restore it, and cleared (ClearReplicaOrder)
// once restored.
//
// The fence is Kafka's: once its broker no longer leads a partition, the
// appends of a sidecar that wakes up are refused with NOT_LEADER, its data
// plane stops the partition and reconcile no longer drives it. One hole
// remains, which the move back closes: a woken sidecar that has not tried
// to append yet still holds the partition with the offsets of before its
// sleep; were its broker the leader again, its next append would land at
// the wrong offset. So leadership returns to a broker only once its sidecar
// reports (DescribeLocalPartitions) that it does not drive the partition.

const (
	// failoverCheckInterval is how often the raft leader checks the
	// sidecars.
	failoverCheckInterval = time.Second
	// failoverProbeTimeout bounds one liveness check.
	failoverProbeTimeout = 2 * time.Second
	// failoverKafkaTimeout bounds one request to the destination.
	failoverKafkaTimeout = 15 * time.Second
	// failoverWarnEvery is how often the same skipped partition is warned
	// about; the rounds in between log it at debug level.
	failoverWarnEvery = time.Minute
)

// failover is the dead-sidecar failover (DESIGN D7): the raft leader's
// loop that probes the sidecars and moves leadership of a dead sidecar's
// broker's mirror partitions away and back. Its state is owned by its
// goroutine (run): no lock.
type failover struct {
	brokerID int32
	ctl      controller
	peers    peerClient
	destCl   *kgo.Client
	local    func() map[fsm.TopicPartition]bool // the partitions this sidecar drives
	timeout  time.Duration                      // sidecar.failover.timeout.ms
	now      func() time.Time
	log      *zap.Logger
	reg      prometheus.Registerer

	live    *liveness
	leading bool
	// probe checks the sidecar at addr; nil means it answered.
	probe func(ctx context.Context, addr string) error
	// warned is when each skip reason was last logged at warn level.
	warned map[string]time.Time

	alive      prometheus.Gauge
	movesAway  prometheus.Counter
	movesBack  prometheus.Counter
	collectors []prometheus.Collector
}

// newFailover returns f with its liveness tracker, probe and metrics.
func newFailover(f failover) *failover {
	f.live = newLiveness(f.brokerID, f.timeout, failoverProbeTimeout+failoverCheckInterval, failoverCheckInterval)
	f.probe = func(ctx context.Context, addr string) error {
		_, err := f.peers.Do(ctx, addr, &protocol.ApiVersionsRequest{})
		return err
	}
	f.warned = map[string]time.Time{}
	f.alive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sidemirror_sidecars_alive",
		Help: "Sidecars the raft leader sees alive (answering within sidecar.failover.timeout.ms), itself included; 0 on the other sidecars.",
	})
	moves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidemirror_partition_leadership_moves_total",
		Help: "Leadership moves of mirror partitions made as raft leader: away from brokers whose sidecar is dead, and back once it is alive.",
	}, []string{"direction"})
	f.movesAway, f.movesBack = moves.WithLabelValues("away"), moves.WithLabelValues("back")
	f.collectors = []prometheus.Collector{f.alive, moves}
	return &f
}

// register registers the metrics on reg (nil: none); unregister undoes it.
func (f *failover) register(reg prometheus.Registerer) error {
	if reg == nil {
		f.collectors = nil
		return nil
	}
	for i, c := range f.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range f.collectors[:i] {
				reg.Unregister(done)
			}
			f.collectors = nil
			return fmt.Errorf("coordinator: registering failover metrics: %w", err)
		}
	}
	return nil
}

func (f *failover) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range f.collectors {
		reg.Unregister(c)
	}
}

// run checks the sidecars every failoverCheckInterval while this sidecar
// is the raft leader and moves leadership as DESIGN D7 says, until ctx
// ends. Service.Run runs it.
func (f *failover) run(ctx context.Context) {
	if err := f.register(f.reg); err != nil {
		f.log.Warn("failover metrics are not exported", zap.Error(err))
	}
	defer f.unregister(f.reg)
	every(ctx, failoverCheckInterval, func() { f.round(ctx) })
}

// round runs one check and acts on it.
func (f *failover) round(ctx context.Context) {
	if !f.ctl.IsLeader() {
		if f.leading {
			f.leading = false
			f.live.reset()
			f.alive.Set(0)
		}
		return
	}
	if !f.leading {
		// A new leader starts its clocks fresh: everyone is alive at first
		// contact and dead only after a full timeout it observed itself.
		f.leading = true
		f.live.reset()
		f.log.Info("checking the sidecars' liveness as raft leader", zap.Duration("failover-timeout", f.timeout))
	}
	st := f.ctl.State()
	died, revived := f.live.observe(f.now(), f.probeSidecars(ctx, st))
	if ctx.Err() != nil {
		return
	}
	for _, id := range died {
		f.log.Warn("sidecar is dead: moving leadership of its broker's mirror partitions to brokers with live sidecars",
			zap.Int32("broker-id", id), zap.String("admin-address", sidecarAdminAddr(st, id)), zap.Duration("failover-timeout", f.timeout))
	}
	for _, id := range revived {
		f.log.Info("sidecar is alive again: its broker's mirror partitions move back once it no longer drives them",
			zap.Int32("broker-id", id), zap.String("admin-address", sidecarAdminAddr(st, id)))
	}
	f.alive.Set(float64(f.live.aliveCount()))
	if len(f.live.deadIDs()) == 0 && len(st.MovedPartitions) == 0 {
		return
	}
	if err := f.moveLeadership(ctx, st); err != nil && ctx.Err() == nil {
		f.log.Warn("moving leadership of mirror partitions; retrying next round", zap.Error(err))
	}
}

func sidecarAdminAddr(st *fsm.State, id int32) string {
	if sc := st.Sidecars[id]; sc != nil {
		return sc.AdminAddr
	}
	return ""
}

// probeSidecars checks every registered sidecar but this one, in parallel,
// and returns which answered.
func (f *failover) probeSidecars(ctx context.Context, st *fsm.State) map[int32]bool {
	answered := make(map[int32]bool, len(st.Sidecars))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, sc := range st.Sidecars {
		if id == f.brokerID {
			continue
		}
		if sc.AdminAddr == "" {
			mu.Lock()
			answered[id] = false
			mu.Unlock()
			continue
		}
		wg.Go(func() { // bounded by failoverProbeTimeout
			pctx, cancel := context.WithTimeout(ctx, failoverProbeTimeout)
			err := f.probe(pctx, sc.AdminAddr)
			cancel()
			if err != nil {
				f.log.Debug("liveness check failed", zap.Int32("broker-id", id), zap.String("admin-address", sc.AdminAddr), zap.Error(err))
			}
			mu.Lock()
			answered[id] = err == nil
			mu.Unlock()
		})
	}
	wg.Wait()
	return answered
}

// partitionInfo is a destination partition's leadership as Metadata tells.
type partitionInfo struct {
	leader   int32
	replicas []int32
	isr      []int32
}

// leaderMove is one change of a partition's leadership.
type leaderMove struct {
	tp       fsm.TopicPartition
	from, to int32   // leader now, and the broker that is to lead
	replicas []int32 // the replica order to set; nil keeps the current one
	original []int32 // the order to record first; nil records nothing
	back     bool    // a move back (else away)
}

// moveLeadership plans and carries out the moves of one round.
func (f *failover) moveLeadership(ctx context.Context, st *fsm.State) error {
	dead := f.live.deadIDs()
	topics := map[string]bool{}
	if len(dead) > 0 {
		for name, t := range st.Topics {
			if t.Status == fsm.TopicActive {
				topics[name] = true
			}
		}
	}
	for name := range st.MovedPartitions {
		topics[name] = true
	}
	if len(topics) == 0 {
		return nil
	}
	md, err := f.partitionMetadata(ctx, slices.Sorted(maps.Keys(topics)))
	if err != nil {
		return err
	}

	// What a sidecar drives is asked once per round, and only when needed.
	asked := map[int32]map[fsm.TopicPartition]bool{}
	askErr := map[int32]error{}
	drives := func(broker int32, tp fsm.TopicPartition) (bool, error) {
		if _, ok := asked[broker]; !ok && askErr[broker] == nil {
			asked[broker], askErr[broker] = f.drivenBy(ctx, st, broker)
		}
		if err := askErr[broker]; err != nil {
			return false, err
		}
		return asked[broker][tp], nil
	}
	back, clears, skips := planBack(st, md, f.live.back, drives)
	away, awaySkips := planAway(st, md, dead, f.live.back, drives, back)
	skips = append(skips, awaySkips...)
	for _, sk := range skips {
		f.warn(sk.key(), "skipping a leadership move of a mirror partition this round", sk.fields()...)
	}
	moves := append(back, away...)
	if len(moves) == 0 && len(clears) == 0 {
		return nil
	}

	// Never interfere with a reassignment someone else started.
	var reorder []fsm.TopicPartition
	for _, m := range moves {
		if m.replicas != nil {
			reorder = append(reorder, m.tp)
		}
	}
	if len(reorder) > 0 {
		busy, err := f.reassigning(ctx, reorder)
		if err != nil {
			return err
		}
		moves = slices.DeleteFunc(moves, func(m leaderMove) bool {
			if m.replicas != nil && busy[m.tp] {
				f.warn("busy/"+tpKey(m.tp), "skipping a leadership move of a mirror partition this round: a partition reassignment is in progress",
					zap.String("topic", m.tp.Topic), zap.Int32("partition", m.tp.Partition))
				return true
			}
			return false
		})
	}

	// Record the original orders before anything changes.
	var record []fsm.ReplicaOrder
	for _, m := range moves {
		if m.original != nil {
			record = append(record, fsm.ReplicaOrder{Topic: m.tp.Topic, Partition: m.tp.Partition, Replicas: m.original})
		}
	}
	if len(record) > 0 {
		if err := f.apply(ctx, fsm.RecordReplicaOrder{Partitions: record}); err != nil {
			f.log.Warn("cannot record the original replica order; moving no partition that needs it", zap.Error(err))
			moves = slices.DeleteFunc(moves, func(m leaderMove) bool { return m.original != nil })
		}
	}

	failed := map[fsm.TopicPartition]bool{}
	var alter []leaderMove
	for _, m := range moves {
		if m.replicas != nil {
			alter = append(alter, m)
		}
	}
	if len(alter) > 0 {
		errs, err := f.alterReplicaOrder(ctx, alter)
		if err != nil {
			return err
		}
		for tp, err := range errs {
			f.warn("alter/"+tpKey(tp), "reordering the replicas of a mirror partition failed; retrying next round",
				zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
			failed[tp] = true
		}
	}
	var elect []fsm.TopicPartition
	for _, m := range moves {
		if !failed[m.tp] {
			elect = append(elect, m.tp)
		}
	}
	if len(elect) > 0 {
		errs, err := f.electPreferred(ctx, elect)
		if err != nil {
			return err
		}
		for tp, err := range errs {
			f.warn("elect/"+tpKey(tp), "electing the preferred leader of a mirror partition failed; retrying next round",
				zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
			failed[tp] = true
		}
	}
	for _, m := range moves {
		if failed[m.tp] {
			continue
		}
		fields := []zap.Field{zap.String("topic", m.tp.Topic), zap.Int32("partition", m.tp.Partition),
			zap.Int32("from-broker", m.from), zap.Int32("to-broker", m.to)}
		if m.replicas != nil {
			fields = append(fields, zap.Int32s("replicas", m.replicas))
		}
		if m.back {
			f.movesBack.Inc()
			clears = append(clears, m.tp)
			f.log.Info("moved leadership of a mirror partition back: its sidecar is alive again", fields...)
		} else {
			f.movesAway.Inc()
			f.log.Info("moved leadership of a mirror partition away from a broker whose sidecar is dead", fields...)
		}
	}
	if len(clears) > 0 {
		if err := f.apply(ctx, fsm.ClearReplicaOrder{Partitions: clears}); err != nil {
			return fmt.Errorf("clearing the recorded replica order of restored partitions: %w", err)
		}
	}
	return nil
}

// warn logs at warn level, or at debug level when the same key was warned
// about within failoverWarnEvery.
func (f *failover) warn(key, msg string, fields ...zap.Field) {
	now := f.now()
	if last, ok := f.warned[key]; ok && now.Sub(last) < failoverWarnEvery {
		f.log.Debug(msg, fields...)
		return
	}
	f.warned[key] = now
	f.log.Warn(msg, fields...)
}

func tpKey(tp fsm.TopicPartition) string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// skip is a partition left alone this round, and why.
type skip struct {
	tp     fsm.TopicPartition
	reason string
	broker int32
}

func (sk skip) key() string { return sk.reason + "/" + tpKey(sk.tp) }

func (sk skip) fields() []zap.Field {
	return []zap.Field{zap.String("topic", sk.tp.Topic), zap.Int32("partition", sk.tp.Partition),
		zap.Int32("broker-id", sk.broker), zap.String("reason", sk.reason)}
}

// planBack decides which recorded partitions return to their original
// replica order. The original preferred replica (home) must have a sidecar
// that is back, be in sync, and, unless it leads already, its sidecar must
// not drive the partition: a sidecar that slept through the move may still
// hold it with stale offsets (see the file comment). A partition whose
// topic is gone from the destination, or whose replica set someone else
// changed, is only cleared. It returns the moves, the partitions to clear
// without a move, and the ones skipped.
func planBack(st *fsm.State, md map[string]map[int32]partitionInfo, back func(int32) bool,
	drives func(broker int32, tp fsm.TopicPartition) (bool, error)) (moves []leaderMove, clears []fsm.TopicPartition, skips []skip) {
	for _, topic := range slices.Sorted(maps.Keys(st.MovedPartitions)) {
		parts := st.MovedPartitions[topic]
		for _, p := range slices.Sorted(maps.Keys(parts)) {
			orig := parts[p]
			tp := fsm.TopicPartition{Topic: topic, Partition: p}
			pi, ok := md[topic][p]
			if !ok {
				clears = append(clears, tp) // the topic or partition is gone
				continue
			}
			if !sameSet(pi.replicas, orig) {
				skips = append(skips, skip{tp: tp, reason: fmt.Sprintf("the replicas changed from %v to %v meanwhile; the recorded order is dropped", orig, pi.replicas), broker: orig[0]})
				clears = append(clears, tp)
				continue
			}
			home := orig[0]
			inOrder := slices.Equal(pi.replicas, orig)
			switch {
			case inOrder && pi.leader == home:
				clears = append(clears, tp) // restored already
				continue
			case !back(home):
				continue // waiting for its sidecar
			case !slices.Contains(pi.isr, home):
				skips = append(skips, skip{tp: tp, reason: "the original preferred replica is not in sync yet", broker: home})
				continue
			}
			if pi.leader != home {
				driving, err := drives(home, tp)
				if err != nil {
					skips = append(skips, skip{tp: tp, reason: "cannot ask the sidecar of the original preferred replica what it drives: " + err.Error(), broker: home})
					continue
				}
				if driving {
					skips = append(skips, skip{tp: tp, reason: "the sidecar of the original preferred replica still drives the partition from before the move; waiting until it stopped", broker: home})
					continue
				}
			}
			m := leaderMove{tp: tp, from: pi.leader, to: home, back: true}
			if !inOrder {
				m.replicas = slices.Clone(orig)
			}
			moves = append(moves, m)
		}
	}
	return moves, clears, skips
}

// planAway decides which active mirror partitions led by a broker with a
// dead sidecar move where. A target is an in-sync replica whose sidecar
// answers steadily (live) and does not drive the partition: a sidecar that
// slept through an earlier move may still hold it with stale offsets, like
// a home in planBack. Partitions that move back this round are left out.
// Targets are balanced by the number of mirror partitions each broker
// leads.
func planAway(st *fsm.State, md map[string]map[int32]partitionInfo, dead []int32, live func(int32) bool,
	drives func(broker int32, tp fsm.TopicPartition) (bool, error), back []leaderMove) (moves []leaderMove, skips []skip) {
	if len(dead) == 0 {
		return nil, nil
	}
	restoring := map[fsm.TopicPartition]bool{}
	for _, m := range back {
		restoring[m.tp] = true
	}
	var active []string
	for _, name := range slices.Sorted(maps.Keys(st.Topics)) {
		if st.Topics[name].Status == fsm.TopicActive && md[name] != nil {
			active = append(active, name)
		}
	}
	load := map[int32]int{}
	for _, topic := range active {
		for _, pi := range md[topic] {
			load[pi.leader]++
		}
	}
	for _, d := range dead {
		for _, topic := range active {
			for _, p := range slices.Sorted(maps.Keys(md[topic])) {
				pi := md[topic][p]
				tp := fsm.TopicPartition{Topic: topic, Partition: p}
				if pi.leader != d || restoring[tp] {
					continue
				}
				usable := func(r int32) bool {
					if !live(r) {
						return false
					}
					driving, err := drives(r, tp)
					return err == nil && !driving
				}
				order, ok := reorderReplicas(pi.replicas, pi.isr, d, usable, load)
				if !ok {
					skips = append(skips, skip{tp: tp, reason: "no in-sync replica has a live sidecar free to take the partition", broker: d})
					continue
				}
				m := leaderMove{tp: tp, from: d, to: order[0]}
				if !slices.Equal(order, pi.replicas) {
					m.replicas = order
					if _, recorded := st.MovedReplicas(topic, p); !recorded {
						m.original = slices.Clone(pi.replicas)
					}
				}
				load[d]--
				load[order[0]]++
				moves = append(moves, m)
			}
		}
	}
	return moves, skips
}

// reorderReplicas returns replicas with the broker that is to lead first:
// an in-sync replica other than from for which usable holds, the one
// leading the fewest partitions by load, the earliest in replicas on a tie.
// The set is unchanged and the other replicas keep their order. ok is false
// when no replica qualifies.
func reorderReplicas(replicas, isr []int32, from int32, usable func(int32) bool, load map[int32]int) (out []int32, ok bool) {
	best := -1
	for i, r := range replicas {
		if r == from || !slices.Contains(isr, r) || !usable(r) {
			continue
		}
		if best < 0 || load[r] < load[replicas[best]] {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	out = make([]int32, 0, len(replicas))
	out = append(out, replicas[best])
	out = append(out, replicas[:best]...)
	out = append(out, replicas[best+1:]...)
	return out, true
}

func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// apply applies c through raft, bounded, and returns its error, the
// command's own included.
func (f *failover) apply(ctx context.Context, c fsm.Command) error {
	actx, cancel := context.WithTimeout(ctx, failoverKafkaTimeout)
	defer cancel()
	_, err := applyChecked(actx, f.ctl, c)
	return err
}

// partitionMetadata returns leader, replicas and ISR of every partition of
// topics on the destination. Topics the destination does not know are
// left out; any other error fails the call, so that no partition is taken
// for gone by mistake.
func (f *failover) partitionMetadata(ctx context.Context, topics []string) (map[string]map[int32]partitionInfo, error) {
	mctx, cancel := context.WithTimeout(ctx, failoverKafkaTimeout)
	defer cancel()
	md, err := destinationMetadata(mctx, f.destCl, topics)
	if err != nil {
		return nil, fmt.Errorf("destination metadata: %w", err)
	}
	out := map[string]map[int32]partitionInfo{}
	for name, t := range md {
		switch {
		case errors.Is(t.err, kerr.UnknownTopicOrPartition):
			continue
		case t.err != nil:
			return nil, fmt.Errorf("destination metadata of topic %s: %w", name, t.err)
		}
		m := map[int32]partitionInfo{}
		for p, pm := range t.partitions {
			// LEADER_NOT_AVAILABLE still names replicas and ISR.
			m[p] = partitionInfo{leader: pm.leader, replicas: pm.replicas, isr: pm.isr}
		}
		out[name] = m
	}
	return out, nil
}

// drivenBy returns the partitions the sidecar of broker drives.
func (f *failover) drivenBy(ctx context.Context, st *fsm.State, broker int32) (map[fsm.TopicPartition]bool, error) {
	out := map[fsm.TopicPartition]bool{}
	if broker == f.brokerID {
		return f.local(), nil
	}
	addr := sidecarAdminAddr(st, broker)
	if addr == "" {
		return nil, fmt.Errorf("sidecar %d has no admin address registered", broker)
	}
	dctx, cancel := context.WithTimeout(ctx, failoverProbeTimeout)
	defer cancel()
	resp, err := f.peers.Do(dctx, addr, &protocol.DescribeLocalPartitionsRequest{})
	if err != nil {
		return nil, err
	}
	r := resp.(*protocol.DescribeLocalPartitionsResponse)
	if r.ErrorCode != 0 {
		return nil, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage)
	}
	for _, m := range r.Mirrors {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				out[fsm.TopicPartition{Topic: t.TopicName, Partition: p.PartitionIndex}] = true
			}
		}
	}
	return out, nil
}

// reassigning returns which of tps have a reassignment in progress.
func (f *failover) reassigning(ctx context.Context, tps []fsm.TopicPartition) (map[fsm.TopicPartition]bool, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = int32(failoverKafkaTimeout / time.Millisecond)
	for topic, parts := range groupByTopic(tps) {
		rt := kmsg.NewListPartitionReassignmentsRequestTopic()
		rt.Topic, rt.Partitions = topic, parts
		req.Topics = append(req.Topics, rt)
	}
	lctx, cancel := context.WithTimeout(ctx, failoverKafkaTimeout)
	defer cancel()
	resp, err := req.RequestWith(lctx, f.destCl)
	if err != nil {
		return nil, fmt.Errorf("destination ListPartitionReassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("destination ListPartitionReassignments: %w: %s", err, deref(resp.ErrorMessage))
	}
	busy := map[fsm.TopicPartition]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			busy[fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = true
		}
	}
	return busy, nil
}

// alterReplicaOrder sets the replica order of the moves' partitions. It
// returns the error of each partition that failed, and an error when the
// request failed as a whole.
func (f *failover) alterReplicaOrder(ctx context.Context, moves []leaderMove) (map[fsm.TopicPartition]error, error) {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = int32(failoverKafkaTimeout / time.Millisecond)
	req.AllowReplicationFactorChange = false
	idx := map[string]int{}
	for _, m := range moves {
		i, ok := idx[m.tp.Topic]
		if !ok {
			i = len(req.Topics)
			idx[m.tp.Topic] = i
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = m.tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = m.tp.Partition, m.replicas
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	actx, cancel := context.WithTimeout(ctx, failoverKafkaTimeout)
	defer cancel()
	resp, err := req.RequestWith(actx, f.destCl)
	if err != nil {
		return nil, fmt.Errorf("destination AlterPartitionReassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("destination AlterPartitionReassignments: %w: %s", err, deref(resp.ErrorMessage))
	}
	errs := map[fsm.TopicPartition]error{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs[fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = fmt.Errorf("%w: %s", err, deref(p.ErrorMessage))
			}
		}
	}
	return errs, nil
}

// electPreferred elects the preferred (first) replica of tps as leader. A
// partition whose preferred replica leads already counts as success.
func (f *failover) electPreferred(ctx context.Context, tps []fsm.TopicPartition) (map[fsm.TopicPartition]error, error) {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = 0 // preferred
	req.TimeoutMillis = int32(failoverKafkaTimeout / time.Millisecond)
	for topic, parts := range groupByTopic(tps) {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, parts
		req.Topics = append(req.Topics, rt)
	}
	ectx, cancel := context.WithTimeout(ctx, failoverKafkaTimeout)
	defer cancel()
	resp, err := req.RequestWith(ectx, f.destCl)
	if err != nil {
		return nil, fmt.Errorf("destination ElectLeaders: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("destination ElectLeaders: %w", err)
	}
	errs := map[fsm.TopicPartition]error{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			err := kerr.ErrorForCode(p.ErrorCode)
			if err != nil && !errors.Is(err, kerr.ElectionNotNeeded) {
				errs[fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = fmt.Errorf("%w: %s", err, deref(p.ErrorMessage))
			}
		}
	}
	return errs, nil
}

// groupByTopic groups partitions by topic, partitions in the given order.
func groupByTopic(tps []fsm.TopicPartition) map[string][]int32 {
	out := map[string][]int32{}
	for _, tp := range tps {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	return out
}
