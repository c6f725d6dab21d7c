package sidecar

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestReadyz runs a sidecar whose local broker is down at first, comes up,
// and goes down again: /readyz answers 503 naming the local broker, then
// 200 with every check ok (a one-member raft group elects itself, no
// mirror yet), then 503 again. /healthz stays 200 throughout: the process
// is alive.
func TestReadyz(t *testing.T) {
	// A free port for the broker that is not there yet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)

	cfg := testConfig(t, t.TempDir())
	cfg.LocalBrokerID = 0 // kfake's first node
	cfg.LocalBootstrapServers = []string{addr}
	cfg.Destination.BootstrapServers = cfg.LocalBootstrapServers
	cfg.AdminListener, cfg.RaftListener = "127.0.0.1:0", "127.0.0.1:0"
	r := startSidecar(t, cfg)
	r.waitReady(t)
	base := "http://" + r.sc.HTTPAddr()

	waitReadyz := func(what string, code int, wants ...string) string {
		t.Helper()
		var body string
		var got int
		testwait.For(t, 30*time.Second, what, func() bool {
			got, body = get(t, base+"/readyz")
			if got != code {
				return false
			}
			for _, w := range wants {
				if !strings.Contains(body, w) {
					return false
				}
			}
			return true
		})
		if hc, _ := get(t, base+"/healthz"); hc != http.StatusOK {
			t.Fatalf("/healthz = %d while /readyz says %d", hc, got)
		}
		return body
	}

	waitReadyz("/readyz 503 naming the local broker", http.StatusServiceUnavailable, "FAIL local broker 0: ")

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		t.Fatal(err)
	}
	body := waitReadyz("/readyz 200", http.StatusOK, "ok   raft: member (voter) of 1, leader 0", "ok   local broker 0: reachable", "ok   sources: no mirror")
	if strings.Contains(body, "FAIL") {
		t.Fatalf("/readyz 200 with a failed check:\n%s", body)
	}

	if code, body := get(t, base+"/readyz?exclude=sources,bogus"); code != http.StatusBadRequest || !strings.Contains(body, `unknown check "bogus"`) {
		t.Fatalf("/readyz?exclude=sources,bogus = %d %q, want 400 naming the check", code, body)
	}
	if _, body := get(t, base+"/readyz?exclude=sources"); strings.Contains(body, "sources") {
		t.Fatalf("/readyz?exclude=sources still checks sources:\n%s", body)
	}

	c.Close()
	body = waitReadyz("/readyz 503 after the local broker went away", http.StatusServiceUnavailable, "FAIL local broker 0: ")
	if !strings.Contains(body, "ok   raft: member") {
		t.Fatalf("raft check changed with the broker:\n%s", body)
	}
}

type fakeRaft struct {
	members []raftnode.Member
	leader  int32
}

func (f fakeRaft) Members() ([]raftnode.Member, error) { return f.members, nil }
func (f fakeRaft) Leader() (int32, string)             { return f.leader, "" }

type fakeSources []fetcher.SourceHealth

func (f fakeSources) CheckSources(context.Context) []fetcher.SourceHealth { return f }

// TestReadinessChecks: each check fails for its own reason, and says it.
func TestReadinessChecks(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	member := fakeRaft{members: []raftnode.Member{{ID: 0, Voter: true}, {ID: 1, Voter: true}}, leader: 1}
	for _, tc := range []struct {
		name    string
		raft    fakeRaft
		sources fakeSources
		exclude string
		want    []string // lines, in order
		ready   bool
	}{
		{"all ok", member, fakeSources{{Mirror: "dr"}}, "", []string{
			"ok   raft: member (voter) of 2, leader 1", "ok   local broker 0: reachable", "ok   source of mirror dr: reachable"}, true},
		{"not a member", fakeRaft{members: []raftnode.Member{{ID: 1}, {ID: 2}}, leader: 1}, nil, "", []string{
			"FAIL raft: broker 0 is not a member of the raft group (members: 1, 2)", "ok   local broker 0: reachable", "ok   sources: no mirror"}, false},
		{"no leader", fakeRaft{members: member.members, leader: -1}, nil, "", []string{
			"FAIL raft: a member, but no raft leader is known"}, false},
		{"source down", member, fakeSources{{Mirror: "a"}, {Mirror: "dr", Err: errors.New("no broker of the source of mirror dr answered: connection refused")}}, "", []string{
			"ok   raft:", "ok   local broker 0:", "ok   source of mirror a: reachable",
			"FAIL source of mirror dr: no broker of the source of mirror dr answered: connection refused"}, false},
		{"source leaders cut off", member, fakeSources{{Mirror: "dr", Unreachable: 3}}, "", []string{
			"FAIL source of mirror dr: 3 partition(s) driven here cannot fetch from their source leaders"}, false},
		{"source down and partitions unreachable", member, fakeSources{{Mirror: "dr", Err: errors.New("no broker answered"), Unreachable: 1}}, "", []string{
			"FAIL source of mirror dr: no broker answered; 1 partition(s) driven here cannot fetch"}, false},
		{"source down, sources excluded", member, fakeSources{{Mirror: "dr", Unreachable: 3}}, checkSources, []string{
			"ok   raft:", "ok   local broker 0:"}, true},
		{"not a member, raft excluded", fakeRaft{leader: -1}, nil, checkRaft, []string{
			"ok   local broker 0:", "ok   sources: no mirror"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ro := readinessOf{brokerID: 0, raft: tc.raft, local: cl, sources: tc.sources, exclude: map[string]bool{tc.exclude: true}}
			got, ready := report(ro.check(ctx))
			if tc.exclude != "" && strings.Contains(got, tc.exclude+":") {
				t.Fatalf("excluded check %s ran:\n%s", tc.exclude, got)
			}
			if ready != tc.ready {
				t.Fatalf("ready = %v:\n%s", ready, got)
			}
			at := 0
			for _, w := range tc.want {
				i := strings.Index(got[at:], w)
				if i < 0 {
					t.Fatalf("checks:\n%s\nlack (in order) %q", got, w)
				}
				at += i + len(w)
			}
		})
	}
}
