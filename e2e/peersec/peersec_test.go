package peersec

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/peertls"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

var wait = testwait.Every(250 * time.Millisecond)

// TestPeerSecurity mirrors a topic with peer TLS on while a stranger on
// the network attacks the sidecars, and checks that every attack is
// refused, nothing changed, the sidecars' RSS stays under 200 MiB and the
// group keeps mirroring.
func TestPeerSecurity(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(60))
		}
	})
	const mirror, topic = "peersec", "peersec-orders"
	leader := waitGroup(t)
	t.Logf("raft leader: sidecar %d", leader)

	// Mirroring works with peer TLS: the followers reach the leader and
	// the partitions' coordinators through the peer listeners.
	cfgFile := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(cfgFile, []byte("bootstrap.servers="+env.Source.Bootstrap()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", cfgFile)
	createSourceTopic(t, topic, 3)
	produce(t, topic, "a", 3000)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic)

	leaderSc := env.Sidecars.Sidecar(leader)
	follower := int32(1)
	if follower == leader {
		follower = 2
	}

	t.Run("raw ApplyCommand on the admin endpoint", func(t *testing.T) {
		cmd, err := fsm.EncodeCommand(fsm.CreateMirror{Name: "evil", Config: fsmtest.BootstrapConfig()})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range env.Sidecars.Sidecars() {
			r := do(t, sc.AdminAddr, &protocol.ApplyCommandRequest{Command: cmd}).(*protocol.ApplyCommandResponse)
			if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
				t.Errorf("sidecar %d: error code %d", sc.BrokerID, r.ErrorCode)
			}
		}
		if out := mustCLI(t, "--list"); strings.Contains(out, "evil") {
			t.Errorf("--list shows the injected mirror:\n%s", out)
		}
	})

	t.Run("fake raft peers", func(t *testing.T) {
		selfSigned, err := certificate("sidecar-666", false)
		if err != nil {
			t.Fatal(err)
		}
		outsider, err := certificate("sidecar-666", true)
		if err != nil {
			t.Fatal(err)
		}
		for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "a self-signed certificate": &selfSigned, "the CA's certificate of broker 666": &outsider} {
			cfg := &tls.Config{InsecureSkipVerify: true}
			if cert != nil {
				cfg.Certificates = []tls.Certificate{*cert}
			}
			c, err := tls.Dial("tcp", leaderSc.RaftAddr, cfg)
			if err == nil {
				_ = c.SetDeadline(time.Now().Add(15 * time.Second))
				// The stream byte, then raft's AppendEntries type byte.
				_, _ = c.Write([]byte{peertls.StreamRaft, 0})
				_, err = c.Read(make([]byte, 1))
				c.Close()
			}
			if err == nil {
				t.Errorf("%s: the raft connection was served", name)
			}
		}
		wait.For(t, 30*time.Second, "the refusal in the leader's log", func() bool {
			b, _ := os.ReadFile(leaderSc.LogPath())
			return bytes.Contains(b, []byte("refused a raft connection"))
		})
	})

	t.Run("a member re-registering another", func(t *testing.T) {
		member, err := certificate(fmt.Sprint("sidecar-", follower), true)
		if err != nil {
			t.Fatal(err)
		}
		cmd, _ := fsm.EncodeCommand(fsm.RegisterSidecar{ID: 3, RaftAddr: "127.0.0.1:6666", AdminAddr: "127.0.0.1:6667"})
		if follower == 3 {
			cmd, _ = fsm.EncodeCommand(fsm.RegisterSidecar{ID: 2, RaftAddr: "127.0.0.1:6666", AdminAddr: "127.0.0.1:6667"})
		}
		dial := protocol.DialFunc(func(ctx context.Context, addr string) (net.Conn, error) {
			d := tls.Dialer{Config: &tls.Config{Certificates: []tls.Certificate{member}, InsecureSkipVerify: true}}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				_, err = c.Write([]byte{peertls.StreamPeerAPI})
			}
			return c, err
		})
		r := do(t, leaderSc.RaftAddr, &protocol.ApplyCommandRequest{Command: cmd}, dial).(*protocol.ApplyCommandResponse)
		if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("error code %d: %v", r.ErrorCode, r.ErrorMessage)
		}
	})

	t.Run("oversized requests", func(t *testing.T) {
		frame := emptyPatternsFrame(t, mirror, 4<<20)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				c, err := net.Dial("tcp", leaderSc.AdminAddr)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				if _, err := c.Write(frame); err != nil {
					return // closed while writing: refused
				}
				if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
					t.Errorf("the oversized request was answered: %v", err)
				}
			})
		}
		wg.Wait()
		wait.For(t, 30*time.Second, "the refusal in the leader's log", func() bool {
			b, _ := os.ReadFile(leaderSc.LogPath())
			return bytes.Contains(b, []byte("too many array elements"))
		})
		// One 8 MiB pattern (it took 9.3 s and 944 MiB to compile) is
		// refused before it is compiled.
		start := time.Now()
		r := do(t, leaderSc.AdminAddr, &protocol.StopMirrorTopicsRequest{MirrorName: mirror, Patterns: []string{strings.Repeat("(a|b)", 8<<20/5)}}).(*protocol.StopMirrorTopicsResponse)
		if r.ErrorCode != kerr.InvalidRequest.Code || !strings.Contains(deref(r.ErrorMessage), "the limit is 1024") || time.Since(start) > 5*time.Second {
			t.Errorf("an 8 MiB pattern: %d %.200s after %v", r.ErrorCode, deref(r.ErrorMessage), time.Since(start))
		}
	})

	t.Run("5000 connections", func(t *testing.T) {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for i := range 5000 {
			c, err := net.DialTimeout("tcp", leaderSc.AdminAddr, 5*time.Second)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns = append(conns, c)
		}
		var mu sync.Mutex
		closed, open := 0, 0
		var wg sync.WaitGroup
		deadline := time.Now().Add(5 * time.Second)
		for _, c := range conns {
			wg.Go(func() {
				_ = c.SetReadDeadline(deadline)
				_, err := c.Read(make([]byte, 1))
				var ne net.Error
				mu.Lock()
				defer mu.Unlock()
				if errors.As(err, &ne) && ne.Timeout() {
					open++
				} else {
					closed++
				}
			})
		}
		wg.Wait()
		t.Logf("of 5000 connections, %d were kept open and %d closed; RSS peak of the leader's sidecar %d MiB", open, closed, leaderSc.PeakRSS()>>20)
		if open > 1000 || open < 900 {
			t.Errorf("%d connections kept open, want at most admin.max.connections (1000) and most of them", open)
		}
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		wait.For(t, time.Minute, "the admin endpoint to serve again", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := protocol.Dial(ctx, leaderSc.AdminAddr)
			if err != nil {
				return false
			}
			defer c.Close()
			_, err = c.Do(ctx, &protocol.DescribeSidecarsRequest{})
			return err == nil
		})
	})

	t.Run("the )|( pattern", func(t *testing.T) {
		r := cli(t, "--stop", "--topics", topic+")|(.*", "--mirror", mirror)
		if r.Code == 0 {
			t.Errorf("--stop with %q succeeded:\n%s%s", topic+")|(.*", r.Stdout, r.Stderr)
		}
		if !strings.Contains(r.Stdout+r.Stderr, "not a valid regular expression") {
			t.Errorf("the refusal does not say why:\n%s%s", r.Stdout, r.Stderr)
		}
	})

	t.Run("adding a sidecar nobody runs", func(t *testing.T) {
		r := cli(t, "--add-sidecar", "--broker-id", "99", "--raft-address", "127.0.0.1:1", "--admin-address", "127.0.0.1:2")
		if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "cannot be added") {
			t.Errorf("--add-sidecar of broker 99 at 127.0.0.1:1: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})

	// Afterwards: the group is whole, nothing changed, mirroring goes on,
	// and no sidecar grew past 200 MiB.
	if got := waitGroup(t); got < 0 {
		t.Fatal("no leader")
	}
	m := describe(t, mirror)
	for _, tp := range m.Topics {
		for _, p := range tp.Partitions {
			if p.State != "MIRRORING" {
				t.Errorf("%s-%d is %s after the attacks", tp.TopicName, p.PartitionIndex, p.State)
			}
		}
	}
	produce(t, topic, "b", 1000)
	waitCaughtUp(t, mirror, topic)
	for _, sc := range env.Sidecars.Sidecars() {
		rss := sc.PeakRSS()
		t.Logf("sidecar %d: peak RSS %d MiB", sc.BrokerID, rss>>20)
		if rss > 200<<20 {
			t.Errorf("sidecar %d: peak RSS %d MiB, over 200 MiB", sc.BrokerID, rss>>20)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "broken pipe"))
}

// emptyPatternsFrame returns a StopMirrorTopics request frame with n empty
// patterns, built without materialising them.
func emptyPatternsFrame(t *testing.T, mirror string, n int) []byte {
	t.Helper()
	one := (&protocol.StopMirrorTopicsRequest{MirrorName: mirror, Patterns: []string{""}}).AppendTo(nil)
	// ... Patterns: compact array of 1 (0x02), one empty string (0x01);
	// then the tagged fields (0x00).
	if !bytes.HasSuffix(one, []byte{2, 1, 0}) {
		t.Fatalf("unexpected encoding %x", one)
	}
	body := kbin.AppendUvarint(bytes.Clone(one[:len(one)-3]), uint32(n+1))
	body = append(body, bytes.Repeat([]byte{1}, n)...)
	body = append(body, 0)
	var check protocol.StopMirrorTopicsRequest
	small := append(kbin.AppendUvarint(bytes.Clone(one[:len(one)-3]), 6), 1, 1, 1, 1, 1, 0)
	if err := check.ReadFrom(small); err != nil || len(check.Patterns) != 5 {
		t.Fatalf("the hand-built request does not decode: %v", err)
	}
	h := protocol.RequestHeader{RequestApiKey: protocol.KeyStopMirrorTopics, CorrelationId: 1}
	b := append(h.AppendTo(nil), body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// waitGroup waits until the group has a leader and all three sidecars are
// registered with their admin addresses, and returns the leader's ID.
func waitGroup(t *testing.T) int32 {
	t.Helper()
	var leader int32 = -1
	wait.For(t, 2*time.Minute, "a raft leader and three registered sidecars", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := protocol.Dial(ctx, env.Sidecars.Sidecars()[0].AdminAddr)
		if err != nil {
			return false
		}
		defer c.Close()
		resp, err := c.Do(ctx, &protocol.DescribeSidecarsRequest{})
		if err != nil {
			return false
		}
		d := resp.(*protocol.DescribeSidecarsResponse)
		registered := 0
		for _, s := range d.Sidecars {
			if sc := env.Sidecars.Sidecar(s.BrokerId); sc != nil && s.AdminAddress != nil && *s.AdminAddress == sc.AdminAddr {
				registered++
			}
		}
		leader = d.LeaderId
		return d.LeaderId >= 0 && registered == 3 && len(d.Sidecars) == 3
	})
	return leader
}

func do(t *testing.T, addr string, req protocol.Request, opts ...protocol.ClientOpt) protocol.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	resp, err := c.Do(ctx, req)
	if err != nil {
		t.Fatalf("%s to %s: %v", protocol.KeyName(req.Key()), addr, err)
	}
	return resp
}

// cliResult is what one kafka-cluster-mirrors run printed.
type cliResult = testbed.CLIResult

func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	return testbed.RunCLI(t, env.Bin.CLI, append([]string{"--bootstrap-server", env.Sidecars.AdminBootstrap()}, args...)...)
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	if r.Code != 0 {
		t.Fatalf("kafka-cluster-mirrors %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func describe(t *testing.T, mirror string) protocol.DescribedMirror {
	t.Helper()
	out := mustCLI(t, "--describe", "--mirror", mirror, "--json")
	var resp protocol.DescribeClusterMirrorsResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Mirrors) != 1 {
		t.Fatalf("describe --json: %v\n%s", err, out)
	}
	return resp.Mirrors[0]
}

func newClient(t *testing.T, c *testbed.Cluster) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(testbed.Admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createSourceTopic(t *testing.T, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newClient(t, env.Source)).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create source topic %s: %v", name, err)
	}
}

func produce(t *testing.T, topic, prefix string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	if err := newClient(t, env.Source).ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// waitCaughtUp waits until the destination's end offsets equal the
// source's, read with Kafka clients, and describe shows every partition
// MIRRORING with lag 0.
func waitCaughtUp(t *testing.T, mirror, topic string) {
	t.Helper()
	var last string
	wait.For(t, 3*time.Minute, "the mirror to catch up", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		src, err1 := env.Source.EndOffsets(ctx, topic)
		dst, err2 := env.Destination.EndOffsets(ctx, topic)
		if err1 != nil || err2 != nil || len(src) == 0 || len(src) != len(dst) {
			last = fmt.Sprintf("%v %v %v %v", src, dst, err1, err2)
			return false
		}
		for p, o := range src {
			if dst[p] != o {
				last = fmt.Sprintf("source %v, destination %v", src, dst)
				return false
			}
		}
		rows := 0
		for _, tp := range describe(t, mirror).Topics {
			for _, p := range tp.Partitions {
				if tp.TopicName == topic && p.State == "MIRRORING" && p.Lag == 0 {
					rows++
				}
			}
		}
		last = fmt.Sprintf("source %v, destination %v, %d partitions MIRRORING with lag 0", src, dst, rows)
		return rows == len(src)
	})
	t.Logf("caught up: %s", last)
}
