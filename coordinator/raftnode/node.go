package raftnode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// Defaults of NodeConfig, suited to sidecars on one LAN whose hosts are
// busy: sidecars share their machine with a broker, and a leader that steps
// down because a follower answered a little late (the lease) restarts the
// dead-sidecar clocks of DESIGN D7, so stability is worth a second or two of
// election time.
const (
	DefaultHeartbeatTimeout   = 2 * time.Second
	DefaultElectionTimeout    = 2 * time.Second
	DefaultLeaderLeaseTimeout = time.Second
	DefaultCommitTimeout      = 50 * time.Millisecond
)

// Raft's snapshot defaults (raft.DefaultConfig): a snapshot every 120 s
// (plus up to as much again) once 8192 entries were appended since the
// last one.
const (
	DefaultSnapshotThreshold = 8192
	DefaultSnapshotInterval  = 120 * time.Second
)

const (
	snapshotsRetained  = 2
	logCacheSize       = 512
	tcpMaxPool         = 3
	tcpTimeout         = 10 * time.Second
	storeLockTimeout   = time.Second
	registerAttemptTTL = 10 * time.Second
)

// Peer is one member of the raft group: a sidecar, by broker ID, and its
// raft address.
type Peer struct {
	ID      int32
	Address string
}

// NodeConfig configures OpenNode.
type NodeConfig struct {
	// ID is the broker ID of this sidecar's broker; it is the raft server
	// ID (as a decimal string).
	ID int32
	// BindAddr is the raft listener; AdvertiseAddr what peers dial ("" =
	// this sidecar's address in Peers, else BindAddr), kept as written (a
	// host name is not resolved) and registered as this sidecar's raft
	// address. Unused when a StreamLayer or a Transport is set.
	BindAddr, AdvertiseAddr string
	// DataDir holds raft/raft.db (log and stable store) and raft/snapshots.
	DataDir string
	// Peers are the members of the group, this sidecar included, used to
	// bootstrap the group when DataDir holds no raft state yet; ignored
	// afterwards.
	Peers []Peer
	// AdminAddr is this sidecar's admin endpoint, registered in
	// State.Sidecars so that followers can forward commands to the leader.
	// Required when there is more than one peer.
	AdminAddr string
	// Version is this sidecar's version, registered in State.Sidecars.
	Version string
	// Logger gets the node's logs (Named "coordinator") and raft's (Named
	// "raft"); nil discards them.
	Logger *zap.Logger
	// Registerer gets the sidemirror_raft_* metrics; nil registers none.
	Registerer prometheus.Registerer
	// Forwarder sends commands from a follower to the leader. Required
	// when there is more than one peer.
	Forwarder Forwarder
	// StreamLayer carries the raft transport's connections; nil listens
	// on BindAddr and dials peers with plain TCP. This is where a transport
	// with mutual TLS and peer identities plugs in. The node owns it: raft
	// closes it on Close. Unused when Transport is set.
	StreamLayer raft.StreamLayer
	// Transport is the raft transport (tests: raft's in-memory one); nil
	// builds a network transport over StreamLayer. The node owns it.
	Transport raft.Transport
	// MaxConnections and IdleTimeout bound the plaintext raft listener
	// (used when neither StreamLayer nor Transport is set); zero values take
	// DefaultMaxConnections and DefaultIdleTimeout.
	MaxConnections int
	IdleTimeout    time.Duration
	// Probe checks that broker id answers at raft address addr before
	// AddMember adds it (with peer TLS: peertls.StreamLayer.Probe, which
	// also checks its certificate); nil connects with TCP, or checks
	// nothing when Transport is set.
	Probe func(ctx context.Context, id int32, addr string) error
	// Raft timing; zero values take the Default* constants.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout time.Duration
	// SnapshotThreshold and SnapshotInterval are raft's: every interval
	// (plus up to as much again) a snapshot is taken when at least the
	// threshold of entries were appended since the last one; zero values
	// take DefaultSnapshotThreshold and DefaultSnapshotInterval.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
}

