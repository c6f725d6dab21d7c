package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

// env is the test bed of TestChaos; nil unless CHAOS=1 (make chaos), so
// that the package's unit tests run without clusters.
var env *testbed.Env

// failoverTimeout is the sidecars' sidecar.failover.timeout.ms (its
// default).
const failoverTimeout = 15 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv("CHAOS") != "1" {
		os.Exit(m.Run())
	}
	opts := testbed.DefaultEnvOptions()
	opts.Source.Nodes = 2
	opts.Sidecars = true
	testbed.Main(m, opts, &env)
}

// loopbackKinds are the faults the loopback bed can inject.
var loopbackKinds = []Kind{KillSidecar, KillRaftLeader, KillDestBroker, KillSourceBroker, FreezeSidecar, RestartAllSidecars}

// TestChaos runs the workload through a mirror while the schedule's faults
// hit it, then checks the destination with kcat and Kafka's tools.
func TestChaos(t *testing.T) {
	if env == nil {
		t.Skip("set CHAOS=1 (make chaos) to run the chaos test; CHAOS_SEED and CHAOS_DURATION choose the run")
	}
	params, err := ParamsFromEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	topo := Topology{SourceNodes: len(env.Source.Nodes()), DestinationNodes: len(env.Destination.Nodes()),
		FailoverTimeout: failoverTimeout, Kinds: loopbackKinds}
	faults := Schedule(params.Seed, params.Duration, topo)
	t.Logf("chaos: CHAOS_SEED=%d CHAOS_DURATION=%s: %d faults", params.Seed, params.Duration, len(faults))
	defer func() {
		if t.Failed() {
			t.Log(env.LogTails(80))
		}
	}()

	const mirror = "chaos"
	topics := Topics{Plain: "chaos-plain", Txn: "chaos-txn", Compacted: "chaos-compacted", Group: "chaos-group"}
	createTopics(t, topics)
	cli(t, "--create", "--mirror", mirror, "--mirror-config", mirrorConfig(t))
	cli(t, "--start", "--topics", topics.Plain+","+topics.Txn+","+topics.Compacted, "--mirror", mirror)
	w, err := StartWorkload(env.Source.ClientOptions(testbed.Admin), topics, params.Seed)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	for i, f := range faults {
		time.Sleep(time.Until(begin.Add(f.At)))
		t.Logf("fault %d/%d: %v", i+1, len(faults), f)
		if err := inject(f); err != nil {
			t.Fatalf("fault %v: %v", f, err)
		}
	}
	lastFault := time.Now()
	time.Sleep(5 * time.Second) // traffic after the last fault
	stats, err := w.Stop()
	if err != nil {
		t.Logf("workload errors (records not acknowledged end its numbering): %v", err)
	}

	r := Report{Seed: params.Seed, Duration: params.Duration, Faults: Summary(faults)}
	all := []string{topics.Plain, topics.Txn, topics.Compacted}
	r.Converged = converge(t, all, 5*time.Minute).Sub(lastFault)
	var plain [][]string
	for _, topic := range all {
		for p := range partitions(t, topic) {
			for _, iso := range []string{"read_uncommitted", "read_committed"} {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				src, err := Kcat(ctx, env.Source.KcatArgs(testbed.Admin), topic, p, iso)
				if err == nil {
					var dst []string
					dst, err = Kcat(ctx, env.Destination.KcatArgs(testbed.Admin), topic, p, iso)
					d := Compare(src, dst)
					if topic == topics.Compacted {
						d = CompareTables(Table(src), Table(dst))
					}
					if err == nil && d != "" {
						r.Problems = append(r.Problems, fmt.Sprintf("%s-%d %s: %s", topic, p, iso, d))
					}
					if topic == topics.Plain && iso == "read_committed" {
						plain = append(plain, dst)
					}
					r.Records += len(src)
				}
				cancel()
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	r.Duplicates, r.Gaps = SeqStats(plain, stats.Acked)
	r.Failed = failedPartitions(t, mirror)
	r.Problems = append(r.Problems, groupOffsetsAboveEnd(t, topics)...)
	t.Logf("workload: %+v", stats)
	t.Log("\n" + r.String())
	fmt.Print(r.String())
	if !r.OK() {
		t.Fatal("the chaos run failed its checks (see the report)")
	}
}

// inject applies f and undoes it after its hold.
func inject(f Fault) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sidecars := env.Sidecars.Sidecars()
	switch f.Kind {
	case KillSidecar, KillRaftLeader:
		s := sidecars[f.Target]
		if f.Kind == KillRaftLeader {
			if s = raftLeader(ctx); s == nil {
				s = sidecars[f.Target]
			}
		}
		s.Kill()
		time.Sleep(f.Hold)
		return s.Start(ctx)
	case RestartAllSidecars:
		for _, s := range sidecars {
			s.Kill()
		}
		time.Sleep(f.Hold)
		for _, s := range sidecars {
			if err := s.Start(ctx); err != nil {
				return err
			}
		}
		return nil
	case FreezeSidecar:
		s := sidecars[f.Target]
		s.Freeze()
		time.Sleep(f.Hold)
		s.Thaw()
		return nil
	case KillDestBroker, KillSourceBroker:
		n := env.Destination.Nodes()[f.Target]
		if f.Kind == KillSourceBroker {
			n = env.Source.Nodes()[f.Target]
		}
		n.Kill()
		time.Sleep(f.Hold)
		return n.Start(ctx)
	}
	return fmt.Errorf("fault kind %s is not supported on the loopback bed", f.Kind)
}

// raftLeader returns the sidecar that reports raft leadership, or nil.
func raftLeader(ctx context.Context) *testbed.Sidecar {
	for _, s := range env.Sidecars.Sidecars() {
		if page, err := s.Metrics(ctx); err == nil && strings.Contains(page, "\nsidemirror_raft_leader 1\n") {
			return s
		}
	}
	return nil
}

// cli runs kafka-cluster-mirrors against the sidecars and returns stdout.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Bin.CLI, append([]string{"--bootstrap-server", env.Sidecars.AdminBootstrap()}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		// --describe exits 2 when it shows FAILED partitions: its output
		// is what the caller wants.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !slices.Contains(args, "--describe") {
			t.Fatalf("kafka-cluster-mirrors %v: %v\n%s%s", args, err, out.String(), errb.String())
		}
	}
	return out.String()
}

func mirrorConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(path, []byte("bootstrap.servers="+env.Source.Bootstrap()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func createTopics(t *testing.T, topics Topics) {
	t.Helper()
	cl, err := env.Source.NewClient(testbed.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		n       int32
		configs map[string]*string
	}{
		{topics.Plain, 6, nil},
		{topics.Txn, 3, nil},
		{topics.Compacted, 3, map[string]*string{"cleanup.policy": str("compact"), "segment.ms": str("5000"),
			"min.cleanable.dirty.ratio": str("0.01"), "min.compaction.lag.ms": str("0"), "delete.retention.ms": str("10000")}},
	} {
		resp, err := adm.CreateTopic(ctx, tc.n, -1, tc.configs, tc.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", tc.name, err)
		}
	}
}

// partitions returns how many partitions topic has on the source, as
// kcat's metadata listing tells.
func partitions(t *testing.T, topic string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", append(env.Source.KcatArgs(testbed.Admin), "-L", "-J", "-t", topic)...).Output()
	if err != nil {
		t.Fatalf("kcat -L -t %s: %v", topic, err)
	}
	var md struct {
		Topics []struct {
			Topic      string            `json:"topic"`
			Partitions []json.RawMessage `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(out, &md); err != nil || len(md.Topics) != 1 {
		t.Fatalf("kcat -L -J -t %s printed %q: %v", topic, out, err)
	}
	return int32(len(md.Topics[0].Partitions))
}

// kcatEnds returns the end offset of partitions 0..n-1 of topic, as kcat's
// query mode reports it; nil when kcat fails (a restarted broker may not
// know the topic yet).
func kcatEnds(t *testing.T, c *testbed.Cluster, topic string, n int32) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(c.KcatArgs(testbed.Admin), "-Q")
	for p := range n {
		args = append(args, "-t", fmt.Sprintf("%s:%d:-1", topic, p))
	}
	out, err := exec.CommandContext(ctx, "kcat", args...).Output()
	if err != nil {
		return nil
	}
	ends := map[int32]int64{}
	for line := range strings.Lines(string(out)) {
		// "<topic> [<partition>] offset <n>"
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != topic || f[2] != "offset" {
			continue
		}
		p, err1 := strconv.Atoi(strings.Trim(f[1], "[]"))
		o, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 == nil && err2 == nil {
			ends[int32(p)] = o
		}
	}
	if len(ends) != int(n) {
		return nil
	}
	return ends
}

// converge waits until the destination's end offsets equal the source's
// for every topic and returns when that was first seen.
func converge(t *testing.T, topics []string, d time.Duration) time.Time {
	t.Helper()
	counts := map[string]int32{}
	for _, topic := range topics {
		counts[topic] = partitions(t, topic)
	}
	var at time.Time
	testwait.Every(500*time.Millisecond).For(t, d, "the destination's end offsets to equal the source's", func() bool {
		now := time.Now()
		for _, topic := range topics {
			n := counts[topic]
			src, dst := kcatEnds(t, env.Source, topic, n), kcatEnds(t, env.Destination, topic, n)
			if src == nil || dst == nil {
				return false
			}
			for p, o := range src {
				if dst[p] != o {
					return false
				}
			}
		}
		at = now
		return true
	})
	return at
}

// failedPartitions lists the mirror's FAILED partitions in describe.
func failedPartitions(t *testing.T, mirror string) []string {
	t.Helper()
	var resp protocol.DescribeClusterMirrorsResponse
	if err := json.Unmarshal([]byte(cli(t, "--describe", "--mirror", mirror, "--json")), &resp); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range resp.Mirrors {
		for _, tp := range m.Topics {
			for _, pd := range tp.Partitions {
				if pd.State == "FAILED" {
					out = append(out, fmt.Sprintf("%s-%d", tp.TopicName, pd.PartitionIndex))
				}
			}
		}
	}
	return out
}

// groupOffsetsAboveEnd describes the workload's group on the destination
// with Kafka's kafka-consumer-groups tool and reports every synced offset
// above the partition's end offset.
func groupOffsetsAboveEnd(t *testing.T, topics Topics) []string {
	t.Helper()
	props := filepath.Join(t.TempDir(), "client.properties")
	if err := env.Destination.WriteClientProperties(props, testbed.Admin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-cp", env.Dist.Classpath(), "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
		"--bootstrap-server", env.Destination.Bootstrap(), "--command-config", props, "--describe", "--group", topics.Group)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return []string{fmt.Sprintf("kafka-consumer-groups --describe --group %s on the destination: %v: %s", topics.Group, err, errb.String())}
	}
	var problems []string
	for line := range strings.Lines(out.String()) {
		// GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != topics.Plain {
			continue
		}
		cur, err1 := strconv.ParseInt(f[3], 10, 64)
		end, err2 := strconv.ParseInt(f[4], 10, 64)
		if err1 == nil && err2 == nil && cur > end {
			problems = append(problems, fmt.Sprintf("group %s: %s-%s synced offset %d above the destination end %d", topics.Group, f[1], f[2], cur, end))
		}
	}
	return problems
}
