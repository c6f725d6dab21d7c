package fetcher

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/internal/partstate"
)

// Manager mirrors partitions: it owns the source clients of the mirrors, one
// fetch session per (mirror, source broker), one driver per partition, the
// appender to the local broker and the sidecar's idempotent producer ID. See
// DESIGN.md in this directory for goroutines and lock order.
type Manager struct {
	cfg    cfg
	log    *zap.Logger
	met    *metrics
	thm    *throttleMetrics
	thr    *throttle                         // mirror.replication.throttled.rate; rate 0: no limit
	thrSel atomic.Pointer[throttleSelection] // nil: every partition is throttled
	budget *budget                           // fetched bytes held (mirror.buffer.memory.bytes)
	zst    *zstd.Encoder                     // filler batches

	// ctx lives until Close has stopped every partition; the appender, the
	// notifier's producers and the source sessions run under it.
	ctx    context.Context
	cancel context.CancelFunc

	goMu     sync.Mutex // guards goClosed and wg.Add
	goClosed bool
	wg       sync.WaitGroup

	app          *appender
	pids         *producerIDs
	localOffsets *offsetBatcher // destination ListOffsets look-ups (offsets.go)
	txnCls       []*kgo.Client  // the destination's transaction coordinators (see txnVersions, txnClients)
	txnRR        atomic.Uint32  // the next partition's transaction client
	notify       *notifier

	mu      sync.Mutex // guards the fields below; taken before mirror.mu and partition.mu
	closed  bool
	mirrors map[string]*mirror
	parts   map[Partition]*partition
}