func (c NodeConfig) withDefaults() NodeConfig {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.AdvertiseAddr == "" {
		c.AdvertiseAddr = c.BindAddr
		for _, p := range c.Peers {
			if p.ID == c.ID && p.Address != "" {
				c.AdvertiseAddr = p.Address
			}
		}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.HeartbeatTimeout, DefaultHeartbeatTimeout},
		{&c.ElectionTimeout, DefaultElectionTimeout},
		{&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout},
		{&c.CommitTimeout, DefaultCommitTimeout},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	return c
}

func (c NodeConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidNodeConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ID < 0:
		return bad("ID %d is negative; it must be the broker ID of the sidecar's broker", c.ID)
	case c.DataDir == "":
		return bad("DataDir is empty; give the directory for the raft log and snapshots")
	case c.Transport == nil && c.StreamLayer == nil && c.BindAddr == "":
		return bad("BindAddr is empty; give the raft listener's host:port")
	case len(c.Peers) == 0:
		return bad("Peers is empty; list every sidecar of the raft group, this one (ID %d) included", c.ID)
	}
	ids := map[int32]bool{}
	addrs := map[string]bool{}
	self := false
	for _, p := range c.Peers {
		switch {
		case p.ID < 0:
			return bad("Peers: ID %d is negative", p.ID)
		case p.Address == "":
			return bad("Peers: sidecar %d has no raft address", p.ID)
		case ids[p.ID]:
			return bad("Peers: ID %d is listed twice", p.ID)
		case addrs[p.Address]:
			return bad("Peers: raft address %s is listed twice", p.Address)
		}
		ids[p.ID], addrs[p.Address] = true, true
		self = self || p.ID == c.ID
	}
	if !self {
		return bad("Peers does not list this sidecar (ID %d); list every member of the group, this one included", c.ID)
	}
	if len(c.Peers) > 1 && c.Forwarder == nil {
		return bad("Forwarder is nil; a group of %d sidecars needs one to send commands to the leader", len(c.Peers))
	}
	if len(c.Peers) > 1 && c.AdminAddr == "" {
		return bad("AdminAddr is empty; followers of a group of %d sidecars forward commands to the leader's admin endpoint", len(c.Peers))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HeartbeatTimeout", c.HeartbeatTimeout}, {"ElectionTimeout", c.ElectionTimeout},
		{"LeaderLeaseTimeout", c.LeaderLeaseTimeout}, {"CommitTimeout", c.CommitTimeout},
	} {
		if d.v < 0 {
			return bad("%s %s is negative", d.name, d.v)
		}
	}
	return nil
}

// Node is this sidecar's member of the raft group: it runs raft with the
// FSM, applies commands on the leader and forwards them from followers.
type Node struct {
	cfg          NodeConfig
	log          *zap.Logger
	fsm          *fsm.FSM
	raft         *raft.Raft
	store        *raftboltdb.BoltStore
	raftAddr     string
	bootstrapped bool // this open bootstrapped the group (no earlier raft state)
	opened       time.Time
	collectors   []prometheus.Collector

	notifyCh   chan bool     // raft -> observe
	leaderCh   chan bool     // observe -> LeaderCh readers; newest value wins
	registerCh chan struct{} // asks registerLoop to register this sidecar

	closing atomic.Bool
	// caughtUpTerm is the raft term in which WaitCaughtUp last proved
	// that the FSM holds every committed command.
	caughtUpTerm atomic.Uint64
	bgCtx        context.Context // canceled when Close begins
	bgCancel     context.CancelFunc
	stopCh       chan struct{} // closed after raft is shut down
	closeOnce    sync.Once
	closeErr     error

	routinesMu sync.Mutex
	stopped    bool
	wg         sync.WaitGroup

	// applies counts raft.Apply calls in flight, so that Close can let them
	// finish before raft shuts down: raft drops the futures of entries
	// that are committed but still queued for the FSM at shutdown, and a
	// dropped future blocks its waiter forever.
	appliesMu   sync.Mutex
	applies     int
	appliesIdle chan struct{} // closed once closing and applies == 0
}

