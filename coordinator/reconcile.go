package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/partstate"
	"github.com/sidemirror/sidemirror/protocol"
)

// DataPlane is what the coordinator needs of the data plane
// (*fetcher.Manager): per-mirror source clients and per-partition mirroring.
type DataPlane interface {
	SetMirror(name string, source []kgo.Opt, settings fetcher.MirrorSettings) error
	SetMirrorSettings(name string, settings fetcher.MirrorSettings) error
	RemoveMirror(name string)
	Start(p fetcher.Partition) error
	// Recover restarts a FAILED partition on an operator's request; the
	// operator accepts the destination's end as it stands.
	Recover(p fetcher.Partition) error
	// StopPartitions stops the drivers of ps together and returns those
	// that had not stopped when ctx ended, with the error.
	StopPartitions(ctx context.Context, ps []fetcher.Partition) map[fetcher.Partition]error
	Status() []fetcher.PartitionStatus
	SetReplicationThrottle(rt fetcher.ReplicationThrottle)
}

// DataPlaneEvents is what the data plane reports to the coordinator
// (fetcher.OnStateChange, fetcher.OnNotLeader): a driver's new state, and
// a partition the local broker no longer leads, whose driver it removed.
// Neither call blocks.
type DataPlaneEvents interface {
	StateChanged(ps fetcher.PartitionStatus)
	NotLeader(p fetcher.Partition)
}

// reconcileController is the controller as the reconciler needs it: it
// also waits for changes, and for the state to hold every committed
// command before acting on it.
type reconcileController interface {
	controller
	Changed() <-chan struct{}
	WaitCaughtUp(ctx context.Context) error
}

// stateLoader is the __mirror_state coordinator role, refreshed before
// every pass so that the states of the partitions led here are loaded.
type stateLoader interface {
	refresh(ctx context.Context, st *fsm.State) error
}

// reconciler keeps the data plane driving exactly the active mirror
// partitions whose destination leader is the local broker (DESIGN D7),
// and is the owner of each: it moves them through the partition state
// machine (internal/partstate) and hands every new state to the state
// writer. It runs on its own goroutine (run); the data plane's events and
// the admin endpoint's reads reach its state under mu, which guards only
// the reconciler's own state and is never held across a call to the data
// plane, the destination or raft; the state writer's lock is taken under
// it (queue), never the other way round.
type reconciler struct {
	brokerID int32
	ctl      reconcileController
	dp       DataPlane
	dial     SourceDialer
	destCl   *kgo.Client
	loader   stateLoader // nil without __mirror_state
	writer   *stateWriter
	interval time.Duration
	now      func() time.Time
	log      *zap.Logger
	reg      prometheus.Registerer

	kick     chan struct{}    // asks the loop to run now
	lastPass prometheus.Gauge // when the last pass ended
	// blockedParts counts, by mirror, the partitions FAILED here because
	// the mirror's source config cannot be used on this sidecar.
	blockedParts *prometheus.GaugeVec

	mu         sync.Mutex
	running    map[fetcher.Partition]*owned // partitions driven on the data plane, with their states
	sources    map[string]string            // mirror -> fingerprint of its source config
	sourceErr  map[string]string            // mirror -> why its source config cannot be used here
	blocked    map[fetcher.Partition]string // partitions to drive that wait for their mirror's source config, with the reason
	settings   map[string]string            // mirror -> its data plane settings as last set
	retries    map[fetcher.Partition]*retryState
	nextRetry  time.Time        // when the next automatic retry is due; zero if none
	restartGen map[string]int64 // RestartGen of each topic seen by reconcile
	// throttle is the data plane's throttle as last set (throttle.go);
	// only the loop's goroutine uses it.
	throttle *fetcher.ReplicationThrottle
}

// owned is a partition this sidecar drives: where it stands in the
// partition state machine, and the data plane's last report of it.
type owned struct {
	state partstate.State
	last  fetcher.PartitionStatus
}

