package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

// fakeDataPlane records the source clients the Service configures.
type fakeDataPlane struct {
	mu         sync.Mutex
	setMirrors map[string]int // mirror -> SetMirror calls
	throttle   *fetcher.ReplicationThrottle
}

func (d *fakeDataPlane) SetReplicationThrottle(rt fetcher.ReplicationThrottle) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.throttle = &rt
}

// lastThrottle returns the throttle last set, if any.
func (d *fakeDataPlane) lastThrottle() (fetcher.ReplicationThrottle, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.throttle == nil {
		return fetcher.ReplicationThrottle{}, false
	}
	return *d.throttle, true
}

func (d *fakeDataPlane) SetMirrorSettings(string, fetcher.MirrorSettings) error { return nil }

func (d *fakeDataPlane) SetMirror(name string, _ []kgo.Opt, _ fetcher.MirrorSettings) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.setMirrors == nil {
		d.setMirrors = map[string]int{}
	}
	d.setMirrors[name]++
	return nil
}

func (d *fakeDataPlane) setMirrorCalls(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.setMirrors[name]
}

func (*fakeDataPlane) RemoveMirror(string)             {}
func (*fakeDataPlane) Start(fetcher.Partition) error   { return nil }
func (*fakeDataPlane) Recover(fetcher.Partition) error { return nil }
func (*fakeDataPlane) StopPartitions(context.Context, []fetcher.Partition) map[fetcher.Partition]error {
	return nil
}
func (*fakeDataPlane) Status() []fetcher.PartitionStatus { return nil }

// testSourceKeys are the source client keys testSourceDialer knows.
var testSourceKeys = []string{fsm.BootstrapServersKey, "security.protocol", "sasl.mechanism", "sasl.jaas.config", "client.id"}

// testSourceDialer stands in for the sidecar's SourceKgoOpts: it refuses
// unknown keys, naming them, and dials bootstrap.servers.
func testSourceDialer(cfg map[string]string) ([]kgo.Opt, error) {
	for _, k := range sortedKeys(cfg) {
		known := false
		for _, kk := range testSourceKeys {
			known = known || k == kk
		}
		if !known {
			return nil, fmt.Errorf("config: unknown key %q", k)
		}
	}
	if p := cfg["security.protocol"]; p != "" && p != "PLAINTEXT" {
		return nil, fmt.Errorf("config: security.protocol: %q is not supported", p)
	}
	return []kgo.Opt{kgo.SeedBrokers(SplitPatterns(cfg[fsm.BootstrapServersKey])...)}, nil
}

// sidecarCluster runs sidecars in-process: raft on the in-memory transport
// of a raftnodetest.Cluster, a Service per node, and each Service's admin endpoint
// on a loopback port, with Peers forwarding between them as in production.
type sidecarCluster struct {
	*raftnodetest.Cluster
	t      *testing.T
	dest   []string // the destination's seed brokers
	mu     sync.Mutex
	admin  map[int32]string // admin endpoint by ID
	svcs   map[int32]*Service
	planes map[int32]*fakeDataPlane
	// authz and serverOpts secure the admin endpoints
	// (newSecureSidecarCluster).
	authz      Authorization
	serverOpts []protocol.ServerOpt
	dial       SourceDialer // nil: testSourceDialer
}

func newSidecarCluster(t *testing.T, ids ...int32) *sidecarCluster {
	t.Helper()
	return newSidecarClusterOn(t, []string{"127.0.0.1:1"}, ids...)
}

// newSidecarClusterOn is newSidecarCluster with a destination cluster at
// dest (a kfake cluster, say).
func newSidecarClusterOn(t *testing.T, dest []string, ids ...int32) *sidecarCluster {
	t.Helper()
	return newSecureSidecarClusterOn(t, dest, Authorization{}, nil, ids...)
}

// newSecureSidecarCluster is newSidecarCluster with the admin endpoints'
// authorization and server options (SASL).
func newSecureSidecarCluster(t *testing.T, authz Authorization, opts []protocol.ServerOpt, ids ...int32) *sidecarCluster {
	t.Helper()
	return newSecureSidecarClusterOn(t, []string{"127.0.0.1:1"}, authz, opts, ids...)
}

