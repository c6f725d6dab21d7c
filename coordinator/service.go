package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// DataPlane is what the coordinator needs of the data plane
// (*fetcher.Manager): per-mirror source clients and per-partition mirroring.
type DataPlane interface {
	SetMirror(name string, source []kgo.Opt, settings fetcher.MirrorSettings) error
	SetMirrorSettings(name string, settings fetcher.MirrorSettings) error
	RemoveMirror(name string)
	Start(p fetcher.Partition) error
	Stop(ctx context.Context, p fetcher.Partition) error
	Status() []fetcher.PartitionStatus
}

// ServiceConfig wires a Service.
type ServiceConfig struct {
	BrokerID     int32           // the local broker, whose partitions this sidecar drives
	Node         *raftnode.Node  // the raft node
	Peers        *raftnode.Peers // connections to other sidecars
	Destination  *Destination    // admin work on the destination cluster
	DestClient   *kgo.Client     // the destination client (metadata, leaders)
	DataPlane    DataPlane
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
	// Registerer gets the service's metrics (sidemirror_sidecars_alive,
	// sidemirror_partition_leadership_moves_total) while Run runs; nil
	// registers none.
	Registerer prometheus.Registerer
}

// Service is the sidecar's controller role: it answers the admin endpoint
// (a protocol.Handler) and keeps the data plane driving exactly the mirror
// partitions whose destination leader is the local broker.
type Service struct {
	cfg ServiceConfig
	log *zap.Logger

	kick chan struct{} // asks the reconcile loop to run now

	states   *stateCoordinator // nil without a StateStore
	flushNow chan struct{}     // asks the state writer to flush now
	wg       sync.WaitGroup    // goroutines started by Run

	mu         sync.Mutex
	running    map[fetcher.Partition]*owned      // partitions started on the data plane, with their states
	sources    map[string]string                 // mirror -> fingerprint of its source config
	settings   map[string]string                 // mirror -> its data plane settings as last set
	epochs     map[fetcher.Partition]int32       // destination leader epochs seen by reconcile
	pending    map[fetcher.Partition]stateUpdate // states not yet persisted
	retries    map[fetcher.Partition]*retryState // automatic retries of FAILED partitions
	restartGen map[string]int64                  // RestartGen of each topic seen by reconcile
}