func newReconciler(r *reconciler) *reconciler {
	r.kick = make(chan struct{}, 1)
	r.running = map[fetcher.Partition]*owned{}
	r.sources = map[string]string{}
	r.sourceErr = map[string]string{}
	r.blocked = map[fetcher.Partition]string{}
	r.settings = map[string]string{}
	r.retries = map[fetcher.Partition]*retryState{}
	r.restartGen = map[string]int64{}
	r.lastPass = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sidemirror_reconcile_last_pass_timestamp_seconds",
		Help: "When this sidecar last finished checking which mirror partitions it drives (every few seconds and on every change).",
	})
	r.blockedParts = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sidemirror_source_config_failed_partitions",
		Help: "Partitions this sidecar should drive but shows FAILED because the mirror's source config cannot be used here (a ${file:} or ${env:} reference that does not resolve, say).",
	}, []string{"mirror"})
	return r
}

// Kick asks the loop to run soon.
func (r *reconciler) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run reconciles until ctx ends: on every controller change, on NOT_LEADER
// from the data plane (Kick), and every interval (leadership moves are not
// pushed to us).
func (r *reconciler) run(ctx context.Context) {
	if r.reg != nil {
		if err := r.reg.Register(r.lastPass); err != nil {
			r.log.Warn("reconcile metrics are not exported", zap.Error(err))
		} else {
			defer r.reg.Unregister(r.lastPass)
		}
		if err := r.reg.Register(r.blockedParts); err != nil {
			r.log.Warn("source config metrics are not exported", zap.Error(err))
		} else {
			defer r.reg.Unregister(r.blockedParts)
		}
	}
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		watch := r.ctl.Changed()
		if err := r.reconcile(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reconcile", zap.Error(err))
		}
		r.lastPass.Set(float64(r.now().UnixNano()) / 1e9)
		// An automatic retry due before the next tick wakes the loop up.
		var retry <-chan time.Time
		r.mu.Lock()
		next := r.nextRetry
		r.mu.Unlock()
		var timer *time.Timer
		if !next.IsZero() {
			timer = time.NewTimer(max(next.Sub(r.now()), time.Millisecond))
			retry = timer.C
		}
		select {
		case <-ctx.Done():
		case <-watch:
		case <-r.kick:
		case <-tick.C:
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// reconcile runs one pass. It acts only once this sidecar's controller
// state has caught up with the raft group: a sidecar that restarts with an
// old state must not resume a topic that was stopped meanwhile.
func (r *reconciler) reconcile(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := r.ctl.WaitCaughtUp(wctx)
	cancel()
	if err != nil {
		return nil // not yet; the next pass retries
	}
	st := r.ctl.State()
	r.syncSources(st)
	r.syncThrottle(st)
	if r.loader != nil {
		if err := r.loader.refresh(ctx, st); err != nil && ctx.Err() == nil {
			r.log.Warn("mirror state coordinator", zap.Error(err))
		}
	}

	active := drivenTopics(st)
	want := map[fetcher.Partition]bool{}
	if len(active) > 0 {
		leaders, err := r.leaders(ctx, active)
		if err != nil {
			return err
		}
		epochs := map[fetcher.Partition]int32{}
		for _, name := range active {
			t := st.Topics[name]
			for p := range t.Partitions {
				if l, ok := leaders[name][p]; ok && l.leader == r.brokerID {
					fp := fetcher.Partition{Mirror: t.Mirror, Topic: name, Partition: p}
					want[fp] = true
					epochs[fp] = l.epoch
				}
			}
		}
		r.writer.setEpochs(epochs)
	}

	r.mu.Lock()
	var toStart, toStop []fetcher.Partition
	blocked := map[fetcher.Partition]string{}
	for p := range want {
		if r.running[p] == nil {
			if reason := r.sourceErr[p.Mirror]; reason != "" {
				// Not startable here until the source config resolves:
				// FAILED with the reason; every pass tries again.
				blocked[p] = reason
				continue
			}
			toStart = append(toStart, p)
		}
	}
	r.blocked = blocked
	r.blockedParts.Reset()
	for p := range blocked {
		r.blockedParts.WithLabelValues(p.Mirror).Inc()
	}
	for p := range r.running {
		if !want[p] {
			toStop = append(toStop, p)
		}
	}
	r.mu.Unlock()

	r.letGo(ctx, st, toStop)
	next := r.retryFailed(r.now(), st)
	r.mu.Lock()
	r.nextRetry = next
	r.mu.Unlock()
	r.restartRequested(st)
	for _, p := range toStart {
		r.mu.Lock()
		// Recorded before the driver starts, so that none of its reports
		// is missed.
		r.running[p] = &owned{state: partstate.Next(partstate.Unknown, partstate.Lead).To}
		r.mu.Unlock()
		if err := r.dp.Start(p); err != nil {
			r.mu.Lock()
			delete(r.running, p)
			r.mu.Unlock()
			r.log.Warn("start partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
			continue
		}
		r.log.Info("driving partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic), zap.Int32("partition", p.Partition))
	}
	return nil
}

// letGo stops driving ps, which this sidecar no longer has to drive:
// their topic was paused (PAUSING until the driver is removed, then PAUSED)
// or stopped (STOPPING; the stop sequence of the operation records
// STOPPED), or its broker no longer leads them (the state stays as it is
// for the next owner, with the last destination log end offset). The
// entered states are recorded in __mirror_state, in one write, before the
// drivers are removed, and the drivers are stopped together: a --stop of a
// thousand partitions costs one write and about the slowest driver's stop,
// not a thousand of each.
func (r *reconciler) letGo(ctx context.Context, st *fsm.State, ps []fetcher.Partition) {
	if len(ps) == 0 {
		return
	}
	entered := false
	r.mu.Lock()
	for _, p := range ps {
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
			r.applyLocked(p, ev)
			entered = true
		}
	}
	r.mu.Unlock()
	if entered {
		r.writer.flushSoon(ctx)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	failed := r.dp.StopPartitions(sctx, ps)
	cancel()
	for _, p := range ps {
		if err := failed[p]; err != nil {
			r.log.Warn("stop partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Error(err))
			continue
		}
		r.released(p)
		r.log.Info("no longer driving partition", zap.String("mirror", p.Mirror), zap.String("topic", p.Topic), zap.Int32("partition", p.Partition))
	}
}

// released applies Release to p, whose driver the data plane removed, and
// forgets it. A transitional state still queued is dropped: the pause or
// stop sequence of the operation records the resting state of every
// partition, and a late write must not overwrite it.
func (r *reconciler) released(p fetcher.Partition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[p] == nil {
		return
	}
	r.applyLocked(p, partstate.Release)
	r.writer.dropTransitional(p)
	delete(r.running, p)
}

// releaseAll releases every partition still driven, once the data plane
// has closed (the shutdown's "persist state" step): their states are
// queued with the last offsets their drivers reported.
func (r *reconciler) releaseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.running {
		r.applyLocked(p, partstate.Release)
		delete(r.running, p)
	}
}

// applyLocked moves the partition this sidecar drives as the partition
// state machine says event ev does, and queues the new state for
// __mirror_state. UNKNOWN is never recorded (it means "no state"). A
// Release records the state as it is, with the last destination log end
// offset, for the next owner. r.mu is held.
func (r *reconciler) applyLocked(p fetcher.Partition, ev partstate.Event) partstate.Transition {
	o := r.running[p]
	if o == nil {
		return partstate.Transition{}
	}
	t := partstate.Next(o.state, ev)
	if !t.Allowed() {
		return t
	}
	o.state = t.To
	if (t.Changes() || t.Action == partstate.Forget) && o.state != partstate.Unknown {
		status := o.last
		status.Partition, status.State = p, o.state
		r.writer.queue(status, r.retryAttemptLocked(p))
	}
	return t
}

// StateChanged implements DataPlaneEvents: a driver of a partition this
// sidecar drives reports its state, which moves the partition as the
// partition state machine says. A report of a driver this sidecar let go
// is late and dropped.
func (r *reconciler) StateChanged(ps fetcher.PartitionStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.running[ps.Partition]
	if o == nil {
		return
	}
	o.last = ps
	if ev, ok := reportEvent(ps.State); ok {
		r.applyLocked(ps.Partition, ev)
	}
	if ps.State == fetcher.StateFailed {
		r.Kick() // the first automatic retry may be due in 100 ms
	}
}

// NotLeader implements DataPlaneEvents: the local broker no longer leads
// p, whose driver the data plane removed, so the partition is released
// (its state recorded for the next owner) and ownership re-checked.
func (r *reconciler) NotLeader(p fetcher.Partition) {
	r.released(p)
	r.Kick()
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

// drives reports which partitions the data plane drives here.
func (r *reconciler) drives() map[fsm.TopicPartition]bool {
	out := map[fsm.TopicPartition]bool{}
	for _, ps := range r.dp.Status() {
		out[fsm.TopicPartition{Topic: ps.Topic, Partition: ps.Partition.Partition}] = true
	}
	return out
}

// LocalRows returns the describe rows of the partitions this sidecar's
// data plane drives, grouped by mirror and topic (DescribeLocalPartitions;
// every mirror when mirrors is empty), each in its owner's state.
func (r *reconciler) LocalRows(mirrors []string) []protocol.DescribedMirror {
	byMirror := map[string]map[string][]protocol.PartitionDetail{}
	var st *fsm.State
	if r.ctl != nil {
		st = r.ctl.State()
	}
	for _, ps := range r.dp.Status() {
		if len(mirrors) > 0 && !slices.Contains(mirrors, ps.Mirror) {
			continue
		}
		if byMirror[ps.Mirror] == nil {
			byMirror[ps.Mirror] = map[string][]protocol.PartitionDetail{}
		}
		byMirror[ps.Mirror][ps.Topic] = append(byMirror[ps.Mirror][ps.Topic], r.detail(ps, r.ownedState(ps), st))
	}
	for p, reason := range r.blockedRows() {
		if len(mirrors) > 0 && !slices.Contains(mirrors, p.Mirror) {
			continue
		}
		if byMirror[p.Mirror] == nil {
			byMirror[p.Mirror] = map[string][]protocol.PartitionDetail{}
		}
		// Retried on every pass until the config resolves, not by the
		// retry policy: no RETRY count to show.
		d := r.detail(fetcher.PartitionStatus{Partition: p, SourceHighWatermark: -1, DestinationLogEndOffset: -1, Lag: -1, LastError: reason},
			partstate.Failed, nil)
		d.RetryAttempt, d.MaxRetryAttempts, d.NonRetryable = 0, -1, false
		byMirror[p.Mirror][p.Topic] = append(byMirror[p.Mirror][p.Topic], d)
	}
	var out []protocol.DescribedMirror
	for _, m := range sortedKeys(byMirror) {
		var dm protocol.DescribedMirror
		dm.Default()
		dm.MirrorName = m
		for _, t := range sortedKeys(byMirror[m]) {
			parts := byMirror[m][t]
			slices.SortFunc(parts, func(a, b protocol.PartitionDetail) int { return int(a.PartitionIndex) - int(b.PartitionIndex) })
			dm.Topics = append(dm.Topics, protocol.DescribedTopic{TopicName: t, Partitions: parts})
		}
		out = append(out, dm)
	}
	return out
}

// blockedRows returns the partitions this sidecar would drive but cannot,
// because their mirror's source config does not resolve or is refused here,
// with the reason.
func (r *reconciler) blockedRows() map[fetcher.Partition]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[fetcher.Partition]string, len(r.blocked))
	for p, reason := range r.blocked {
		if r.running[p] == nil {
			out[p] = reason
		}
	}
	return out
}

// ownedState returns the state of a partition the data plane reports: the
// owner's (PAUSING while its driver is removed for a pause, say), or the
// data plane's own for a partition this sidecar is not driving (any
// more).
func (r *reconciler) ownedState(ps fetcher.PartitionStatus) partstate.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.running[ps.Partition]; o != nil {
		return o.state
	}
	return ps.State
}

// detail turns a data plane status into a describe row, in state st, with
// the automatic retries of a FAILED partition by its mirror's policy in
// cs (nil: the defaults).
func (r *reconciler) detail(ps fetcher.PartitionStatus, st partstate.State, cs *fsm.State) protocol.PartitionDetail {
	d := protocol.PartitionDetail{}
	d.Default()
	d.PartitionIndex = ps.Partition.Partition
	d.SourceOffset = ps.SourceHighWatermark
	d.DestinationOffset = ps.DestinationLogEndOffset
	d.Lag = ps.Lag
	d.State = st.String()
	d.OwnerBrokerId = r.brokerID
	if ps.LastError != "" {
		d.LastError = strPtr(ps.LastError)
	}
	d.LagTimeMs = ps.LagTime.Milliseconds()
	d.MirroredBytes = ps.BytesMirrored
	if !ps.LastFetch.IsZero() {
		d.LastFetchTimestampMs = ps.LastFetch.UnixMilli()
	}
	if since := ps.SourceUnreachableSince; !since.IsZero() {
		// The lag at the last known source high watermark is no lag
		// anyone can rely on: not available, and the reason says why.
		d.Lag = -1
		d.SourceUnreachableSinceMs = since.UnixMilli()
		msg := fmt.Sprintf("source unreachable since %s (%s ago)", since.UTC().Format(time.RFC3339),
			time.Since(since).Round(time.Second))
		if ps.LastError != "" {
			msg += ": " + ps.LastError
		}
		d.LastError = &msg
	}
	if st == partstate.Failed {
		var m *fsm.Mirror
		if cs != nil {
			m = cs.Mirrors[ps.Mirror]
		}
		r.mu.Lock()
		d.RetryAttempt, d.MaxRetryAttempts, d.NonRetryable = r.retryInfoLocked(ps, m)
		r.mu.Unlock()
	}
	return d
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
func (r *reconciler) syncSources(st *fsm.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, m := range st.Mirrors {
		cfg := sourceConfig(m.Config)
		settings := dataPlaneSettings(st, m)
		fp, sfp := fingerprint(cfg), fmt.Sprintf("%+v", settings)
		if r.sources[name] == fp {
			if r.settings[name] != sfp {
				if err := r.dp.SetMirrorSettings(name, settings); err != nil {
					r.log.Error("cannot update the data plane settings of a mirror", zap.String("mirror", name), zap.Error(err))
					continue
				}
				r.settings[name] = sfp
			}
			continue
		}
		// dial resolves the config's ${file:...} and ${env:...}
		// references here, in this sidecar's environment. Its errors name
		// the key and the reference, never a value.
		opts, err := r.dial(cfg)
		if err == nil {
			// The data plane names the client as the KIP does
			// (fetcher.FetcherClientID) unless opts set a client ID:
			// the mirror config's client.id.
			err = r.dp.SetMirror(name, opts, settings)
		}
		if err != nil {
			reason := "the mirror's source config cannot be used on this sidecar: " + err.Error()
			if r.sourceErr[name] != reason { // logged once per reason, retried every pass
				r.log.Error("cannot configure the source client of a mirror; retrying on every pass", zap.String("mirror", name), zap.Error(err))
			}
			r.sourceErr[name] = reason
			continue
		}
		if _, ok := r.sourceErr[name]; ok {
			r.log.Info("the source config of a mirror can be used again", zap.String("mirror", name))
			delete(r.sourceErr, name)
		}
		r.sources[name], r.settings[name] = fp, sfp
	}
	for name := range r.sourceErr {
		if _, ok := st.Mirrors[name]; !ok {
			delete(r.sourceErr, name)
		}
	}
	for name := range r.sources {
		if _, ok := st.Mirrors[name]; !ok {
			r.dp.RemoveMirror(name)
			delete(r.sources, name)
			delete(r.settings, name)
			for p := range r.running {
				if p.Mirror == name {
					delete(r.running, p)
					r.writer.drop(p)
				}
			}
		}
	}
}

// leadership is a destination partition's leader and leader epoch.
type leadership struct{ leader, epoch int32 }

// leaders returns the destination leader of every partition of topics.
func (r *reconciler) leaders(ctx context.Context, topics []string) (map[string]map[int32]leadership, error) {
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := destinationMetadata(mctx, r.destCl, topics)
	if err != nil {
		return nil, fmt.Errorf("destination metadata: %w", err)
	}
	out := map[string]map[int32]leadership{}
	for name, t := range md {
		if t.err != nil {
			continue
		}
		m := map[int32]leadership{}
		for p, pm := range t.partitions {
			if pm.err == nil {
				m[p] = leadership{leader: pm.leader, epoch: pm.epoch}
			}
		}
		out[name] = m
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
