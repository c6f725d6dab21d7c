package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
)

// Metadata sync (DESIGN D10, KIP-1279 §2.2): every
// mirror.metadata.refresh.interval.ms the raft leader compares each mirror's
// source with the destination and brings the destination in line, in
// independent steps (one failing step does not stop the others):
//
//   - cluster ID: a source that reports another cluster ID halts fetching and
//     sync for the mirror (Mirror.SyncFault) until the ID returns;
//   - topic IDs: a source topic recreated (another topic ID) is no longer
//     driven (MirrorTopic.SyncFault);
//   - partitions: partitions added on the source are added on the
//     destination (CreatePartitions) and recorded (SetTopicPartitions);
//   - configs, consumer group offsets, ACLs: see metasync_configs.go,
//     metasync_groups.go and metasync_acls.go;
//   - read-only ACLs: the ALLOW ALL for User:* beside a DENY WRITE follows
//     the other ACLs of the topic (metasync_readonly.go). This step needs
//     only the destination: it runs last, whatever the source steps did,
//     and covers paused topics too (they are read-only as well).
//
// Otherwise paused, stopped and faulty topics are skipped. DESIGN D10 says
// "run by the coordinator": here that is the raft leader, one sidecar per
// destination cluster. That is the simplest correct choice at this scale
// (one source connection and a handful of admin requests per mirror and
// interval), and its faults and records go through raft, so every sidecar
// acts on them.

// Metadata sync step names, the step label of the metrics.
const (
	stepClusterID  = "cluster_id"
	stepTopicID    = "topic_id"
	stepPartitions = "partitions"
	stepConfigs    = "configs"
	stepGroups     = "groups"
	stepACLs       = "acls"
)

// metaSyncCheckInterval is how often the loop looks for mirrors due a sync.
const metaSyncCheckInterval = time.Second

// metaSyncMetrics are the metadata sync's metrics.
type metaSyncMetrics struct {
	lastSuccess *prometheus.GaugeVec
	items       *prometheus.CounterVec
	errors      *prometheus.CounterVec
	registered  []prometheus.Collector
}

func newMetaSyncMetrics() *metaSyncMetrics {
	labels := []string{"mirror", "step"}
	return &metaSyncMetrics{
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidemirror_metadata_sync_last_success_timestamp_seconds",
			Help: "When a metadata sync step last succeeded for a mirror (on the raft leader).",
		}, labels),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_metadata_sync_items_total",
			Help: "Items a metadata sync step changed on the destination: partitions added, configs altered, group offsets committed, ACLs created or deleted, faults set or cleared.",
		}, labels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_metadata_sync_errors_total",
			Help: "Failed metadata sync steps.",
		}, labels),
	}
}

// register registers the metrics on reg (nil: none); unregister undoes it.
func (m *metaSyncMetrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.lastSuccess, m.items, m.errors} {
		if err := reg.Register(c); err != nil {
			m.unregister(reg)
			return fmt.Errorf("coordinator: registering metadata sync metrics: %w", err)
		}
		m.registered = append(m.registered, c)
	}
	return nil
}

func (m *metaSyncMetrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.registered {
		reg.Unregister(c)
	}
	m.registered = nil
}

// record accounts one step's outcome.
func (m *metaSyncMetrics) record(mirror, step string, items int, err error, now time.Time) {
	if items > 0 {
		m.items.WithLabelValues(mirror, step).Add(float64(items))
	}
	if err != nil {
		m.errors.WithLabelValues(mirror, step).Inc()
		return
	}
	m.lastSuccess.WithLabelValues(mirror, step).Set(float64(now.UnixNano()) / 1e9)
}

// metaSync is the metadata sync of DESIGN D10, with topic discovery and
// the re-check of read-only ACLs: the raft leader's loops (run,
// runDiscovery) that keep each mirror's destination topics in step with
// the source. What others must act on goes through raft; the loops' own
// state (when each mirror was last synced) belongs to their goroutines.
type metaSync struct {
	ctl     controller
	dial    SourceDialer
	dest    *Destination
	destCl  *kgo.Client
	states  stateReader // offset maps (translate mode; repeated markers in exact mode)
	starter topicStarter
	timeout time.Duration // bounds one mirror's round (RequestTimeout)
	now     func() time.Time
	log     *zap.Logger
	reg     prometheus.Registerer
}

// stateReader reads a mirror's persisted partition states (stateWriter).
type stateReader interface {
	readStatesOf(ctx context.Context, req *protocol.ReadMirrorStatesRequest) (map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition, error)
}

// topicStarter starts topics of a mirror as --start does (admin.start):
// discovery starts the topics it finds through it.
type topicStarter interface {
	start(ctx context.Context, req startRequest) startResult
}