// OpenNode opens the raft store under cfg.DataDir, bootstraps the group
// with cfg.Peers when there is no raft state yet, starts raft and the
// node's goroutines, and returns. Leadership and registration follow in
// the background; Apply waits for them.
func OpenNode(cfg NodeConfig) (_ *Node, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.Named("coordinator").With(zap.Int32("broker-id", cfg.ID))
	hlog := newHCLog(cfg.Logger.Named("raft"))

	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	raftDir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return nil, fmt.Errorf("coordinator: creating the raft directory: %w", err)
	}

	trans := cfg.Transport
	if trans == nil && cfg.StreamLayer != nil {
		nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: cfg.StreamLayer, MaxPool: tcpMaxPool, Timeout: tcpTimeout, Logger: hlog.Named("transport"),
		})
		cleanup = append(cleanup, func() { _ = nt.Close() })
		trans = nt
	}
	if trans == nil {
		stream, err := listenTCP(cfg.BindAddr, cfg.AdvertiseAddr, cmp.Or(cfg.MaxConnections, DefaultMaxConnections),
			cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout), log)
		if errors.Is(err, ErrInvalidNodeConfig) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("coordinator: opening the raft transport on %s (advertised %s): %w", cfg.BindAddr, cfg.AdvertiseAddr, err)
		}
		nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: stream, MaxPool: tcpMaxPool, Timeout: tcpTimeout, Logger: hlog.Named("transport"),
		})
		cleanup = append(cleanup, func() { _ = nt.Close() })
		trans = nt
	}
	raftAddr := string(trans.LocalAddr())
	for _, p := range cfg.Peers {
		if p.ID == cfg.ID && p.Address != raftAddr {
			return nil, fmt.Errorf("%w: Peers lists this sidecar (ID %d) at %s, but its raft transport is at %s; make them equal",
				ErrInvalidNodeConfig, cfg.ID, p.Address, raftAddr)
		}
	}

	dbPath := filepath.Join(raftDir, "raft.db")
	store, err := raftboltdb.New(raftboltdb.Options{Path: dbPath, BoltOptions: &bbolt.Options{Timeout: storeLockTimeout}})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("coordinator: raft store %s is locked by another process; is a second sidecar running on this data directory?", dbPath)
		}
		return nil, fmt.Errorf("coordinator: opening raft store %s: %w", dbPath, err)
	}
	cleanup = append(cleanup, func() { _ = store.Close() })
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, snapshotsRetained, hlog.Named("snapshots"))
	if err != nil {
		return nil, fmt.Errorf("coordinator: opening the raft snapshot store in %s: %w", raftDir, err)
	}
	logs, err := raft.NewLogCache(logCacheSize, store)
	if err != nil {
		return nil, fmt.Errorf("coordinator: raft log cache: %w", err)
	}

	n := &Node{
		cfg:         cfg,
		log:         log,
		store:       store,
		raftAddr:    raftAddr,
		opened:      time.Now(),
		notifyCh:    make(chan bool),
		leaderCh:    make(chan bool, 1),
		registerCh:  make(chan struct{}, 1),
		stopCh:      make(chan struct{}),
		appliesIdle: make(chan struct{}),
	}
	machine := newRaftFSM(log.Named("fsm"))
	n.fsm = machine.fsm
	n.bgCtx, n.bgCancel = context.WithCancel(context.Background())
	cleanup = append(cleanup, n.bgCancel)

	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(strconv.Itoa(int(cfg.ID)))
	conf.HeartbeatTimeout = cfg.HeartbeatTimeout
	conf.ElectionTimeout = cfg.ElectionTimeout
	conf.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	conf.CommitTimeout = cfg.CommitTimeout
	conf.SnapshotThreshold = cmp.Or(cfg.SnapshotThreshold, DefaultSnapshotThreshold)
	conf.SnapshotInterval = cmp.Or(cfg.SnapshotInterval, DefaultSnapshotInterval)
	conf.Logger = hlog
	conf.NotifyCh = n.notifyCh
	if err := raft.ValidateConfig(conf); err != nil {
		return nil, fmt.Errorf("%w: raft timing: %w", ErrInvalidNodeConfig, err)
	}

	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return nil, fmt.Errorf("coordinator: reading raft state in %s: %w", raftDir, err)
	}
	if !existing {
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{
				Suffrage: raft.Voter,
				ID:       raft.ServerID(strconv.Itoa(int(p.ID))),
				Address:  raft.ServerAddress(p.Address),
			})
		}
		if err := raft.BootstrapCluster(conf, logs, store, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			return nil, fmt.Errorf("coordinator: bootstrapping the raft group: %w", err)
		}
		n.bootstrapped = true
		log.Info("bootstrapped the raft group", zap.Int("peers", len(servers)))
	}

	r, err := raft.NewRaft(conf, machine, logs, store, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("coordinator: starting raft: %w", err)
	}
	n.raft = r
	cleanup = append(cleanup, func() { _ = r.Shutdown().Error() })

	if err := n.registerMetrics(); err != nil {
		return nil, err
	}
	n.goFunc("raft-observer", n.observe)
	n.goFunc("self-register", n.registerLoop)
	n.requestRegister()
	log.Info("raft node started", zap.String("raft-addr", raftAddr), zap.Bool("existing-state", existing))
	return n, nil
}

