package sidecar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// components are the parts of a running sidecar besides its HTTP server:
// the destination client, the raft node, the data plane, the controller
// service and the admin endpoint.
type components struct {
	log       *zap.Logger
	dest      *kgo.Client
	peers     *raftnode.Peers
	peerLayer *peerLayer // peer.security.protocol=SSL only
	node      *raftnode.Node
	fetcher   *fetcher.Manager
	states    *statestore.Store
	service   *coordinator.Service
	admin     *protocol.Server
	adminLn   net.Listener
	stopLoop  context.CancelFunc
	loopDone  chan struct{}
}

// startComponents builds and starts everything in dependency order. A
// failure closes what was started.
func (s *Sidecar) startComponents(failed chan<- error) (_ *components, err error) {
	c := &components{log: s.log, loopDone: make(chan struct{})}
	defer func() {
		if err != nil {
			c.stop(context.Background())
		}
	}()
	// The admin listener is bound first: its port is part of the admin
	// address registered in raft when admin.advertised.listener is unset.
	if c.adminLn, err = listen(KeyAdminListener, s.cfg.AdminListener); err != nil {
		return nil, err
	}
	// What the other sidecars dial: forwarded writes, the describe
	// fan-out and the liveness probes use the admin address, raft the raft
	// address (Config.Validate refused addresses they cannot reach). A
	// routable admin address that reaches another process is refused here
	// (selfcheck.go), before anything registers it.
	adminAddr := s.cfg.AdminAdvertisedAddr(c.adminLn.Addr().String())
	checked, err := checkAdvertisedAdmin(s.cfg, c.adminLn, adminAddr, advertisedCheckTimeout, s.log)
	if err != nil {
		return nil, err
	}
	c.adminLn = checked
	destOpts, err := s.cfg.Destination.KgoOpts()
	if err != nil {
		return nil, err
	}
	id := strconv.Itoa(int(s.cfg.LocalBrokerID))
	destOpts = append(destOpts, kgo.ClientID("sidemirror-"+id), kgo.RetryTimeout(30*time.Second))
	if c.dest, err = kgo.NewClient(destOpts...); err != nil {
		return nil, fmt.Errorf("sidecar: destination client: %w", err)
	}
	s.log.Info("advertised addresses",
		zap.String(KeyAdminAdvertised, adminAddr), zap.String(KeyRaftAdvertised, s.cfg.RaftAdvertisedAddr()))
	var peers []raftnode.Peer
	for _, p := range s.cfg.RaftMembers() {
		peers = append(peers, raftnode.Peer{ID: p.ID, Address: p.Address})
	}
	nodeCfg := raftnode.NodeConfig{
		ID:             s.cfg.LocalBrokerID,
		BindAddr:       s.cfg.RaftListener,
		AdvertiseAddr:  s.cfg.RaftAdvertisedAddr(),
		DataDir:        s.cfg.DataDir,
		Peers:          peers,
		AdminAddr:      adminAddr,
		Version:        Version,
		Logger:         s.log,
		Registerer:     s.reg,
		MaxConnections: s.cfg.Limits.RaftMaxConnections,
		IdleTimeout:    s.cfg.Limits.IdleTimeout,

		SnapshotThreshold: s.cfg.RaftSnapshotThreshold,
		SnapshotInterval:  s.cfg.RaftSnapshotInterval,
	}
	// With peer.security.protocol=SSL, raft.listener speaks mutual TLS and
	// carries the internal APIs too (peer.go, DESIGN D15).
	var node atomic.Pointer[raftnode.Node]
	if s.cfg.Peer.SSL() {
		if c.peerLayer, err = s.newPeerLayer(node.Load); err != nil {
			return nil, err
		}
		nodeCfg.StreamLayer = c.peerLayer.stream
		nodeCfg.Probe = c.peerLayer.stream.Probe
		c.peers = raftnode.NewPeers(protocol.DialFunc(c.peerLayer.dialPeerAPI))
	} else {
		c.peers = raftnode.NewPeers()
	}
	nodeCfg.Forwarder = c.peers
	c.node, err = raftnode.OpenNode(nodeCfg)
	if err != nil {
		if c.peerLayer != nil {
			_ = c.peerLayer.stream.Close()
		}
		return nil, err
	}
	node.Store(c.node)
	if c.states, err = statestore.New(c.dest, statestore.NumPartitions(s.cfg.StatePartitions), statestore.Logger(s.log)); err != nil {
		return nil, err
	}
	// The coordinator builds the data plane once it has what the data
	// plane reports to and stores offset maps in.
	newDataPlane := func(events coordinator.DataPlaneEvents, offsetMaps fetcher.OffsetMaps) (coordinator.DataPlane, error) {
		m, err := fetcher.NewManager(
			fetcher.LocalClient(c.dest),
			fetcher.LocalBrokerID(s.cfg.LocalBrokerID),
			fetcher.Logger(s.log),
			fetcher.Registerer(s.reg),
			fetcher.OnNotLeader(events.NotLeader),
			fetcher.OnStateChange(events.StateChanged),
			fetcher.OffsetMapStore(offsetMaps),
			fetcher.ReplicationThrottledRate(s.cfg.ThrottledRate),
			fetcher.BufferMemory(s.cfg.BufferMemory),
		)
		if err != nil {
			return nil, err
		}
		c.fetcher = m
		return m, nil
	}
	// With readonly.allow.everyone.if.no.acl.found=auto, brokers that
	// hide the value are probed as a temporary SCRAM user (DESIGN D4).
	dest := coordinator.NewDestination(c.dest, s.cfg.AllowEveryone).
		WithAuthorizerProbe(probeDialer(s.cfg.Destination), s.cfg.LocalBrokerID, s.log)
	svc, err := coordinator.NewService(coordinator.ServiceConfig{
		BrokerID:     s.cfg.LocalBrokerID,
		Node:         c.node,
		Peers:        c.peers,
		Destination:  dest,
		DestClient:   c.dest,
		NewDataPlane: newDataPlane,
		SourceDialer: SourceKgoOpts,
		Logger:       s.log,

		StateStore:      c.states,
		Authorization:   s.cfg.Admin.Authorization(),
		FailoverTimeout: s.cfg.FailoverTimeout,
		StatePartitions: s.cfg.StatePartitions,
		Registerer:      s.reg,
	})
	if err != nil {
		return nil, err
	}
	c.service = svc
	loopCtx, stopLoop := context.WithCancel(context.Background())
	c.stopLoop = stopLoop
	s.routines.Go("reconcile", func() {
		defer close(c.loopDone)
		svc.Run(loopCtx)
	})
	registryRecord := statestore.Sidecar{BrokerID: s.cfg.LocalBrokerID, AdminAddress: adminAddr, AdminProtocol: s.cfg.Admin.Protocol}
	s.routines.Go("sidecar-registry", func() { registerSidecar(loopCtx, c.states, registryRecord, s.log) })
	var handler protocol.Handler = svc
	if c.peerLayer != nil {
		handler = raftnode.PeerGuard(svc, s.log.Named("admin"))
	}
	secOpts, ln, err := adminServerOpts(s.cfg, c.adminLn)
	if err != nil {
		return nil, err
	}
	if w := peerSecurityWarning(s.cfg); w != "" {
		s.log.Warn(w)
	}
	c.admin = protocol.NewServer(handler, append(secOpts, protocol.Logger(s.log.Named("admin")),
		protocol.MaxConnections(s.cfg.Limits.AdminMaxConnections),
		protocol.MaxQueuedBytes(s.cfg.Limits.AdminQueuedBytes),
		protocol.ReadTimeout(s.cfg.Limits.IdleTimeout),
		protocol.PeerAPIsOnly(c.peerLayer != nil))...)
	s.routines.Go("admin-server", func() {
		if err := c.admin.Serve(ln); err != nil && !errors.Is(err, protocol.ErrServerClosed) {
			failed <- fmt.Errorf("sidecar: %s %s: %w", KeyAdminListener, ln.Addr(), err)
		}
	})
	if c.peerLayer != nil {
		peerLn := c.peerLayer.stream.PeerAPI()
		s.routines.Go("peer-api-server", func() {
			if err := c.admin.Serve(peerLn); err != nil && !errors.Is(err, protocol.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				failed <- fmt.Errorf("sidecar: %s %s (internal APIs): %w", KeyRaftListener, peerLn.Addr(), err)
			}
		})
	}
	return c, nil
}