// run syncs every mirror's metadata once per
// mirror.metadata.refresh.interval.ms while this sidecar is the raft leader,
// until ctx ends. Service.Run runs it.
func (ms *metaSync) run(ctx context.Context) {
	m := newMetaSyncMetrics()
	if err := m.register(ms.reg); err != nil {
		ms.log.Warn("metadata sync metrics are not exported", zap.Error(err))
	}
	defer m.unregister(ms.reg)
	log := ms.log.Named("metasync")
	last := map[string]time.Time{} // mirror -> last sync
	every(ctx, metaSyncCheckInterval, func() { ms.syncDueMirrors(ctx, log, m, last) })
}

// refreshDue reports whether mirror.metadata.refresh.interval.ms of m has
// passed since last[m.Name], and if so sets last[m.Name] to now.
func refreshDue(m *fsm.Mirror, last map[string]time.Time, now time.Time) bool {
	ms, _ := strconv.ParseInt(mirrorSetting(m, RefreshIntervalKey), 10, 64)
	if now.Sub(last[m.Name]) < time.Duration(ms)*time.Millisecond {
		return false
	}
	last[m.Name] = now
	return true
}

// syncDueMirrors syncs, one after the other, the mirrors whose refresh
// interval has passed since last[mirror], while this sidecar is the raft
// leader.
func (ms *metaSync) syncDueMirrors(ctx context.Context, log *zap.Logger, m *metaSyncMetrics, last map[string]time.Time) {
	if !ms.ctl.IsLeader() {
		clear(last) // a new term of leadership syncs at once
		return
	}
	st := ms.ctl.State()
	now := ms.now()
	for name := range last {
		if st.Mirrors[name] == nil {
			delete(last, name)
		}
	}
	for _, name := range st.MirrorNames() {
		mir := st.Mirrors[name]
		if !refreshDue(mir, last, now) {
			continue
		}
		ms.syncMirrorMetadata(ctx, log.With(zap.String("mirror", name)), m, st, mir)
		if ctx.Err() != nil {
			return
		}
	}
}

// metaSyncRound is one sync of one mirror: its clients and the topics in
// scope.
type metaSyncRound struct {
	ms     *metaSync
	log    *zap.Logger
	mirror *fsm.Mirror
	src    *kgo.Client
	srcAdm *kadm.Client
	dstAdm *kadm.Client
	// topics are the mirror's active topics without a fault, by name.
	topics map[string]*fsm.MirrorTopic
	// source is the source's view of the topics, by name.
	source map[string]SourceTopic
}

// syncMirrorMetadata runs every step for one mirror.
func (ms *metaSync) syncMirrorMetadata(ctx context.Context, log *zap.Logger, metrics *metaSyncMetrics, st *fsm.State, m *fsm.Mirror) {
	defer ms.recheckReadOnly(ctx, log, metrics, m.Name) // after the ACL sync, whatever the source steps did
	ctx, cancel := context.WithTimeout(ctx, ms.timeout)
	defer cancel()
	src, err := newSourceClient(ms.dial, sourceConfig(m.Config))
	if err != nil {
		metrics.record(m.Name, stepClusterID, 0, err, ms.now())
		log.Warn("metadata sync: cannot connect to the source", zap.Error(err))
		return
	}
	defer src.Close()
	r := &metaSyncRound{ms: ms, log: log, mirror: m, src: src, srcAdm: kadm.NewClient(src), dstAdm: kadm.NewClient(ms.destCl),
		topics: map[string]*fsm.MirrorTopic{}}
	step := func(name string, f func(context.Context) (int, error)) error {
		items, err := f(ctx)
		metrics.record(m.Name, name, items, err, ms.now())
		if err != nil && ctx.Err() == nil {
			log.Warn("metadata sync step failed", zap.String("step", name), zap.Error(err))
		}
		return err
	}
	// The cluster ID gates everything: another cluster's metadata must not
	// reach the destination.
	if err := step(stepClusterID, r.syncClusterID); err != nil || r.mirror.SyncFault != "" {
		return
	}
	for _, t := range st.TopicsOf(m.Name) {
		// A diverged topic (failback, DESIGN D9) is left as it is until
		// the operator re-seeds or stops it: its group offsets and configs
		// are this cluster's own until then.
		if t.Status == fsm.TopicActive && len(t.Diverged) == 0 {
			r.topics[t.Name] = t
		}
	}
	if len(r.topics) == 0 && len(m.SyncedACLs) == 0 {
		return
	}
	if err := step(stepTopicID, r.syncTopicIDs); err != nil {
		return // the other steps need the source's topics
	}
	_ = step(stepPartitions, r.syncPartitions)
	_ = step(stepConfigs, r.syncConfigs)
	_ = step(stepGroups, r.syncGroups)
	_ = step(stepACLs, r.syncACLs)
}

// apply proposes a command and turns a failed result into an error.
func (r *metaSyncRound) apply(ctx context.Context, c fsm.Command) error {
	_, err := applyChecked(ctx, r.ms.ctl, c)
	return err
}

