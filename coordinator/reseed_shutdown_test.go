package coordinator

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/protocol"
)

// stateController is a controller over a fixed state that records the
// commands applied to it.
type stateController struct {
	st      *fsm.State
	mu      sync.Mutex
	applied []fsm.Command
}

func (c *stateController) State() *fsm.State { return c.st.Clone() }
func (c *stateController) IsLeader() bool    { return true }
func (c *stateController) Apply(_ context.Context, cmd fsm.Command) (fsm.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applied = append(c.applied, cmd)
	return fsm.Result{}, nil
}

// caughtUpMember is a raft member that is always caught up.
type caughtUpMember struct{}

func (caughtUpMember) WaitCaughtUp(context.Context) error { return nil }
func (caughtUpMember) ApplyLocal(context.Context, []byte) (fsm.Result, error) {
	return fsm.Result{}, errors.New("not in this test")
}
func (caughtUpMember) Members() ([]raftnode.Member, error)                    { return nil, nil }
func (caughtUpMember) AddMember(context.Context, int32, string) (bool, error) { return false, nil }
func (caughtUpMember) RemoveMember(context.Context, int32) error              { return nil }
func (caughtUpMember) Leader() (int32, string)                                { return 1, "" }
func (caughtUpMember) IsLeader() bool                                         { return true }

// noPartitions is a reconciler that drives nothing.
type noPartitions struct{}

func (noPartitions) LocalRows([]string) []protocol.DescribedMirror { return nil }
func (noPartitions) Kick()                                         {}

// TestReseedShutdown sends --start --reseed to an admin endpoint, holds the
// copy of the diverged records (the destination answers every produce to
// the destination with a retriable error), and closes the endpoint as the
// sidecar's shutdown does on SIGTERM: Close must return within 10 s (it
// used to wait for the re-seed's 15 minutes), the client gets an answer
// saying that nothing was deleted, and the destination topic keeps its
// records.
func TestReseedShutdown(t *testing.T) {
	f := newReseedFixture(t)
	copying := make(chan struct{})
	var once sync.Once
	f.dstFake.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.dstFake.KeepControl()
		// Nothing else produces once the fixture is written: every produce
		// is the copy's (named by topic ID in newer versions).
		req := kr.(*kmsg.ProduceRequest)
		once.Do(func() { close(copying) })
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	st := fsm.NewState()
	st.Mirrors["m"] = &fsm.Mirror{Name: "m", Config: map[string]string{fsm.BootstrapServersKey: f.srcAddr, ReadOnlyEnforcementKey: "none"}}
	ctl := &stateController{st: st}
	a := f.s
	a.ctl, a.node, a.local, a.dial, a.timeout = ctl, caughtUpMember{}, noPartitions{}, testSourceDialer, time.Minute
	srv := protocol.NewServer(protocol.HandlerFunc(a.handle))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := protocol.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type answer struct {
		resp protocol.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := cl.Do(ctx, &protocol.StartMirrorTopicsRequest{MirrorName: "m", TopicPatterns: []string{"t"}, Reseed: true})
		answered <- answer{resp, err}
	}()
	select {
	case <-copying:
	case a := <-answered:
		t.Fatalf("the start answered before the copy began: %+v, %v", a.resp, a.err)
	case <-ctx.Done():
		t.Fatal("the re-seed never began copying")
	}

	began := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the admin endpoint did not close within 10 s of the shutdown while a re-seed was copying")
	}
	t.Logf("the admin endpoint closed %v after the shutdown began", time.Since(began).Round(time.Millisecond))
	if err := <-served; !errors.Is(err, protocol.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}

	// The answer, if it made it out before the connection closed, says that
	// nothing was deleted; nothing was recorded through raft.
	if a := <-answered; a.err == nil {
		r := a.resp.(*protocol.StartMirrorTopicsResponse)
		if len(r.Topics) != 1 || r.Topics[0].ErrorMessage == nil || !strings.Contains(*r.Topics[0].ErrorMessage, "shutting down") ||
			!strings.Contains(*r.Topics[0].ErrorMessage, "topic t was not deleted") {
			t.Fatalf("start answered %+v; want topic t's error saying that the shutdown left it in place", r)
		}
	}
	ctl.mu.Lock()
	if len(ctl.applied) != 0 {
		t.Errorf("commands applied: %v; want none", ctl.applied)
	}
	ctl.mu.Unlock()
	ends, err := f.s.dest.EndOffsets(ctx, "t")
	if err != nil || ends[0] != 5 || ends[1] != 7 {
		t.Fatalf("destination end offsets after the interrupted re-seed = %v, %v; want 5 and 7", ends, err)
	}
}
