package mirror

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/kafkaproxy"
)

// TestDroppedProduceConnection puts a proxy between a sidecar and its
// broker (and the other brokers, which answer its Metadata requests too). The proxy takes one of the sidecar's produce requests for the
// mirror topic off the connection and cuts it, so the sidecar sees a
// dropped connection and no answer; the broker gets the request only right
// before the sidecar's next produce request for the topic, that is after
// the sidecar read the log end offset again and sent the batch anew: a
// request the broker had queued when the connection died. The mirror must
// go on with no FAILED partition and no duplicate (kcat dumps equal).
func TestDroppedProduceConnection(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "dropped", "dropped", 3
	createSourceTopic(t, topic, partitions, nil)
	produceVariety(t, env.Source, topic, 3000, 41)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	// A proxy in front of every destination broker (the sidecar asks any of
	// them for metadata), the sidecar beside partition 0's leader rerouted.
	s := env.Sidecars.Sidecar(owners(t, mirror, topic)[0])
	var upstreams []string
	for _, n := range env.Destination.Nodes() {
		upstreams = append(upstreams, n.BrokerAddr)
	}
	proxies, err := kafkaproxy.StartCluster("127.0.0.1:0", upstreams)
	if err != nil {
		t.Fatal(err)
	}
	var px *kafkaproxy.Proxy
	for i, n := range env.Destination.Nodes() {
		t.Cleanup(func() { _ = proxies[i].Close() })
		if n.ID == s.BrokerID {
			px = proxies[i]
		}
	}
	reroute(t, s, px.Addr())
	wait.For(t, time.Minute, "the restarted sidecar to drive partition 0 again", func() bool {
		return owners(t, mirror, topic)[0] == s.BrokerID
	})
	produceVariety(t, env.Source, topic, 3000, 42)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	// Hold a produce request of a running pipeline.
	logAt := fileSize(t, s.LogPath())
	px.HoldNext(kafkaproxy.ProduceTo(topic))
	stop := produceSteadily(t, topic)
	wait.For(t, 2*time.Minute, "the broker to get the held produce request right before the sidecar's next one", func() bool {
		_, released := px.Holds()
		return released == 1
	})
	n := stop()
	waitCaughtUp(t, mirror, topic, 3*time.Minute)
	mustCompareAll(t, "after a dropped produce connection", topic, partitions, 6000+n)
	ours := `"mirror": "` + mirror + `"`
	if len(linesAfter(t, s.LogPath(), logAt, "retriable error: resuming from the destination log end offset", ours)) == 0 {
		t.Fatalf("sidecar %d logged no append error of mirror %s after the cut: the proxy held none of its requests", s.BrokerID, mirror)
	}
	for _, msg := range []string{"appending with a new producer ID", "partition failed"} {
		if lines := linesAfter(t, s.LogPath(), logAt, msg, ours); len(lines) > 0 {
			t.Fatalf("sidecar %d after the dropped connection:\n%s", s.BrokerID, strings.Join(lines, "\n"))
		}
	}
}

// linesAfter returns the lines of the file at path, from offset on, that
// contain all of subs.
func linesAfter(t *testing.T, path string, offset int64, subs ...string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
lines:
	for line := range strings.SplitSeq(string(data[min(offset, int64(len(data))):]), "\n") {
		for _, sub := range subs {
			if !strings.Contains(line, sub) {
				continue lines
			}
		}
		out = append(out, line)
	}
	return out
}

// reroute restarts sidecar s with its local broker reached through addr;
// the test's end restores its configuration and restarts it.
func reroute(t *testing.T, s *testbed.Sidecar, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := s.SetConfig("local.bootstrap.servers", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
		if _, err := s.SetConfig("local.bootstrap.servers", old); err != nil {
			t.Error(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Error(err)
		}
	})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
}