// syncClusterID compares the source's cluster ID with the mirror's, records
// it when the mirror has none yet, and sets or clears the mirror's fault.
func (r *metaSyncRound) syncClusterID(ctx context.Context) (int, error) {
	id, err := sourceClusterID(ctx, r.src)
	if err != nil {
		return 0, fmt.Errorf("source cluster ID: %w", err)
	}
	if id == "" {
		return 0, errors.New("the source reported no cluster ID")
	}
	m := r.mirror
	if m.SourceClusterID == "" {
		return 1, r.apply(ctx, fsm.SetSourceClusterID{Name: m.Name, ClusterID: id})
	}
	fault := ""
	if id != m.SourceClusterID {
		fault = fmt.Sprintf("the source at %s is cluster %s, but mirror %s mirrors cluster %s: fetching and metadata sync are halted; "+
			"point %s back at cluster %s, or stop the mirror's topics and create a new mirror",
			m.Config[fsm.BootstrapServersKey], id, m.Name, m.SourceClusterID, fsm.BootstrapServersKey, m.SourceClusterID)
	}
	if fault == m.SyncFault {
		return 0, nil
	}
	if err := r.apply(ctx, fsm.SetSyncFault{Mirror: m.Name, Fault: fault}); err != nil {
		return 0, err
	}
	if fault != "" {
		r.log.Error("source cluster ID changed: mirror halted", zap.String("source-cluster-id", id),
			zap.String("mirror-cluster-id", m.SourceClusterID))
	} else {
		r.log.Info("source cluster ID is the mirror's again: mirror resumed", zap.String("source-cluster-id", id))
	}
	m.SyncFault = fault
	return 1, nil
}

// syncTopicIDs loads the source topics and sets or clears the fault of
// topics whose source topic ID changed; faulty topics leave r.topics.
func (r *metaSyncRound) syncTopicIDs(ctx context.Context) (int, error) {
	topics, err := sourceTopics(ctx, r.src)
	if err != nil {
		return 0, fmt.Errorf("source topics: %w", err)
	}
	r.source = make(map[string]SourceTopic, len(topics))
	for _, t := range topics {
		r.source[t.Name] = t
	}
	items := 0
	var errs []error
	for _, name := range sortedKeys(r.topics) {
		t := r.topics[name]
		st, ok := r.source[name]
		if !ok {
			delete(r.topics, name) // gone from the source: nothing to sync
			continue
		}
		fault := ""
		if t.SourceTopicID != ([16]byte{}) && st.ID != ([16]byte{}) && st.ID != t.SourceTopicID {
			fault = fmt.Sprintf("source topic recreated (topic ID changed from %s to %s): stop the topic or start a new mirror",
				topicIDString(t.SourceTopicID), topicIDString(st.ID))
		}
		if fault != t.SyncFault {
			if err := r.apply(ctx, fsm.SetSyncFault{Mirror: r.mirror.Name, Topic: name, Fault: fault}); err != nil {
				errs = append(errs, fmt.Errorf("topic %s: %w", name, err))
			} else {
				items++
				if fault != "" {
					r.log.Error("source topic recreated: its partitions are no longer mirrored", zap.String("topic", name),
						zap.String("reason", fault))
				}
			}
		}
		if fault != "" {
			delete(r.topics, name)
		}
	}
	return items, errors.Join(errs...)
}

// topicIDString formats a topic ID as Kafka does (base64 URL, no padding).
func topicIDString(id [16]byte) string {
	return kadm.TopicID(id).String()
}

// syncPartitions adds partitions added on the source to the destination
// and records the new count, so reconcile drives the new partitions. The
// read-only ACLs are per topic, so they cover new partitions already.
func (r *metaSyncRound) syncPartitions(ctx context.Context) (int, error) {
	items := 0
	var errs []error
	for _, name := range sortedKeys(r.topics) {
		t := r.topics[name]
		want := r.source[name].Partitions
		if want <= t.Partitions {
			continue
		}
		ex, err := r.ms.dest.DescribeTopic(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ex == nil {
			errs = append(errs, fmt.Errorf("destination topic %s does not exist", name))
			continue
		}
		if ex.Partitions < want {
			resp, err := r.dstAdm.UpdatePartitions(ctx, int(want), name)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("add partitions to destination topic %s (%d -> %d): %w", name, ex.Partitions, want, err))
				continue
			}
		}
		if err := r.apply(ctx, fsm.SetTopicPartitions{Topic: name, Partitions: want}); err != nil {
			errs = append(errs, fmt.Errorf("record the partition count of %s: %w", name, err))
			continue
		}
		r.log.Info("source topic grew: partitions added", zap.String("topic", name), zap.Int32("from", t.Partitions), zap.Int32("to", want))
		t.Partitions = want
		items++
	}
	return items, errors.Join(errs...)
}
