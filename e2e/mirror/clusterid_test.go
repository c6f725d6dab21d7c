package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/protocol"
)

// describeFaulty returns the --describe --json output of one mirror and the
// CLI's exit code, which is not 0 when the mirror reports an error.
func describeFaulty(t *testing.T, mirror string) (protocol.DescribedMirror, cliResult) {
	t.Helper()
	r := cli(t, "--describe", "--mirror", mirror, "--json")
	var resp protocol.DescribeClusterMirrorsResponse
	if err := json.Unmarshal([]byte(r.Stdout), &resp); err != nil {
		t.Fatalf("describe --json (exit %d) printed unparsable output: %v\n%s\n%s", r.Code, err, r.Stdout, r.Stderr)
	}
	if len(resp.Mirrors) != 1 || resp.Mirrors[0].MirrorName != mirror {
		t.Fatalf("describe of %s returned %d mirrors: %s", mirror, len(resp.Mirrors), r.Stdout)
	}
	return resp.Mirrors[0], r
}

// produceTo produces n records with the values prefix-0 ... prefix-(n-1)
// to topic on c.
func produceTo(t *testing.T, c *testbed.Cluster, topic, prefix string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, c, testbed.Admin)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s on %s: %v", topic, c.Name(), err)
	}
}

// createTopicOn creates a topic on c with replication factor 1.
func createTopicOn(t *testing.T, c *testbed.Cluster, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newClient(t, c, testbed.Admin)).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s on %s: %v", topic, c.Name(), err)
	}
}

// sidecarLogLines returns the lines of every sidecar log that contain all
// of subs.
func sidecarLogLines(t *testing.T, subs ...string) []string {
	t.Helper()
	var out []string
	for _, s := range env.Sidecars.Sidecars() {
		data, err := os.ReadFile(s.LogPath())
		if err != nil {
			t.Fatal(err)
		}
	lines:
		for line := range strings.SplitSeq(string(data), "\n") {
			for _, sub := range subs {
				if !strings.Contains(line, sub) {
					continue lines
				}
			}
			out = append(out, line)
		}
	}
	return out
}