// NewManager validates the options and starts a Manager. It sends no request
// until a partition starts.
func NewManager(opts ...Opt) (*Manager, error) {
	c := defaultCfg()
	for _, o := range opts {
		o.apply(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.bufferBytes == 0 {
		c.bufferBytes = 2 * int(c.partMax)
	}
	met, err := newMetrics(c.registerer)
	if err != nil {
		return nil, fmt.Errorf("fetcher: registering metrics: %w", err)
	}
	thm, err := newThrottleMetrics(c.registerer)
	if err != nil {
		return nil, fmt.Errorf("fetcher: registering metrics: %w", err)
	}
	bm, err := newBudgetMetrics(c.registerer)
	if err != nil {
		return nil, fmt.Errorf("fetcher: registering metrics: %w", err)
	}
	zst, err := newFillerEncoder()
	if err != nil {
		return nil, fmt.Errorf("fetcher: zstd encoder: %w", err)
	}
	txnCls := make([]*kgo.Client, txnClients)
	for i := range txnCls {
		if txnCls[i], err = newTxnClient(c.local); err != nil {
			for _, cl := range txnCls[:i] {
				cl.Close()
			}
			return nil, fmt.Errorf("fetcher: transaction client: %w", err)
		}
	}
	m := &Manager{
		txnCls:  txnCls,
		cfg:     c,
		log:     c.logger.Named("fetcher"),
		met:     met,
		thm:     thm,
		budget:  newBudget(c.bufferMemory, bm),
		zst:     zst,
		mirrors: make(map[string]*mirror),
		parts:   make(map[Partition]*partition),
	}
	thm.rate.Set(float64(c.throttleRate))
	m.thr = newThrottle(c.throttleRate, c.clock, thm.appendWait)
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.app = newAppender(m)
	m.localOffsets = newOffsetBatcher(m, m.ctx, m.sendLocalOffsets)
	m.pids = newProducerIDs(m)
	m.notify = newNotifier(c.onState, c.onNotLeader, m.log)
	m.goFunc(m.app.run)
	m.goFunc(m.notify.run)
	m.goFunc(m.watch)
	met.parts.add(m)
	return m, nil
}

// goFunc runs fn on a goroutine that Close waits for. It returns false, and
// does not run fn, once Close has begun waiting.
func (m *Manager) goFunc(fn func()) bool {
	m.goMu.Lock()
	defer m.goMu.Unlock()
	if m.goClosed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn()
	}()
	return true
}

// MirrorSettings are a mirror's own settings of the data plane.
type MirrorSettings struct {
	// TransactionTimeout is the timeout of the destination transactions
	// that replay source transactions (default 15 minutes): the
	// destination aborts one that stays open longer, and its partition
	// goes FAILED.
	TransactionTimeout time.Duration
	// SourceClusterID, when set, is the cluster ID the source must have:
	// every Metadata answer is checked, and partitions fail with
	// ErrSourceClusterChanged on another, before anything of that cluster
	// is appended.
	SourceClusterID string
	// TopicIDs, where known, are the source topic IDs the mirror's topics
	// must have: a topic deleted and recreated on the source under the
	// same name fails its partitions with ErrSourceTopicRecreated.
	TopicIDs map[string][16]byte
	// TranslateOffsets selects translate mode (mirror.offsets=translate):
	// no fillers, an offset map instead (see OffsetMaps). The Manager
	// needs the OffsetMapStore option for it.
	TranslateOffsets bool
	// KeepBatchBoundaries appends every source batch as it is. By default
	// consecutive small batches of a partition (under 16 KiB each) are
	// coalesced into one destination batch of up to 256 KiB: the same
	// records at the same offsets, other batch boundaries, recompressed
	// with the source batches' codec (see coalesce.go).
	KeepBatchBoundaries bool
	// FetchMaxBytes, FetchMinBytes, FetchMaxWait and PartitionMaxBytes are
	// the mirror's own fetch sizes (Kafka's fetch.max.bytes,
	// fetch.min.bytes, fetch.max.wait.ms and max.partition.fetch.bytes in
	// the mirror config); zero takes the Manager's (FetchMaxBytes,
	// FetchMaxWait, PartitionMaxBytes options; 1 byte). PartitionMaxBytes
	// applies from a partition's next start.
	FetchMaxBytes     int32
	FetchMinBytes     int32
	FetchMaxWait      time.Duration
	PartitionMaxBytes int32
	// ClientRack is the mirror's client.rack: the rack (availability
	// zone) of this sidecar, sent in every Fetch request of the fetch
	// sessions (Fetch v11+, KIP-392). A source leader whose
	// replica.selector.class picks another replica for it (Kafka's
	// RackAwareReplicaSelector: one in the same broker.rack) answers with
	// that preferred read replica, and the partition is fetched from there
	// until an error, or for at most PreferredReplicaMaxAge. Empty: every
	// fetch goes to the leaders.
	ClientRack string
	// PreferredReplicaMaxAge bounds how long a partition is fetched from
	// a preferred read replica before it asks its leader again (the
	// consumer's metadata.max.age.ms does the same); zero: 5 minutes.
	PreferredReplicaMaxAge time.Duration
}

// defaultPreferredReplicaMaxAge is Kafka's metadata.max.age.ms default.
const defaultPreferredReplicaMaxAge = 5 * time.Minute

// replicaMaxAge returns PreferredReplicaMaxAge or its default.
func (s *MirrorSettings) replicaMaxAge() time.Duration {
	if s != nil && s.PreferredReplicaMaxAge > 0 {
		return s.PreferredReplicaMaxAge
	}
	return defaultPreferredReplicaMaxAge
}

// fetchMax returns the mirror's fetch.max.bytes, or def.
func (s *MirrorSettings) fetchMax(def int32) int32 {
	if s != nil && s.FetchMaxBytes > 0 {
		return s.FetchMaxBytes
	}
	return def
}

// partMax returns the mirror's max.partition.fetch.bytes, or def.
func (s *MirrorSettings) partMax(def int32) int32 {
	if s != nil && s.PartitionMaxBytes > 0 {
		return s.PartitionMaxBytes
	}
	return def
}

// applyTo sets the mirror's fetch sizes on a fetch request built with the
// Manager's.
func (s *MirrorSettings) applyTo(req *kmsg.FetchRequest) {
	if s == nil {
		return
	}
	if s.FetchMaxBytes > 0 {
		req.MaxBytes = s.FetchMaxBytes
	}
	if s.FetchMinBytes > 0 {
		req.MinBytes = s.FetchMinBytes
	}
	if s.FetchMaxWait > 0 {
		req.MaxWaitMillis = int32(s.FetchMaxWait.Milliseconds())
	}
}

// check validates s and fills in defaults.
func (s *MirrorSettings) check(mirror string) error {
	if s.TransactionTimeout == 0 {
		s.TransactionTimeout = defaultTxnTimeout
	}
	if s.TransactionTimeout < time.Second {
		return fmt.Errorf("%w: mirror %q: transaction timeout %s is below 1s", ErrInvalidOption, mirror, s.TransactionTimeout)
	}
	if s.FetchMaxBytes < 0 || s.FetchMinBytes < 0 || s.FetchMaxWait < 0 || s.PartitionMaxBytes < 0 || s.PreferredReplicaMaxAge < 0 {
		return fmt.Errorf("%w: mirror %q: negative fetch size or wait", ErrInvalidOption, mirror)
	}
	return nil
}

// SetMirrorSettings replaces the settings of a mirror that SetMirror
// created, keeping its source client and fetch sessions.
func (m *Manager) SetMirrorSettings(name string, settings MirrorSettings) error {
	if err := settings.check(name); err != nil {
		return err
	}
	mir, err := m.mirror(name)
	if err != nil {
		return err
	}
	mir.settings.Store(&settings)
	return nil
}

// SetMirror creates the source client of a mirror, or replaces it: the old
// client's fetch sessions end, its partitions move to the new client (with
// the usual resume from the destination LEO) and the old client is closed.
// The client's ID is FetcherClientID unless source sets one (kgo.ClientID,
// e.g. from the mirror's client.id).
func (m *Manager) SetMirror(name string, source []kgo.Opt, settings MirrorSettings) error {
	if name == "" {
		return fmt.Errorf("%w: mirror name is empty", ErrInvalidOption)
	}
	if err := settings.check(name); err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ClientID(FetcherClientID(m.cfg.localID, name))}, source...)...)
	if err != nil {
		return fmt.Errorf("fetcher: mirror %q: source client: %w", name, err)
	}
	mir := newMirror(m, name, cl)
	mir.settings.Store(&settings)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		cl.Close()
		return ErrClosed
	}
	old := m.mirrors[name]
	m.mirrors[name] = mir
	m.mu.Unlock()
	if old != nil {
		m.log.Info("replacing mirror source client", zap.String("mirror", name))
		old.close()
	} else {
		m.log.Info("mirror source client created", zap.String("mirror", name))
	}
	return nil
}