// NewService checks cfg and returns a Service; Run starts its loop.
func NewService(cfg ServiceConfig) (*Service, error) {
	switch {
	case cfg.Node == nil:
		return nil, errors.New("coordinator: service needs a raft node")
	case cfg.DataPlane == nil:
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
	s := &Service{
		cfg:      cfg,
		log:      cfg.Logger.Named("coordinator"),
		kick:     make(chan struct{}, 1),
		flushNow: make(chan struct{}, 1),
		running:  map[fetcher.Partition]*owned{},
		sources:  map[string]string{},
		settings: map[string]string{},
		epochs:   map[fetcher.Partition]int32{},
		pending:  map[fetcher.Partition]stateUpdate{},
		retries:  map[fetcher.Partition]*retryState{},

		restartGen: map[string]int64{},
	}
	if cfg.StateStore != nil {
		s.states = newStateCoordinator(cfg.StateStore, cfg.DestClient, cfg.BrokerID, s.log.Named("state"))
	}
	return s, nil
}

// NotLeader is the data plane's OnNotLeader callback: the local broker no
// longer leads p, whose driver the data plane removed, so the partition is
// released (its state recorded for the next owner) and ownership
// re-checked.
func (s *Service) NotLeader(p fetcher.Partition) {
	s.released(p)
	s.Kick()
}

// Kick asks the reconcile loop to run soon.
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Handle implements protocol.Handler.
func (s *Service) Handle(ctx context.Context, c *protocol.ConnInfo, req protocol.Request) protocol.Response {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, internal := req.(*protocol.ApplyCommandRequest); !internal {
		wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
		err := s.cfg.Node.WaitCaughtUp(wctx)
		wcancel()
		if err != nil {
			resp := req.ResponseKind()
			setError(resp, kerr.CoordinatorNotAvailable.Code, err.Error())
			return resp
		}
	}
	switch r := req.(type) {
	case *protocol.ApplyCommandRequest:
		return s.applyCommand(ctx, r)
	case *protocol.CreateClusterMirrorRequest:
		return s.createMirror(ctx, r)
	case *protocol.ListClusterMirrorsRequest:
		return s.listMirrors(r)
	case *protocol.DescribeClusterMirrorsRequest:
		return s.describeMirrors(ctx, r)
	case *protocol.DescribeLocalPartitionsRequest:
		return s.describeLocal(r)
	case *protocol.StartMirrorTopicsRequest:
		return s.startTopics(ctx, r)
	case *protocol.StopMirrorTopicsRequest:
		return s.stopTopics(ctx, r)
	case *protocol.PauseMirrorTopicsRequest:
		return s.pauseTopics(ctx, r)
	case *protocol.ResumeMirrorTopicsRequest:
		return s.resumeTopics(ctx, r)
	case *protocol.DeleteClusterMirrorRequest:
		return s.deleteMirror(ctx, r)
	case *protocol.IncrementalAlterConfigsRequest:
		return s.incrementalAlterConfigs(ctx, r)
	case *protocol.DescribeConfigsRequest:
		return s.describeConfigs(r)
	case *protocol.AddSidecarRequest:
		return s.addSidecar(ctx, r)
	case *protocol.RemoveSidecarRequest:
		return s.removeSidecar(ctx, r)
	case *protocol.DescribeSidecarsRequest:
		return s.describeSidecars(r)
	case *protocol.ReadMirrorStatesRequest:
		if s.states == nil {
			break
		}
		return s.states.read(r)
	case *protocol.WriteMirrorStatesRequest:
		if s.states == nil {
			break
		}
		return s.states.write(ctx, r, s.cfg.Now().UnixMilli())
	}
	resp := req.ResponseKind()
	setError(resp, kerr.UnsupportedVersion.Code, fmt.Sprintf("%s is not supported by this sidecar yet", protocol.KeyName(req.Key())))
	return resp
}

// applyCommand applies a command forwarded by a follower sidecar.
func (s *Service) applyCommand(ctx context.Context, r *protocol.ApplyCommandRequest) protocol.Response {
	resp := &protocol.ApplyCommandResponse{}
	res, err := s.cfg.Node.ApplyLocal(ctx, r.Command)
	if err != nil {
		code := kerr.UnknownServerError.Code
		if errors.Is(err, raftnode.ErrNotLeader) {
			code = kerr.NotController.Code
		}
		resp.ErrorCode, resp.ErrorMessage = code, strPtr(err.Error())
		return resp
	}
	b, err := json.Marshal(res)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strPtr(err.Error())
		return resp
	}
	resp.Result = b
	return resp
}

// apply submits a command through raft (forwarded when not leader).
func (s *Service) apply(ctx context.Context, c fsm.Command) (fsm.Result, error) {
	b, err := fsm.EncodeCommand(c)
	if err != nil {
		return fsm.Result{}, err
	}
	return s.cfg.Node.Apply(ctx, b)
}

// state returns a copy of the controller state.
func (s *Service) state() *fsm.State {
	var st *fsm.State
	s.cfg.Node.FSM().Read(func(cur *fsm.State) { st = cur.Clone() })
	return st
}

// sourceClient connects to a mirror's source cluster.
func (s *Service) sourceClient(config map[string]string) (*kgo.Client, error) {
	opts, err := s.cfg.SourceDialer(config)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ClientID("sidemirror-admin"), kgo.RequestRetries(2), kgo.RetryTimeout(10*time.Second),
		kgo.DialTimeout(5*time.Second))
	return kgo.NewClient(opts...)
}

// setError sets the top-level error of a response.
func setError(resp protocol.Response, code int16, msg string) {
	m := strPtr(msg)
	switch r := resp.(type) {
	case *protocol.CreateClusterMirrorResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.DeleteClusterMirrorResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.ListClusterMirrorsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.DescribeClusterMirrorsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.StartMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.StopMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.PauseMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.ResumeMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.ReadMirrorStatesResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.WriteMirrorStatesResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.ApplyCommandResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.DescribeLocalPartitionsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	}
}

func strPtr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