// TestSourceClusterReplaced mirrors a topic from a cluster that is then
// replaced at the same address by a new cluster (another cluster ID) with a
// topic of the same name holding other records. Describe (table and JSON)
// must report the cluster ID change as the mirror's error, the sidecar
// leading the sync must log it, and nothing of the new cluster may reach the
// destination: no records, no partitions, no configs, no group offsets.
// Pointing bootstrap.servers at another cluster with --alter is refused.
func TestSourceClusterReplaced(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, group = "replaced", "replaced", "replaced-g"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old, err := testbed.StartCluster(ctx, env.Dist, env.Dir, testbed.ClusterOptions{Name: "replaced-source", Nodes: 1, HeapMB: 256})
	if err != nil {
		t.Fatalf("extra source cluster: %v", err)
	}
	t.Cleanup(old.Close)
	testbed.DumpLogsOnFailure(t, old)
	oldID := old.ID()

	createTopicOn(t, old, topic, 2)
	produceTo(t, old, topic, "old-cluster", 400)
	cfgPath := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(cfgPath, []byte("bootstrap.servers="+old.Bootstrap()+"\nmirror.metadata.refresh.interval.ms=1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", cfgPath)
	t.Cleanup(func() {
		// Leave no mirror behind whose source is gone.
		for _, args := range [][]string{{"--stop", "--topics", topic, "--mirror", mirror}, {"--delete", "--mirror", mirror}} {
			if r := cli(t, args...); r.Code != 0 {
				t.Logf("cleanup: kafka-cluster-mirrors %v: exit %d: %s", args, r.Code, r.Stderr)
			}
		}
	})
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	srcEnd := endOffsets(t, old, topic)
	wait.For(t, 2*time.Minute, "the topic mirrored from the first cluster", func() bool {
		return maps.Equal(endOffsets(t, env.Destination, topic), srcEnd)
	})
	if got := describe(t, mirror).SourceClusterId; got != oldID {
		t.Fatalf("describe shows source cluster ID %q, want %q", got, oldID)
	}

	// The mirror cannot be pointed at another cluster.
	r := cli(t, "--alter", "--mirror", mirror, "--add-config", "bootstrap.servers="+env.Source.Nodes()[0].BrokerAddr)
	if r.Code == 0 || !strings.Contains(r.Stderr, "INCONSISTENT_CLUSTER_ID") || !strings.Contains(r.Stderr, env.Source.ID()) {
		t.Fatalf("--alter of bootstrap.servers to another cluster: exit %d\nstdout: %s\nstderr: %s\nwant INCONSISTENT_CLUSTER_ID naming %s",
			r.Code, r.Stdout, r.Stderr, env.Source.ID())
	}

	// The cluster is rebuilt at the same address. Its topic of the same
	// name is shorter than what was mirrored (a fetch from it cannot
	// append) until the halt shows, then it grows far beyond.
	dstEnd := endOffsets(t, env.Destination, topic)
	if err := old.Recreate(ctx); err != nil {
		t.Fatalf("recreate the source cluster: %v", err)
	}
	newID := old.ID()
	if newID == oldID {
		t.Fatalf("the recreated cluster kept its ID %s", oldID)
	}
	t.Logf("source cluster %s replaced by cluster %s at %s", oldID, newID, old.Bootstrap())
	createTopicOn(t, old, topic, 3)
	produceTo(t, old, topic, "new-cluster", 30)

	mirrorCode := kerr.InconsistentClusterID.Code
	wait.For(t, time.Minute, "describe to report the cluster ID change", func() bool {
		m, _ := describeFaulty(t, mirror)
		return m.ErrorCode == mirrorCode
	})
	m, jr := describeFaulty(t, mirror)
	if jr.Code == 0 || !strings.Contains(jr.Stderr, "INCONSISTENT_CLUSTER_ID") {
		t.Errorf("describe --json of the halted mirror: exit %d, stderr %q; want a failure naming INCONSISTENT_CLUSTER_ID", jr.Code, jr.Stderr)
	}
	if msg := deref(m.ErrorMessage); !strings.Contains(msg, newID) || !strings.Contains(msg, oldID) {
		t.Errorf("describe --json error message %q does not name both cluster IDs %s and %s", msg, oldID, newID)
	}
	if m.SourceClusterId != oldID {
		t.Errorf("describe --json shows source cluster ID %q, want the mirrored cluster's %q", m.SourceClusterId, oldID)
	}
	r = cli(t, "--describe", "--mirror", mirror)
	if r.Code == 0 || !strings.Contains(r.Stderr, "Error for mirror "+mirror+": INCONSISTENT_CLUSTER_ID") ||
		!strings.Contains(r.Stderr, newID) || !strings.Contains(r.Stdout, topic) {
		t.Errorf("--describe: exit %d\nstdout: %s\nstderr: %s\nwant the table and INCONSISTENT_CLUSTER_ID naming %s", r.Code, r.Stdout, r.Stderr, newID)
	}
	wait.For(t, 10*time.Second, "the sidecar log line of the halt", func() bool {
		return len(sidecarLogLines(t, "source cluster ID changed: mirror halted", `"mirror": "`+mirror+`"`, newID)) > 0
	})

	// The new cluster now has more records than the destination, another
	// partition, a topic config and a consumer group: none may arrive.
	produceTo(t, old, topic, "new-cluster-more", 3000)
	newEnd := endOffsets(t, old, topic)
	for p, o := range dstEnd {
		if newEnd[p] <= o {
			t.Fatalf("new cluster's partition %d ends at %d, not beyond the destination's %d: the test proves nothing", p, newEnd[p], o)
		}
	}
	alterCtx, alterCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer alterCancel()
	retention := "123456789"
	if resp, err := kadm.NewClient(newClient(t, old, testbed.Admin)).AlterTopicConfigs(alterCtx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &retention}}, topic); err != nil || resp[0].Err != nil {
		t.Fatalf("alter retention.ms on the new cluster: %v %v", err, resp)
	}
	commitOffsets(t, old, group, topic, map[int32]int64{0: 5, 1: 5, 2: 5})
	// Many sync rounds (1 s) and fetch rounds.
	time.Sleep(8 * time.Second)
	if got := endOffsets(t, env.Destination, topic); !maps.Equal(got, dstEnd) {
		t.Errorf("destination end offsets %v changed after the source was replaced (before %v): records of the new cluster arrived", got, dstEnd)
	}
	if got := topicConfig(t, env.Destination, topic, "retention.ms"); got == retention {
		t.Errorf("the new cluster's retention.ms reached the destination")
	}
	if got := groupOffsets(t, env.Destination, group, topic); len(got) != 0 {
		t.Errorf("the new cluster's group offsets reached the destination: %v", got)
	}
	m, _ = describeFaulty(t, mirror)
	if m.ErrorCode != mirrorCode {
		t.Errorf("describe error code %d after the wait, want %d (INCONSISTENT_CLUSTER_ID)", m.ErrorCode, mirrorCode)
	}
	// Halted: no sidecar drives a partition of the mirror (a fetcher that
	// kept one, even FAILED by its own divergence check, would own it).
	rows := 0
	for _, tp := range m.Topics {
		for _, pd := range tp.Partitions {
			rows++
			if pd.OwnerBrokerId != -1 {
				t.Errorf("%s-%d is driven by the sidecar of broker %d (state %s, last error %s) while the mirror is halted",
					tp.TopicName, pd.PartitionIndex, pd.OwnerBrokerId, pd.State, deref(pd.LastError))
			}
			if pd.State != "FAILED" || !strings.Contains(deref(pd.LastError), m.SourceClusterId) {
				t.Errorf("%s-%d shows %s (last error %s) while the mirror is halted, want FAILED naming the cluster ID change",
					tp.TopicName, pd.PartitionIndex, pd.State, deref(pd.LastError))
			}
		}
	}
	if rows != len(dstEnd) {
		t.Errorf("describe shows %d partition rows, want %d", rows, len(dstEnd))
	}
}