// RemoveMirror stops every partition of the mirror (as Stop does) and closes
// its source client.
func (m *Manager) RemoveMirror(name string) {
	m.mu.Lock()
	mir := m.mirrors[name]
	delete(m.mirrors, name)
	var stop []*partition
	for k, p := range m.parts {
		if k.Mirror == name {
			stop = append(stop, p)
		}
	}
	m.mu.Unlock()
	for _, p := range stop {
		p.requestStop()
	}
	for _, p := range stop {
		m.awaitStop(context.Background(), p)
	}
	if mir != nil {
		mir.close()
		m.log.Info("mirror removed", zap.String("mirror", name))
	}
}

// Start begins mirroring p from the destination log end offset. It is
// idempotent for a running partition and restarts a FAILED one.
func (m *Manager) Start(p Partition) error {
	return m.start(p, false)
}

// Recover restarts p, FAILED, on an operator's request (--recover, or
// --start of an active topic), as Start does. The operator accepts the
// destination as it stands: where a destination transaction marker at the
// resume point ended the transaction otherwise than the source's (the
// destination aborted what the source committed), the new driver resumes
// after it instead of failing again (checkResume). A log shifted by a
// control batch the source does not have still fails.
func (m *Manager) Recover(p Partition) error {
	return m.start(p, true)
}

