package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// ServiceConfig wires a Service.
type ServiceConfig struct {
	BrokerID    int32          // the local broker, whose partitions this sidecar drives
	Node        *raftnode.Node // the raft node
	Peers       *raftnode.Peers
	Destination *Destination // admin work on the destination cluster
	DestClient  *kgo.Client  // the destination client (metadata, leaders)
	// NewDataPlane builds the data plane (a *fetcher.Manager) once the
	// Service has what the data plane reports to and stores offset maps
	// in: pass events to fetcher.OnStateChange and fetcher.OnNotLeader and
	// offsetMaps to fetcher.OffsetMapStore. The Service does not close it.
	NewDataPlane func(events DataPlaneEvents, offsetMaps fetcher.OffsetMaps) (DataPlane, error)
	SourceDialer SourceDialer
	Logger       *zap.Logger
	// ReconcileInterval is how often ownership is re-checked against the
	// destination's partition leaders (default 2s); controller changes
	// trigger a check at once.
	ReconcileInterval time.Duration
	// FailoverTimeout is how long a sidecar may be silent before the raft
	// leader moves leadership of its broker's mirror partitions away
	// (sidecar.failover.timeout.ms, default 15s, DESIGN D7).
	FailoverTimeout time.Duration
	// StatePartitions is the partition count of __mirror_state
	// (default 16).
	StatePartitions int32
	// RequestTimeout bounds one admin operation (default 60s).
	RequestTimeout time.Duration
	// StateStore is the __mirror_state topic; nil runs without persisted
	// partition states (unit tests).
	StateStore *statestore.Store
	// Now returns the time (tests replace it).
	Now func() time.Time
	// Authorization is the admin endpoint's access control (DESIGN D15);
	// the zero value, for PLAINTEXT, allows every request.
	Authorization Authorization
	// Registerer gets the service's metrics (sidemirror_sidecars_alive,
	// sidemirror_partition_leadership_moves_total, the metadata sync's)
	// while Run runs; nil registers none.
	Registerer prometheus.Registerer
}

// Service is the sidecar's controller role: it answers the admin endpoint
// (a protocol.Handler) and runs the parts of the controller, each owning
// its state (DESIGN.md): the reconciler, which keeps the data plane
// driving exactly the mirror partitions the local broker leads and owns
// their states; the state writer and the __mirror_state coordinator; the
// dead-sidecar failover; the metadata sync with discovery; and the admin
// operations. The Service itself holds no mutable state.
type Service struct {
	log    *zap.Logger
	dp     DataPlane
	rec    *reconciler
	writer *stateWriter
	coord  *stateCoordinator // nil without a StateStore
	admin  *admin
	fail   *failover
	sync   *metaSync
}

// NewService checks cfg, builds the parts and the data plane
// (cfg.NewDataPlane), and returns the Service; Run starts its loops.
func NewService(cfg ServiceConfig) (*Service, error) {
	switch {
	case cfg.Node == nil:
		return nil, errors.New("coordinator: service needs a raft node")
	case cfg.NewDataPlane == nil:
		return nil, errors.New("coordinator: service needs a data plane")
	case cfg.Destination == nil || cfg.DestClient == nil:
		return nil, errors.New("coordinator: service needs the destination client")
	case cfg.SourceDialer == nil:
		return nil, errors.New("coordinator: service needs a source dialer")
	}
	if cfg.Peers == nil {
		cfg.Peers = raftnode.NewPeers()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 2 * time.Second
	}
	if cfg.FailoverTimeout <= 0 {
		cfg.FailoverTimeout = 15 * time.Second
	}
	if cfg.StatePartitions <= 0 {
		cfg.StatePartitions = 16
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 60 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger.Named("coordinator")
	ctl := raftController{node: cfg.Node}
	s := &Service{log: log}
	if cfg.StateStore != nil {
		s.coord = newStateCoordinator(cfg.StateStore, cfg.DestClient, cfg.BrokerID, log.Named("state"))
	}
	s.writer = newStateWriter(&stateWriter{brokerID: cfg.BrokerID, coord: s.coord, peers: cfg.Peers, addrs: ctl,
		dest: cfg.Destination, now: cfg.Now, log: log})
	s.rec = newReconciler(&reconciler{brokerID: cfg.BrokerID, ctl: ctl, dial: cfg.SourceDialer, destCl: cfg.DestClient,
		writer: s.writer, interval: cfg.ReconcileInterval, now: cfg.Now, log: log, reg: cfg.Registerer})
	if s.coord != nil {
		s.rec.loader = s.coord
	}
	// The data plane reports to the reconciler and stores offset maps with
	// the writer; neither is called before the reconciler starts a
	// partition, which Run does.
	dp, err := cfg.NewDataPlane(s.rec, s.writer)
	if err != nil {
		return nil, err
	}
	s.dp, s.rec.dp = dp, dp
	s.admin = &admin{brokerID: cfg.BrokerID, ctl: ctl, node: cfg.Node, local: s.rec, writer: s.writer, coord: s.coord, peers: cfg.Peers,
		dest: cfg.Destination, destCl: cfg.DestClient, dial: cfg.SourceDialer, authz: cfg.Authorization, timeout: cfg.RequestTimeout, now: cfg.Now, log: log}
	s.fail = newFailover(failover{brokerID: cfg.BrokerID, ctl: ctl, peers: cfg.Peers, destCl: cfg.DestClient, local: s.rec.drives,
		timeout: cfg.FailoverTimeout, now: cfg.Now, log: log, reg: cfg.Registerer})
	s.sync = &metaSync{ctl: ctl, dial: cfg.SourceDialer, dest: cfg.Destination, destCl: cfg.DestClient, states: s.writer, starter: s.admin,
		timeout: cfg.RequestTimeout, now: cfg.Now, log: log, reg: cfg.Registerer}
	return s, nil
}

// Handle implements protocol.Handler.
func (s *Service) Handle(ctx context.Context, c *protocol.ConnInfo, req protocol.Request) protocol.Response {
	return s.admin.handle(ctx, c, req)
}

// Run runs the parts' loops until ctx ends and waits for them: the
// reconciler, the state writer's flush loop, the failover loop, the
// metadata sync and topic discovery, each on its own goroutine so that a
// slow or unreachable source never holds up the others.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.fail.run(ctx) })
	wg.Go(func() { s.sync.run(ctx) })
	wg.Go(func() { s.sync.runDiscovery(ctx) })
	if s.coord != nil {
		wg.Go(func() { s.writer.run(ctx) })
	}
	s.rec.run(ctx)
}

// PersistStates is the shutdown's "persist state" step, after Run returned
// and the data plane closed: every partition this sidecar still drives is
// released (its state recorded with the last destination log end offset
// its driver reported, for the next owner) and every queued state is
// written, within ctx and a short bound.
func (s *Service) PersistStates(ctx context.Context) {
	s.rec.releaseAll()
	s.writer.flushAll(ctx)
}
