package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

// wait polls the tests' conditions, which ask real Kafka clusters, a few
// times a second.
var wait = testwait.Every(250 * time.Millisecond)

// cliResult is what one kafka-cluster-mirrors run printed.
type cliResult = testbed.CLIResult

// cli runs kafka-cluster-mirrors against the sidecars' admin endpoints.
func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	return cliAt(t, env.Sidecars.AdminBootstrap(), args...)
}

// cliAt runs kafka-cluster-mirrors against the given admin endpoints.
func cliAt(t *testing.T, bootstrap string, args ...string) cliResult {
	t.Helper()
	return testbed.RunCLI(t, env.Bin.CLI, append([]string{"--bootstrap-server", bootstrap}, args...)...)
}

// mustCLI runs the CLI and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	if r.Code != 0 {
		t.Fatalf("kafka-cluster-mirrors %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// mirrorConfigFile writes a --mirror-config file for the source cluster
// with extra settings and returns its path.
func mirrorConfigFile(t *testing.T, extra map[string]string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "bootstrap.servers=%s\n", env.Source.Bootstrap())
	for k, v := range extra {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	path := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// createMirror creates a mirror of the source cluster.
func createMirror(t *testing.T, name string) {
	t.Helper()
	out := mustCLI(t, "--create", "--mirror", name, "--mirror-config", mirrorConfigFile(t, nil))
	if want := "Created mirror " + name + "\n"; out != want {
		t.Fatalf("create printed %q, want %q", out, want)
	}
}

// describe returns the --describe --json output of one mirror. The exit
// code must be 2 when a partition is FAILED, else 0.
func describe(t *testing.T, mirror string) protocol.DescribedMirror {
	t.Helper()
	r := cli(t, "--describe", "--mirror", mirror, "--json")
	var resp protocol.DescribeClusterMirrorsResponse
	if err := json.Unmarshal([]byte(r.Stdout), &resp); err != nil {
		t.Fatalf("describe --json (exit %d) printed unparsable output: %v\n%s\n%s", r.Code, err, r.Stdout, r.Stderr)
	}
	if len(resp.Mirrors) != 1 || resp.Mirrors[0].MirrorName != mirror {
		t.Fatalf("describe of %s returned %d mirrors: %s", mirror, len(resp.Mirrors), r.Stdout)
	}
	if want := describeExitCode(resp.Mirrors); r.Code != want {
		t.Fatalf("describe of %s: exit %d, want %d\nstdout: %s\nstderr: %s", mirror, r.Code, want, r.Stdout, r.Stderr)
	}
	return resp.Mirrors[0]
}

// describeExitCode is the exit code --describe gives for mirrors without
// mirror-level errors: 3 with a FAILED partition, else 0.
func describeExitCode(mirrors []protocol.DescribedMirror) int {
	for _, m := range mirrors {
		for _, tp := range m.Topics {
			for _, pd := range tp.Partitions {
				if pd.State == "FAILED" {
					return 3
				}
			}
		}
	}
	return 0
}

// newClient returns a franz-go client for c as u, closed at test end.
func newClient(t *testing.T, c *testbed.Cluster, u testbed.User, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(u, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createSourceTopic creates a topic on the source cluster.
func createSourceTopic(t *testing.T, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rf := int16(min(2, len(env.Source.Nodes())))
	resp, err := kadm.NewClient(newClient(t, env.Source, testbed.Admin)).CreateTopic(ctx, partitions, rf, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create source topic %s: %v", name, err)
	}
}

// endOffsets returns the end offset of every partition of topic on c,
// retrying while a new topic's metadata spreads through the cluster.
func endOffsets(t *testing.T, c *testbed.Cluster, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.WaitEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startOffsets returns the log start offset of every partition of topic.
func startOffsets(t *testing.T, c *testbed.Cluster, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(newClient(t, c, testbed.Admin)).ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("start offsets of %s on %s: %v", topic, c.Name(), err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// waitCaughtUp waits until every partition of topic is MIRRORING with lag 0
// in describe and the destination's end offsets equal the source's, read
// independently of the sidecars.
func waitCaughtUp(t *testing.T, mirror, topic string, d time.Duration) {
	t.Helper()
	var last string
	deadline := time.Now().Add(d)
	for {
		src := endOffsets(t, env.Source, topic)
		dst := endOffsets(t, env.Destination, topic)
		m := describe(t, mirror)
		ok := len(src) > 0 && len(src) == len(dst)
		for p, o := range src {
			ok = ok && dst[p] == o
		}
		rows := 0
		for _, tp := range m.Topics {
			if tp.TopicName != topic {
				continue
			}
			for _, pd := range tp.Partitions {
				rows++
				ok = ok && pd.State == "MIRRORING" && pd.Lag == 0 && pd.DestinationOffset == src[pd.PartitionIndex]
				if pd.State == "FAILED" {
					t.Fatalf("%s-%d FAILED: %s", topic, pd.PartitionIndex, deref(pd.LastError))
				}
			}
		}
		ok = ok && rows == len(src)
		if ok {
			return
		}
		last = fmt.Sprintf("source %v, destination %v, describe %+v", src, dst, m.Topics)
		if time.Now().After(deadline) {
			t.Fatalf("%s not caught up after %v: %s", topic, d, last)
		}
		time.Sleep(time.Second)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// compareAll compares kcat dumps of every partition of topic and returns
// the number of records compared.
func compareAll(t *testing.T, topic string, partitions int32) int {
	t.Helper()
	n := 0
	for p := range partitions {
		n += compareDumps(t, topic, p)
	}
	return n
}

// dumpLogs prints the clusters' and sidecars' logs when t fails.
func dumpLogs(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(60))
		}
	})
}

// waitSyncRounds waits until the metadata sync of mirror completed n more
// rounds of step on the raft leader (its last-success timestamp moved n
// times): the evidence a check that nothing changed waits for, instead of
// sleeping.
func waitSyncRounds(t *testing.T, mirror, step string, n int) {
	t.Helper()
	name := fmt.Sprintf("sidemirror_metadata_sync_last_success_timestamp_seconds{mirror=%q,step=%q}", mirror, step)
	last, moved := metricValue(leaderMetrics(t), name), 0
	wait.For(t, time.Minute, fmt.Sprintf("%d more rounds of the metadata sync's %s step of mirror %s", n, step, mirror), func() bool {
		if v := metricValue(leaderMetrics(t), name); v > last {
			last, moved = v, moved+1
		}
		return moved >= n
	})
}

// waitReconciledAfter waits until every running sidecar finished a
// reconcile pass (which also decides the automatic retries of FAILED
// partitions) after at: the evidence a check that a partition stays as it
// is waits for.
func waitReconciledAfter(t *testing.T, at time.Time) {
	t.Helper()
	const name = "sidemirror_reconcile_last_pass_timestamp_seconds"
	wait.For(t, time.Until(at)+time.Minute, fmt.Sprintf("every sidecar to reconcile after %s", at.Format(time.RFC3339Nano)), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range env.Sidecars.Sidecars() {
			if !s.Running() {
				continue
			}
			page, err := s.Metrics(ctx)
			if err != nil || metricValue(page, name) < float64(at.UnixNano())/1e9 {
				return false
			}
		}
		return true
	})
}