func newSecureSidecarClusterOn(t *testing.T, dest []string, authz Authorization, opts []protocol.ServerOpt, ids ...int32) *sidecarCluster {
	t.Helper()
	c := &sidecarCluster{Cluster: raftnodetest.New(t, ids...), t: t, dest: dest,
		admin: map[int32]string{}, svcs: map[int32]*Service{}, planes: map[int32]*fakeDataPlane{},
		authz: authz, serverOpts: opts}
	for _, id := range ids {
		c.startSidecar(id)
	}
	return c
}

// startSidecar opens node id (wired to the other transports as
// raftnodetest.Cluster.Start does), its Service and its admin endpoint.
func (c *sidecarCluster) startSidecar(id int32) {
	t := c.t
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Connect(id)
	peers := raftnode.NewPeers()
	cfg := c.Config(id, tr)
	cfg.AdminAddr, cfg.Forwarder = ln.Addr().String(), peers
	n, err := raftnode.OpenNode(cfg)
	if err != nil {
		t.Fatalf("OpenNode(%d): %v", id, err)
	}
	c.Add(id, n)

	dest, err := kgo.NewClient(kgo.SeedBrokers(c.dest...))
	if err != nil {
		t.Fatal(err)
	}
	plane := &fakeDataPlane{}
	dial := c.dial
	if dial == nil {
		dial = testSourceDialer
	}
	svc, err := NewService(ServiceConfig{
		BrokerID: id, Node: n, Peers: peers, Destination: NewDestination(dest, ""), DestClient: dest,
		NewDataPlane: func(DataPlaneEvents, fetcher.OffsetMaps) (DataPlane, error) { return plane, nil },
		SourceDialer: dial, Logger: zaptest.NewLogger(t), Authorization: c.authz,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := protocol.NewServer(svc, c.serverOpts...)
	served := make(chan error, 1)
	serve := func() { served <- srv.Serve(ln) }
	go serve()
	t.Cleanup(func() { // before the node closes: cleanups run last in, first out
		_ = srv.Close()
		if err := <-served; !errors.Is(err, protocol.ErrServerClosed) {
			t.Errorf("Serve(%d): %v", id, err)
		}
		peers.Close()
		dest.Close()
	})
	c.mu.Lock()
	c.admin[id], c.svcs[id], c.planes[id] = ln.Addr().String(), svc, plane
	c.mu.Unlock()
}

func (c *sidecarCluster) adminOf(id int32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admin[id]
}

func (c *sidecarCluster) service(id int32) *Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.svcs[id]
}

// waitLeader waits until one node leads and every running node knows it
// and its admin address, and returns its ID.
func (c *sidecarCluster) waitLeader() int32 {
	c.t.Helper()
	var leader int32
	testwait.For(c.t, raftnodetest.Timeout, "a leader known to every node with its admin address", func() bool {
		leader = -1
		for id, n := range c.Running() {
			if n.IsLeader() {
				leader = id
			}
		}
		if leader < 0 {
			return false
		}
		for _, n := range c.Running() {
			if id, addr := n.Leader(); id != leader || addr != c.adminOf(leader) {
				return false
			}
		}
		return true
	})
	return leader
}

// do sends req to the admin endpoint of id, as the CLI does.
func (c *sidecarCluster) do(id int32, req protocol.Request) protocol.Response {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), raftnodetest.Timeout)
	defer cancel()
	cl, err := protocol.Dial(ctx, c.adminOf(id))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.Do(ctx, req)
	if err != nil {
		c.t.Fatalf("%s to %d: %v", protocol.KeyName(req.Key()), id, err)
	}
	return resp
}

// memberIDs returns the IDs in n's raft configuration as "1,2,3".
func memberIDs(t *testing.T, n *raftnode.Node) string {
	t.Helper()
	ms, err := n.Members()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, fmt.Sprint(m.ID))
	}
	return strings.Join(ids, ",")
}

// wantCode fails the test unless err (code, message) has code and a
// message containing every snippet.
func wantCode(t *testing.T, what string, code int16, msg *string, want int16, snippets ...string) {
	t.Helper()
	if code != want {
		t.Fatalf("%s: error %v, want %v", what, protocol.ErrorFor(code, msg), (&protocol.Error{Code: want}).Name())
	}
	for _, s := range snippets {
		if msg == nil || !strings.Contains(*msg, s) {
			t.Fatalf("%s: message %q does not contain %q", what, deref(msg), s)
		}
	}
}

// hasMember reports whether id is in n's raft configuration.
func hasMember(t *testing.T, n *raftnode.Node, id int32) bool {
	t.Helper()
	return slices.Contains(strings.Split(memberIDs(t, n), ","), strconv.Itoa(int(id)))
}