// goFunc runs fn in a tracked goroutine unless the node is stopping. It is
// the package's only go statement.
func (n *Node) goFunc(name string, fn func()) {
	n.routinesMu.Lock()
	defer n.routinesMu.Unlock()
	if n.stopped {
		n.log.Debug("not starting goroutine after close", zap.String("goroutine", name))
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
}

func (n *Node) registerMetrics() error {
	if n.cfg.Registerer == nil {
		return nil
	}
	n.collectors = []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sidemirror_raft_leader",
			Help: "1 if this sidecar is the leader of the raft group, else 0.",
		}, func() float64 {
			if n.raft.State() == raft.Leader {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sidemirror_raft_commit_index",
			Help: "The raft log index this sidecar knows to be committed.",
		}, func() float64 { return float64(n.raft.CommitIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sidemirror_raft_applied_index",
			Help: "The raft log index this sidecar's state machine has applied.",
		}, func() float64 { return float64(n.raft.AppliedIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sidemirror_raft_last_contact_seconds",
			Help: "Seconds since this follower last heard from the leader (since start if never); 0 on the leader.",
		}, func() float64 {
			if n.raft.State() == raft.Leader {
				return 0
			}
			last := n.raft.LastContact()
			if last.IsZero() {
				last = n.opened
			}
			return time.Since(last).Seconds()
		}),
	}
	for i, c := range n.collectors {
		if err := n.cfg.Registerer.Register(c); err != nil {
			for _, done := range n.collectors[:i] {
				n.cfg.Registerer.Unregister(done)
			}
			n.collectors = nil
			return fmt.Errorf("coordinator: registering raft metrics: %w", err)
		}
	}
	return nil
}

// observe follows raft's leadership notifications: it passes them on to
// LeaderCh and has a new leader register itself, so that followers learn
// its admin address.
func (n *Node) observe() {
	for {
		select {
		case <-n.stopCh:
			return
		case leader := <-n.notifyCh:
			if leader {
				n.log.Info("this sidecar is now the raft leader")
				n.requestRegister()
			} else {
				n.log.Info("this sidecar lost raft leadership")
			}
			select {
			case n.leaderCh <- leader:
			default:
				// Only observe sends: drop the unread value, keep the newest.
				select {
				case <-n.leaderCh:
				default:
				}
				n.leaderCh <- leader
			}
		}
	}
}

func (n *Node) requestRegister() {
	select {
	case n.registerCh <- struct{}{}:
	default: // a registration is already pending
	}
}

// registerLoop registers this sidecar (RegisterSidecar) when asked: at
// start and whenever it becomes the leader. Each registration is retried
// with backoff until it succeeds or the node closes.
func (n *Node) registerLoop() {
	cmd, err := fsm.EncodeCommand(fsm.RegisterSidecar{ID: n.cfg.ID, RaftAddr: n.raftAddr, AdminAddr: n.cfg.AdminAddr, Version: n.cfg.Version})
	if err != nil {
		n.log.Error("BUG: cannot encode RegisterSidecar", zap.Error(err))
		return
	}
	for {
		select {
		case <-n.stopCh:
			return
		case <-n.bgCtx.Done():
			return
		case <-n.registerCh:
		}
		backoff := 100 * time.Millisecond
		for attempt := 1; ; attempt++ {
			ctx, cancel := context.WithTimeout(n.bgCtx, registerAttemptTTL)
			res, err := n.Apply(ctx, cmd)
			cancel()
			if err == nil {
				err = ResultErr(res)
			}
			if err == nil {
				n.log.Debug("registered this sidecar in the raft state", zap.String("admin-addr", n.cfg.AdminAddr))
				break
			}
			if n.bgCtx.Err() != nil {
				return
			}
			lvl := zap.DebugLevel
			if attempt >= 5 {
				lvl = zap.WarnLevel
			}
			n.log.Log(lvl, "registering this sidecar in the raft state failed; retrying",
				zap.Int("attempt", attempt), zap.Duration("backoff", backoff), zap.Error(err))
			if !sleepCtx(n.bgCtx, backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// sleepCtx waits for d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sleepUntil waits until ch is closed or d passes; it reports whether ch
// was closed.
func sleepUntil(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// FSM returns the node's state machine, for reading the state.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// IsLeader reports whether this node is the raft leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the broker ID of the current leader (-1 if none is known)
// and its admin address from State.Sidecars ("" if not registered yet).
func (n *Node) Leader() (id int32, adminAddr string) {
	_, sid := n.raft.LeaderWithID()
	if sid == "" {
		return -1, ""
	}
	v, err := strconv.ParseInt(string(sid), 10, 32)
	if err != nil {
		return -1, ""
	}
	id = int32(v)
	n.fsm.Read(func(s *fsm.State) {
		if sc := s.Sidecars[id]; sc != nil {
			adminAddr = sc.AdminAddr
		}
	})
	return id, adminAddr
}

// LeaderCh delivers true when this node becomes the leader and false when
// it loses leadership. Only the newest value is kept for a slow reader. It
// is closed by Close.
func (n *Node) LeaderCh() <-chan bool { return n.leaderCh }

// Close leaves the group gracefully: it refuses new commands, hands
// leadership to another member if this node leads (best effort, bounded by
// raft's ElectionTimeout), shuts raft down (closing the transport), stops
// the node's goroutines, and closes the store. It returns the first error
// and is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	// Shutdown order:
	// 1. Refuse new commands and end the retries of registerLoop and of
	//    Apply calls in flight.
	n.appliesMu.Lock()
	n.closing.Store(true)
	if n.applies == 0 {
		close(n.appliesIdle)
	}
	n.appliesMu.Unlock()
	n.bgCancel()
	// 2. As the leader, hand over so the others need not wait for an
	//    election timeout. Pending applies fail with leadership lost.
	if n.raft.State() == raft.Leader && n.voters() > 1 {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer failed; the others will elect a leader after the election timeout", zap.Error(err))
		} else {
			n.log.Info("transferred raft leadership")
		}
	}
	// 3. Let raft answer the applies in flight (see Node.applies). raft
	//    bounds them: committed entries reach the FSM at once, the others
	//    fail when the leader steps down (at the latest after
	//    LeaderLeaseTimeout without a quorum).
	bound := max(5*time.Second, 5*(n.cfg.ElectionTimeout+n.cfg.LeaderLeaseTimeout))
	if !sleepUntil(n.appliesIdle, bound) {
		n.log.Error("raft applies still pending at shutdown; their callers may hang", zap.Duration("waited", bound))
	}
	// 4. Stop raft; this fails pending futures and closes the transport.
	var errs []error
	if err := n.raft.Shutdown().Error(); err != nil {
		errs = append(errs, fmt.Errorf("coordinator: shutting raft down: %w", err))
	}
	// 5. Stop and wait for the node's goroutines.
	n.routinesMu.Lock()
	n.stopped = true
	n.routinesMu.Unlock()
	close(n.stopCh)
	n.wg.Wait()
	// 6. Release what is left: metrics, the store, LeaderCh.
	for _, c := range n.collectors {
		n.cfg.Registerer.Unregister(c)
	}
	if err := n.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("coordinator: closing the raft store: %w", err))
	}
	close(n.leaderCh)
	n.log.Info("raft node closed")
	return errors.Join(errs...)
}

func (n *Node) voters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	v := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			v++
		}
	}
	return v
}