// stop shuts the components down in the order of Sidecar.shutdown, steps
// 1 to 6, within ctx.
func (c *components) stop(ctx context.Context) error {
	var errs []error
	// 1. Stop intake: the admin endpoint, then the reconcile loop.
	if c.admin != nil {
		if err := c.admin.Close(); err != nil {
			errs = append(errs, fmt.Errorf("admin endpoint: %w", err))
		}
	} else if c.adminLn != nil {
		c.adminLn.Close()
	}
	if c.stopLoop != nil {
		c.stopLoop()
		select {
		case <-c.loopDone:
		case <-ctx.Done():
		}
	}
	// 2. Finish in-flight appends and stop the fetchers.
	if c.fetcher != nil {
		c.fetcher.Close()
	}
	// 3. Persist partition state: the drivers' last states and offsets go
	//    to __mirror_state, for the partitions' next owners.
	if c.service != nil {
		c.service.PersistStates(ctx)
	}
	// 4-5. Step down from raft leadership and close raft.
	if c.node != nil {
		if err := c.node.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft: %w", err))
		}
	}
	// 6. Close the Kafka clients and peer connections.
	if c.states != nil {
		c.states.Close()
	}
	if c.peers != nil {
		c.peers.Close()
	}
	if c.dest != nil {
		c.dest.Close()
	}
	return errors.Join(errs...)
}