func (m *Manager) start(p Partition, recovering bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.mirrors[p.Mirror]; !ok {
		return fmt.Errorf("%w %q: call SetMirror before starting %s", ErrUnknownMirror, p.Mirror, p)
	}
	var counters [3]int64
	if old := m.parts[p]; old != nil {
		switch st := old.status(); st.State {
		case StateFailed:
			<-old.done // the driver closes done right after it set FAILED
			counters = [3]int64{st.RecordsMirrored, st.BytesMirrored, st.FillerRecords}
			old.retire()
		case StateStopping:
			return fmt.Errorf("%w: %s; call Start again once Stop has returned", ErrStopping, p)
		default:
			return nil
		}
	}
	m.met.startPartition(p)
	pt := newPartition(m, p, counters)
	pt.recovering = recovering
	m.parts[p] = pt
	if !m.goFunc(pt.run) {
		delete(m.parts, p)
		pt.setState(partstate.Removed, "")
		return ErrClosed
	}
	return nil
}

// Stop stops mirroring p. It returns once no append for p is in flight and
// none will be sent, or with ctx's error if ctx ends first (the partition
// then finishes stopping in the background and is removed, STOPPED, once its
// last append returned). Stopping a partition that is not running is a
// no-op; stopping a FAILED one removes it.
func (m *Manager) Stop(ctx context.Context, p Partition) error {
	m.mu.Lock()
	pt := m.parts[p]
	m.mu.Unlock()
	if pt == nil {
		return nil
	}
	return m.stopPartition(ctx, pt)
}

// StopPartitions stops mirroring ps as Stop does each, together: it asks
// every driver to stop first and then waits for them, so that stopping a
// thousand partitions takes about as long as stopping the slowest of them,
// not the sum. It returns the partitions that had not stopped when ctx
// ended, with the error; they finish stopping in the background. nil: all
// stopped.
func (m *Manager) StopPartitions(ctx context.Context, ps []Partition) map[Partition]error {
	m.mu.Lock()
	pts := make([]*partition, 0, len(ps))
	for _, p := range ps {
		if pt := m.parts[p]; pt != nil {
			pts = append(pts, pt)
		}
	}
	m.mu.Unlock()
	for _, pt := range pts {
		pt.requestStop()
	}
	var failed map[Partition]error
	for _, pt := range pts {
		if err := m.awaitStop(ctx, pt); err != nil {
			if failed == nil {
				failed = make(map[Partition]error)
			}
			failed[pt.key] = err
		}
	}
	return failed
}

func (m *Manager) stopPartition(ctx context.Context, pt *partition) error {
	pt.requestStop()
	return m.awaitStop(ctx, pt)
}

// awaitStop waits for a driver asked to stop to exit and removes it; when
// ctx ends first, a goroutine removes it once it exited.
func (m *Manager) awaitStop(ctx context.Context, pt *partition) error {
	select {
	case <-pt.done: // first: a driver that has exited is stopped, whatever ctx says
	default:
		select {
		case <-pt.done:
		case <-ctx.Done():
			m.goFunc(func() { // Close removes it if this cannot start
				<-pt.done
				m.remove(pt)
			})
			return fmt.Errorf("fetcher: stopping %s: %w", pt.key, ctx.Err())
		}
	}
	m.remove(pt)
	return nil
}

// remove forgets a partition whose driver has exited: STOPPED, series
// deleted.
func (m *Manager) remove(pt *partition) {
	m.mu.Lock()
	if m.parts[pt.key] == pt {
		delete(m.parts, pt.key)
	}
	m.mu.Unlock()
	pt.setState(partstate.Removed, "")
}

// notLeader is called by a driver that got NOT_LEADER_OR_FOLLOWER from the
// local broker, after it drained its appends.
func (m *Manager) notLeader(pt *partition) {
	m.log.Info("local broker is no longer the leader: partition stopped",
		zap.String("mirror", pt.key.Mirror), zap.String("topic", pt.key.Topic), zap.Int32("partition", pt.key.Partition))
	m.remove(pt)
	m.notify.notLeader(pt.key)
}

