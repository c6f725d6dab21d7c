package mirror

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestSourceQuota sets a consumer_byte_rate quota on the source for the
// KIP-1279 client ID of one sidecar's fetcher
// (broker-<id>-fetcher-0-mirror-<mirror>) with Kafka's own kafka-configs,
// writes a backlog, and measures the sidecar's mirrored bytes per second
// over ten seconds of the drain, with the source throttle time the sidecar
// reports moving. The source's quota windows are 2 x 1 s (TestMain), so that
// the burst a quota allows at first, and its echo when its window expires,
// stay short against the measurement.
//
// A quota is a ceiling: the broker delays each response by what the client
// took beyond the rate, and the fetcher's own round trip and append come on
// top of every delay. So the test holds the rate to at most the quota +15%,
// and wants the source to have throttled the fetcher for at least a second
// of the window, which shows that the quota applies to the KIP's client ID
// and was what held the rate back. The floor is low, 25% of the quota (a
// stalled fetcher): how far below the quota the rate falls is the speed of
// the machine's destination appends, not the quota's doing (on 2 cores the
// rate came out at 83% to 95% of the quota on a quiet machine, and at 41%
// while other test runs shared it, with the fetcher throttled for 3.9 s of
// the 10).
func TestSourceQuota(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, quota = "quota", "quota", 1_000_000
	createSourceTopic(t, topic, 1, nil)
	// Fetches of at most 64 KiB: a quota throttles after a response, so the
	// response size is the grain of the rate.
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", mirrorConfigFile(t, map[string]string{
		"max.partition.fetch.bytes": "65536", "fetch.max.bytes": "65536",
	}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)

	// The sidecar beside the destination leader of the one partition
	// fetches it.
	adm := kadm.NewClient(newClient(t, env.Destination, testbed.Admin))
	var leader int32 = -1
	wait.For(t, time.Minute, "the destination topic and its leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		p, ok := md.Topics[topic].Partitions[0]
		if !ok || p.Err != nil || p.Leader < 0 {
			return false
		}
		leader = p.Leader
		return true
	})
	clientID := fmt.Sprintf("broker-%d-fetcher-0-mirror-%s", leader, mirror)
	setSourceQuota(t, clientID, quota)
	var sidecar *testbed.Sidecar
	for _, s := range env.Sidecars.Sidecars() {
		if s.BrokerID == leader {
			sidecar = s
		}
	}
	if sidecar == nil {
		t.Fatalf("no sidecar beside broker %d", leader)
	}

	// 20,000 records of 1,000 B, uncompressed: 20 MB, 20 s at the quota.
	cl := newClient(t, env.Source, testbed.Admin, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(32<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	value := bytes.Repeat([]byte("0123456789"), 100)
	const records = 20_000
	for i := 0; i < records; i += 1000 {
		rs := make([]*kgo.Record, 0, 1000)
		for j := i; j < i+1000; j++ {
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", j), Value: value})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	throttle := fmt.Sprintf("sidemirror_source_throttle_seconds_total{mirror=%q}", mirror)
	metrics := func() string {
		mctx, mcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer mcancel()
		page, err := sidecar.Metrics(mctx)
		if err != nil {
			t.Fatalf("metrics of sidecar %d: %v", sidecar.BrokerID, err)
		}
		return page
	}
	// The window starts 3 s after the source first throttled the fetcher,
	// when the quota's first burst has left its windows.
	testwait.Every(50*time.Millisecond).For(t, time.Minute, "the source to throttle "+clientID, func() bool {
		return metricValue(metrics(), throttle) > 0
	})
	time.Sleep(3 * time.Second) // the measurement window starts here; it is no check
	s0, th0 := mirroredBytesBySidecar(t, mirror)[leader], metricValue(metrics(), throttle)
	time.Sleep(10 * time.Second) // the measurement window
	s1, th1 := mirroredBytesBySidecar(t, mirror)[leader], metricValue(metrics(), throttle)
	moved, d := s1.bytes-s0.bytes, s1.at.Sub(s0.at)
	got := moved / d.Seconds()
	t.Logf("sidecar %d (%s): %.0f bytes in %s: %.0f bytes/s; source throttle time %.2f s in the window", leader, clientID,
		moved, d.Round(time.Millisecond), got, th1-th0)
	if got < 0.25*quota || got > 1.15*quota {
		t.Errorf("sidecar %d fetched %.0f bytes/s under a consumer_byte_rate quota of %d, want 25%% to 115%% of it", leader, got, quota)
	}
	if th1-th0 < 1 {
		t.Errorf("%s moved by %.3f s in the window, want at least 1 s: the quota did not hold the fetcher back", throttle, th1-th0)
	}
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
}

// setSourceQuota sets consumer_byte_rate for clientID on the source with
// Kafka's own kafka-configs.sh (kafka.admin.ConfigCommand), waits until the
// source describes it, and removes it at the test's end.
func setSourceQuota(t *testing.T, clientID string, bytesPerSecond int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := filepath.Join(t.TempDir(), "admin.properties")
	if err := env.Source.WriteClientProperties(admin, testbed.Admin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "java", "-cp", env.Dist.Classpath(), "kafka.admin.ConfigCommand",
		"--bootstrap-server", env.Source.Bootstrap(), "--command-config", admin,
		"--alter", "--entity-type", "clients", "--entity-name", clientID,
		"--add-config", fmt.Sprintf("consumer_byte_rate=%d", bytesPerSecond))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kafka-configs: %v\n%s", err, out)
	}
	adm := kadm.NewClient(newClient(t, env.Source, testbed.Admin))
	entity := []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &clientID}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Remove: true}}}})
		if err != nil {
			t.Errorf("removing the quota of %s: %v", clientID, err)
		}
	})
	wait.For(t, 30*time.Second, "the source to describe the quota of "+clientID, func() bool {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		qs, err := adm.DescribeClientQuotas(dctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &clientID}})
		if err != nil {
			return false
		}
		for _, q := range qs {
			for _, v := range q.Values {
				if v.Key == "consumer_byte_rate" && v.Value == float64(bytesPerSecond) {
					return true
				}
			}
		}
		return false
	})
}