// probeDialer is how the destination authorizer probe logs in
// (coordinator.ProbeDialer): with the destination's security protocol and
// TLS settings, as the probe's temporary SCRAM user. Without SASL on the
// destination connection no such user can log in, and the probe fails
// with that reason.
func probeDialer(dest security.ClientConfig) coordinator.ProbeDialer {
	return func(mechanism, user, password string) ([]kgo.Opt, error) {
		if !dest.UsesSASL() {
			return nil, fmt.Errorf("%ssecurity.protocol is %s: a temporary SCRAM user can log in only over SASL_PLAINTEXT or SASL_SSL",
				dest.Prefix, dest.Protocol())
		}
		a := scram.Auth{User: user, Pass: password}
		m := a.AsSha512Mechanism()
		if mechanism == security.MechanismSCRAMSHA256 {
			m = a.AsSha256Mechanism()
		}
		opts := []kgo.Opt{kgo.SASL(m)}
		if dest.UsesTLS() {
			cfg, err := dest.TLSConfig()
			if err != nil {
				return nil, err
			}
			opts = append(opts, kgo.DialTLSConfig(cfg))
		}
		return opts, nil
	}
}

// SourceKgoOpts turns a mirror's source settings (bootstrap.servers, Kafka's
// client security properties and the consumer properties of
// sourceprops.go) into franz-go options; it refuses
// unknown keys with the key named. ${env:NAME} and ${file:path:key}
// references are resolved here, on every connect, so the raft state keeps
// the reference and a rotated secret file takes effect at the next
// connection; a reference that does not resolve fails naming the key.
func SourceKgoOpts(config map[string]string) ([]kgo.Opt, error) {
	known := make([]string, 0, len(security.ClientKeys)+len(sourceClientKeys)+1)
	known = append(known, "bootstrap.servers")
	known = append(known, security.ClientKeys...)
	known = append(known, sourceClientKeys...)
	props := make(map[string]string, len(config))
	r := properties.NewResolver()
	for _, k := range slices.Sorted(maps.Keys(config)) {
		if !slices.Contains(known, k) {
			return nil, unknownKeyError(k, known, "")
		}
		v, err := r.Resolve(k, config[k])
		if err != nil {
			return nil, referenceError(err)
		}
		props[k] = v
	}
	bootstrap := props["bootstrap.servers"]
	delete(props, "bootstrap.servers")
	clientProps := map[string]string{}
	for _, k := range sourceClientKeys {
		if v, ok := props[k]; ok {
			clientProps[k] = v
			delete(props, k)
		}
	}
	cc, err := security.ParseClientConfig(props, "")
	if err != nil {
		return nil, err
	}
	cc.BootstrapServers = splitList(bootstrap)
	for _, b := range cc.BootstrapServers {
		if problem := checkHostPort(b, false, false); problem != "" {
			return nil, configErr("bootstrap.servers", "%q %s", b, problem)
		}
	}
	opts, err := cc.KgoOpts()
	if err != nil {
		return nil, err
	}
	more, err := sourceClientOpts(clientProps, cc)
	if err != nil {
		return nil, err
	}
	return append(opts, more...), nil
}