// mirror returns the current mirror called name.
func (m *Manager) mirror(name string) (*mirror, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mir := m.mirrors[name]; mir != nil {
		return mir, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownMirror, name)
}

// partitions returns the partitions the Manager drives, in no order.
func (m *Manager) partitions() []*partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.parts))
}

// Status returns a snapshot of every partition the Manager drives (running,
// stopping or FAILED), sorted by mirror, topic and partition.
func (m *Manager) Status() []PartitionStatus {
	parts := m.partitions()
	out := make([]PartitionStatus, 0, len(parts))
	for _, p := range parts {
		out = append(out, p.status())
	}
	slices.SortFunc(out, func(a, b PartitionStatus) int {
		if c := strings.Compare(a.Mirror, b.Mirror); c != 0 {
			return c
		}
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition.Partition) - int(b.Partition.Partition)
	})
	return out
}

// Close stops everything and waits for every goroutine. The order:
//
//  1. refuse new work (Start, SetMirror return ErrClosed);
//  2. stop every partition driver: each cancels its queued appends and waits
//     for those in flight (the appender still runs), then exits;
//  3. cancel the Manager context: the appender and the fetch sessions end;
//  4. close the source clients;
//  5. flush state-change notifications, wait for all goroutines.
//
// The local client belongs to the caller and stays open.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return
	}
	m.closed = true
	parts := slices.Collect(maps.Values(m.parts))
	mirrors := make([]*mirror, 0, len(m.mirrors))
	for _, mir := range m.mirrors {
		mirrors = append(mirrors, mir)
	}
	clear(m.mirrors)
	m.mu.Unlock()

	for _, p := range parts {
		p.requestStop()
	}
	for _, p := range parts {
		<-p.done
		m.remove(p)
	}
	m.cancel()
	for _, mir := range mirrors {
		mir.close()
	}
	m.met.parts.remove(m)
	m.notify.close()
	m.goMu.Lock()
	m.goClosed = true
	m.goMu.Unlock()
	m.wg.Wait()
	for _, cl := range m.txnCls {
		cl.Close()
	}
	m.zst.Close()
	m.log.Info("fetcher closed")
}

// backoff returns the wait before retry attempt n (1-based): exponential
// from the configured min to max, with ±20% jitter.
func (m *Manager) backoff(n int) time.Duration {
	return m.backoffUpTo(n, m.cfg.backoffMax)
}

// backoffUpTo is backoff with the given max (the configured max if lower).
func (m *Manager) backoffUpTo(n int, most time.Duration) time.Duration {
	most = min(most, m.cfg.backoffMax)
	d := min(m.cfg.backoffMin, most)
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	jitter := time.Duration(rand.Int64N(int64(d)/5*2+1)) - d/5
	return max(time.Millisecond, d+jitter)
}

// notifier calls OnStateChange and OnNotLeader in order from one goroutine,
// so that drivers never wait for the callbacks.
type notifier struct {
	onState     func(PartitionStatus)
	onNotLeader func(Partition)
	log         *zap.Logger

	mu     sync.Mutex
	queue  []func()
	closed bool
	wake   chan struct{}
}

func newNotifier(onState func(PartitionStatus), onNotLeader func(Partition), log *zap.Logger) *notifier {
	return &notifier{onState: onState, onNotLeader: onNotLeader, log: log, wake: make(chan struct{}, 1)}
}

func (n *notifier) push(fn func()) {
	n.mu.Lock()
	n.queue = append(n.queue, fn)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) stateChanged(st PartitionStatus) {
	if n.onState != nil {
		n.push(func() { n.onState(st) })
	}
}

func (n *notifier) notLeader(p Partition) {
	if n.onNotLeader != nil {
		n.push(func() { n.onNotLeader(p) })
	}
}

// close lets run deliver what is queued and return.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	for {
		n.mu.Lock()
		q, closed := n.queue, n.closed
		n.queue = nil
		n.mu.Unlock()
		for _, fn := range q {
			fn()
		}
		if closed && len(q) == 0 {
			return
		}
		if len(q) == 0 {
			<-n.wake
		}
	}
}
