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
	"github.com/sidemirror/sidemirror/protocol"
)

// env is the test bed of TestChaos; nil unless CHAOS=1 (make chaos), so
// that the package's unit tests run without clusters.
var env *testbed.Env

// multiHost reports whether env is the multi-host bed (the test runs as
// root) rather than the loopback bed.
var multiHost bool

// failoverTimeout is the sidecars' sidecar.failover.timeout.ms (its
// default).
const failoverTimeout = 15 * time.Second

// logDirMB is the size of each destination broker's tmpfs log directory on
// the multi-host bed: far more than a default-length run writes (7 MiB per
// broker in 4 minutes, seed 140), while a fill stays a moment's work.
const logDirMB = 512

// convergeWait bounds the wait for the destination to catch up after the
// last fault; a run that takes longer than 60 s fails anyway, the rest of
// the wait tells a slow convergence from a stuck partition.
const convergeWait = 3 * time.Minute

func TestMain(m *testing.M) {
	if os.Getenv("CHAOS") != "1" {
		os.Exit(m.Run())
	}
	opts := testbed.DefaultEnvOptions()
	opts.Source.Nodes = 2
	opts.Sidecars = true
	if os.Geteuid() == 0 {
		multiHost = true
		opts.MultiHost = true
		opts.Destination.LogDirTmpfsMB = logDirMB
	} else {
		fmt.Fprintln(os.Stderr, "chaos: not root: the loopback bed, without the host, source-cut and full-disk faults (the multi-host bed needs root)")
	}
	testbed.Main(m, opts, &env)
}

// loopbackKinds are the faults the loopback bed can inject: no hosts to cut
// off, no proxies in front of the source, no tmpfs log directories.
var loopbackKinds = []Kind{KillSidecar, KillRaftLeader, KillDestBroker, KillSourceBroker, FreezeSidecar, FreezeBroker, RestartAllSidecars}

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
		FailoverTimeout: failoverTimeout}
	bed := "multi-host"
	if !multiHost {
		topo.Kinds, bed = loopbackKinds, "loopback"
	}
	faults := Schedule(params.Seed, params.Duration, topo)
	t.Logf("chaos: CHAOS_SEED=%d CHAOS_DURATION=%s on the %s bed: %d faults (bed directory %s)", params.Seed, params.Duration, bed, len(faults), env.Dir)
	defer func() {
		if t.Failed() {
			t.Log(env.LogTails(80))
			keepLogDirs(t)
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
	r := Report{Seed: params.Seed, Duration: params.Duration, Faults: map[Kind]int{}}
	begin := time.Now()
	for i, f := range faults {
		time.Sleep(time.Until(begin.Add(f.At)))
		start := time.Now()
		t.Logf("%s fault %d/%d: %v", start.UTC().Format("15:04:05.000"), i+1, len(faults), f)
		note, err := inject(f)
		if err != nil {
			t.Fatalf("fault %v: %v", f, err)
		}
		r.Faults[f.Kind]++
		t.Logf("%s fault %d/%d undone after %s%s", time.Now().UTC().Format("15:04:05.000"), i+1, len(faults),
			time.Since(start).Round(time.Millisecond), note)
		for _, p := range restartExited() {
			p = fmt.Sprintf("after fault %d (%v): %s", i+1, f, p)
			t.Log(p)
			r.Problems = append(r.Problems, p)
		}
	}
	lastFault := time.Now()
	time.Sleep(5 * time.Second) // traffic after the last fault
	stats, err := w.Stop()
	stopped := time.Now()
	t.Logf("%s workload stopped (%s after the last fault; %d records were still buffered by its producers when it was told to stop)",
		stopped.UTC().Format("15:04:05.000"), stopped.Sub(lastFault).Round(time.Millisecond), stats.BufferedAtStop)
	if err != nil {
		t.Logf("workload errors (records not acknowledged end its numbering): %v", err)
	}
	r.Workload = stats

	all := []string{topics.Plain, topics.Txn, topics.Compacted}
	quiet := lastFault
	if stopped.After(quiet) {
		quiet = stopped
	}
	at, lagging, gone := converge(t, mirror, all, quiet, quiet.Add(convergeWait))
	r.Converged, r.SinceLastFault, r.Lagging = at.Sub(quiet), at.Sub(lastFault), lagging
	var plain [][]string
	for _, topic := range all {
		n := partitions(t, topic)
		for p := range n {
			name := fmt.Sprintf("%s-%d", topic, p)
			reason, stopped := gone[name]
			if repeated := stopped && RepeatedMarker(reason); repeated || topic == topics.Compacted {
				r.Records += compareDumps(t, &r, topic, p, repeated, topic == topics.Compacted)
				continue
			}
			// Aligned from the dumps (Align), the dumps taken between two
			// equal readings of the end offsets.
			var (
				src, dst Dumps
				a        Alignment
				problem  string
			)
			for try := 1; ; try++ {
				srcEnd, dstEnd := endsOf(t, topic, n, p)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				var err error
				src, dst, a, problem, err = alignPartition(ctx, topic, p, srcEnd, dstEnd)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if s, d := endsOf(t, topic, n, p); s == srcEnd && d == dstEnd {
					break
				} else if try == 3 {
					problem = fmt.Sprintf("end offsets kept moving while the checker dumped the partition (source %d then %d, destination %d then %d); %s", srcEnd, s, dstEnd, d, problem)
					break
				}
			}
			switch {
			case problem != "":
				r.Problems = append(r.Problems, name+": "+problem)
			case a.Shift > 0:
				r.Shifted = append(r.Shifted, a.Describe(name))
			}
			if topic == topics.Plain {
				plain = append(plain, dst.Committed)
			}
			r.Records += len(src.Uncommitted) + len(src.Committed)
		}
	}
	r.Duplicates, r.Gaps = SeqStats(plain, stats.Acked)
	r.Failed, _ = failures(t, mirror)
	for _, f := range r.Failed {
		if RepeatedMarker(gone[f]) {
			r.RepeatedMarker = append(r.RepeatedMarker, f+": "+gone[f])
		}
	}
	r.Problems = append(r.Problems, groupOffsetsAboveEnd(t, topics)...)
	if multiHost {
		for _, n := range env.Destination.Nodes() {
			if used, free, err := n.LogDirUsage(); err == nil {
				t.Logf("destination node %d: tmpfs log directory %d MiB used, %d MiB free", n.ID, used>>20, free>>20)
			}
		}
	}
	t.Log("\n" + r.String())
	fmt.Print(r.String())
	if !r.OK() {
		t.Fatal("the chaos run failed its checks (see the report)")
	}
}

// compareDumps compares topic-p's dumps at both isolation levels the way
// that does not align offsets: the compacted topic by its tables, and a
// partition stopped by a repeated marker (RepeatedMarker) up to its last
// record (StoppedPrefix). It adds what differs to r.Problems and returns
// the number of source records compared.
func compareDumps(t *testing.T, r *Report, topic string, p int32, repeated, compacted bool) (records int) {
	t.Helper()
	name := fmt.Sprintf("%s-%d", topic, p)
	for _, iso := range []string{"read_uncommitted", "read_committed"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		src, err := Kcat(ctx, env.Source, topic, p, iso)
		var dst []string
		if err == nil {
			dst, err = Kcat(ctx, env.Destination, topic, p, iso)
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if repeated {
			// It stopped behind the repeated markers: what it holds must
			// be the source's.
			var problem string
			if src, problem = StoppedPrefix(src, dst); problem != "" {
				r.Problems = append(r.Problems, fmt.Sprintf("%s %s: %s", name, iso, problem))
			}
		}
		d := Compare(src, dst)
		if compacted {
			d = CompareTables(Table(src), Table(dst))
		}
		if d != "" {
			r.Problems = append(r.Problems, fmt.Sprintf("%s %s: %s", name, iso, d))
		}
		records += len(src)
	}
	return records
}

// endsOf returns partition p's end offsets (high watermarks) on the source
// and the destination, as kcat's query mode reports them, trying a few
// times (kcatEnds fails while a restarted broker does not know the topic);
// -1 when it cannot tell.
func endsOf(t *testing.T, topic string, n, p int32) (src, dst int64) {
	t.Helper()
	src, dst = -1, -1
	for try := range 5 {
		if try > 0 {
			time.Sleep(time.Second)
		}
		s, d := kcatEnds(t, env.Source, topic, n, "read_uncommitted"), kcatEnds(t, env.Destination, topic, n, "read_uncommitted")
		if s != nil && d != nil {
			return s[p], d[p]
		}
	}
	return src, dst
}

// alignPartition dumps topic-p on both clusters at both isolation levels
// with kcat and aligns the dumps (Align) with the end offsets srcEnd and
// dstEnd. A shift it finds is confirmed with the control batches Kafka's
// DumpLogSegments reads from a replica's log on each side (Confirm): each
// extra destination offset must be a control batch right behind one of the
// same producer ID, epoch and type. err is a dump that failed.
func alignPartition(ctx context.Context, topic string, p int32, srcEnd, dstEnd int64) (src, dst Dumps, a Alignment, problem string, err error) {
	if srcEnd < 0 || dstEnd < 0 {
		return src, dst, a, "end offsets unknown (kcat -Q failed)", nil
	}
	for _, side := range []struct {
		c *testbed.Cluster
		d *Dumps
	}{{env.Source, &src}, {env.Destination, &dst}} {
		if side.d.Uncommitted, err = Kcat(ctx, side.c, topic, p, "read_uncommitted"); err != nil {
			return src, dst, a, "", err
		}
		if side.d.Committed, err = Kcat(ctx, side.c, topic, p, "read_committed"); err != nil {
			return src, dst, a, "", err
		}
	}
	if a, problem = Align(src, dst, srcEnd, dstEnd); problem != "" || len(a.Steps) == 0 {
		return src, dst, a, problem, nil
	}
	srcControls, err1 := controlBatches(ctx, env.Source, topic, p, srcEnd)
	dstControls, err2 := controlBatches(ctx, env.Destination, topic, p, dstEnd)
	if err := errors.Join(err1, err2); err != nil {
		return src, dst, a, fmt.Sprintf("the dumps show a shift of %d that the control batches cannot confirm: %v", a.Shift, err), nil
	}
	return src, dst, a, a.Confirm(srcControls, dstControls), nil
}

// controlBatches reads the control batches of topic-p on c with Kafka's
// DumpLogSegments (--deep-iteration), from the log directory of the first
// of c's nodes whose replica holds every offset below end (Kafka's tool
// reads the segment files; the nodes' log directories are the test's).
func controlBatches(ctx context.Context, c *testbed.Cluster, topic string, p int32, end int64) (map[int64]ControlBatch, error) {
	var tried []string
	for _, n := range c.Nodes() {
		segments, err := filepath.Glob(filepath.Join(n.DataDir(), fmt.Sprintf("%s-%d", topic, p), "*.log"))
		if err != nil || len(segments) == 0 {
			continue
		}
		slices.Sort(segments) // the names are base offsets, zero-padded
		cmd := exec.CommandContext(ctx, "java", "-cp", env.Dist.Classpath(), "kafka.tools.DumpLogSegments",
			"--deep-iteration", "--files", strings.Join(segments, ","))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			tried = append(tried, fmt.Sprintf("node %d: %v: %.300s", n.ID, err, errb.String()))
			continue
		}
		controls, last, err := ParseLogDump(out.String())
		if err != nil {
			tried = append(tried, fmt.Sprintf("node %d: %v", n.ID, err))
			continue
		}
		if last < end {
			tried = append(tried, fmt.Sprintf("node %d's log ends at %d", n.ID, last))
			continue
		}
		return controls, nil
	}
	return nil, fmt.Errorf("DumpLogSegments of %s-%d on the %s: no replica's log holds the offsets below %d (%s)",
		topic, p, c.Name(), end, strings.Join(tried, "; "))
}

// inject applies f and undoes it after its hold; note says what happened
// beyond the fault itself (which sidecar led raft, whether a broker with a
// full disk stopped).
func inject(f Fault) (note string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sidecars := env.Sidecars.Sidecars()
	switch f.Kind {
	case KillSidecar, KillRaftLeader:
		s := sidecars[f.Target]
		if f.Kind == KillRaftLeader {
			if l := raftLeader(ctx); l != nil {
				s, note = l, fmt.Sprintf(" (raft leader: sidecar %d)", l.BrokerID)
			} else {
				note = fmt.Sprintf(" (no raft leader found: sidecar %d)", s.BrokerID)
			}
		}
		s.Kill()
		time.Sleep(f.Hold)
		return note, s.Start(ctx)
	case RestartAllSidecars:
		env.Sidecars.KillAll()
		time.Sleep(f.Hold)
		return "", env.Sidecars.StartStopped(ctx)
	case FreezeSidecar:
		s := sidecars[f.Target]
		s.Freeze()
		time.Sleep(f.Hold)
		s.Thaw()
		return "", nil
	case FreezeBroker:
		n := brokerTarget(f.Target)
		n.Freeze()
		time.Sleep(f.Hold)
		n.Thaw()
		return fmt.Sprintf(" (%s)", describeNode(n)), nil
	case KillDestBroker, KillSourceBroker:
		n := env.Destination.Nodes()[f.Target]
		if f.Kind == KillSourceBroker {
			n = env.Source.Nodes()[f.Target]
		}
		n.Kill()
		time.Sleep(f.Hold)
		return "", n.Start(ctx)
	case IsolateHost:
		if !multiHost {
			break
		}
		h := env.Destination.Nodes()[f.Target].Host()
		if err := h.Isolate(); err != nil {
			return "", err
		}
		time.Sleep(f.Hold)
		return fmt.Sprintf(" (host %s)", h.Name), h.Reconnect()
	case CutSource:
		if !multiHost {
			break
		}
		if err := env.CutSource(); err != nil {
			return "", err
		}
		time.Sleep(f.Hold)
		return "", env.RestoreSource()
	case FillDisk:
		if !multiHost {
			break
		}
		n := env.Destination.Nodes()[f.Target]
		written, err := n.FillLogDir()
		if err != nil {
			return "", err
		}
		time.Sleep(f.Hold)
		if err := n.FreeLogDir(); err != nil {
			return "", err
		}
		note = fmt.Sprintf(" (destination node %d: %d MiB written, the broker kept running)", n.ID, written>>20)
		// A broker whose only log directory failed halts; give one that
		// is on its way out a moment to go.
		for range 10 {
			if !n.Running() {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if !n.Running() {
			note = fmt.Sprintf(" (destination node %d: %d MiB written, the broker stopped and was started again)", n.ID, written>>20)
			return note, n.Start(ctx)
		}
		return note, nil
	}
	return "", fmt.Errorf("fault kind %s is not supported on the loopback bed", f.Kind)
}

// keepLogDirs copies every destination node's tmpfs log directory beside
// it (the tmpfs goes with the bed, the bed's directory stays after a
// failure), so that a failed run's logs can be read with Kafka's
// DumpLogSegments.
func keepLogDirs(t *testing.T) {
	if !multiHost {
		return
	}
	for _, n := range env.Destination.Nodes() {
		src := n.DataDir()
		dst := filepath.Join(filepath.Dir(n.LogPath()), fmt.Sprintf("node-%d-data-at-failure", n.ID))
		if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
			t.Logf("keeping %s: %v: %s", src, err, out)
			continue
		}
		t.Logf("destination node %d's log directory kept in %s", n.ID, dst)
	}
}

// restartExited starts again every broker and sidecar that exited on its
// own (every fault is undone when inject returns, so none should be down)
// and describes each one.
func restartExited() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out []string
	for _, c := range env.Clusters() {
		for _, n := range c.Nodes() {
			if !n.Running() {
				msg := fmt.Sprintf("%s node %d exited on its own (log %s)", c.Name(), n.ID, n.LogPath())
				if err := n.Start(ctx); err != nil {
					msg += fmt.Sprintf("; starting it again failed: %v", err)
				}
				out = append(out, msg)
			}
		}
	}
	for _, s := range env.Sidecars.Sidecars() {
		if !s.Running() {
			msg := fmt.Sprintf("sidecar %d exited on its own (log %s)", s.BrokerID, s.LogPath())
			if err := s.Start(ctx); err != nil {
				msg += fmt.Sprintf("; starting it again failed: %v", err)
			}
			out = append(out, msg)
		}
	}
	return out
}

// brokerTarget returns the node a FreezeBroker fault aims at: the source's
// nodes first, then the destination's.
func brokerTarget(i int) *testbed.Node {
	if src := env.Source.Nodes(); i < len(src) {
		return src[i]
	}
	return env.Destination.Nodes()[i-len(env.Source.Nodes())]
}

func describeNode(n *testbed.Node) string {
	for _, c := range env.Clusters() {
		if c.Node(n.ID) == n {
			return fmt.Sprintf("%s node %d", c.Name(), n.ID)
		}
	}
	return fmt.Sprintf("node %d", n.ID)
}

// raftLeader returns the sidecar that reports raft leadership, waiting up
// to 15 s for one (an election may be under way after the previous
// fault), or nil.
func raftLeader(ctx context.Context) *testbed.Sidecar {
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, s := range env.Sidecars.Sidecars() {
			if page, err := s.Metrics(ctx); err == nil && strings.Contains(page, "\nsidemirror_raft_leader 1\n") {
				return s
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
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
		// --describe exits 3 when it shows FAILED partitions: its output
		// is what the caller wants.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || !slices.Contains(args, "--describe") {
			t.Fatalf("kafka-cluster-mirrors %v: %v\n%s%s", args, err, out.String(), errb.String())
		}
	}
	return out.String()
}

func mirrorConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(path, []byte("bootstrap.servers="+env.Source.RemoteBootstrap()+"\n"), 0o600); err != nil {
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
		// Tombstones stay 10 minutes after cleaning: a mirror is a reader,
		// and a reader that lags more than delete.retention.ms may never see
		// a tombstone (Kafka's bound), so the destination would keep a key
		// the source deleted; faults make the mirror lag tens of seconds.
		{topics.Compacted, 3, map[string]*string{"cleanup.policy": str("compact"), "segment.ms": str("5000"),
			"min.cleanable.dirty.ratio": str("0.01"), "min.compaction.lag.ms": str("0"), "delete.retention.ms": str("600000")}},
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
// query mode reports it for isolation (read_uncommitted: the high
// watermark; read_committed: the last stable offset); nil when kcat fails
// (a restarted broker may not know the topic yet).
func kcatEnds(t *testing.T, c *testbed.Cluster, topic string, n int32, isolation string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(c.KcatArgs(testbed.Admin), "-Q", "-X", "isolation.level="+isolation)
	for p := range n {
		args = append(args, "-t", fmt.Sprintf("%s:%d:-1", topic, p))
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if took := time.Since(start); took > 5*time.Second || err != nil {
		t.Logf("kcat -Q %s on the %s (%s) took %s: %v %s", topic, c.Name(), isolation, took.Round(time.Millisecond), err, strings.TrimSpace(stderr.String()))
	}
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
// for every topic, both the high watermarks and the last stable offsets,
// or until deadline, and returns when they were first seen equal; at the
// deadline it returns the partitions that still differ. Partitions FAILED
// for good (no automatic retry gets them out) are left out of the wait and
// returned in gone, "topic-partition" to the reason, from when they were
// first seen. A partition whose destination ends exceed the source's by
// the same d > 0 at both isolation levels counts as converged when the
// checker verifies, from the dumps and the control batches
// (alignPartition), that its destination is the source's shifted by d
// through markers a destination coordinator wrote twice; the verdict is
// kept until its end offsets change. While it waits it logs what differs
// every 10 s, and once, after 30 s, the mirror's describe, to tell a slow
// partition from a stuck one.
func converge(t *testing.T, mirror string, topics []string, since, deadline time.Time) (at time.Time, lagging []string, gone map[string]string) {
	t.Helper()
	counts := map[string]int32{}
	for _, topic := range topics {
		counts[topic] = partitions(t, topic)
	}
	var lastLog time.Time
	described := false
	last := readActivity(context.Background(), env.Sidecars.Sidecars())
	gone = map[string]string{}
	// shifts are the verdicts on destinations whose ends exceed the
	// source's, with the ends they were reached at.
	type shiftVerdict struct {
		ends    [4]int64 // source and destination, read_uncommitted then read_committed
		problem string
	}
	shifts := map[string]shiftVerdict{}
	for {
		now := time.Now()
		if now.Sub(lastLog) >= 10*time.Second {
			_, permanent := failures(t, mirror)
			for name, reason := range permanent {
				if _, seen := gone[name]; !seen {
					t.Logf("%s %s FAILED for good, left out of the wait: %s", now.UTC().Format("15:04:05.000"), name, reason)
					gone[name] = reason
				}
			}
		}
		lagging = nil
		for _, topic := range topics {
			n := counts[topic]
			isolations := []string{"read_uncommitted", "read_committed"}
			var src, dst [2]map[int32]int64
			known := true
			for i, iso := range isolations {
				src[i], dst[i] = kcatEnds(t, env.Source, topic, n, iso), kcatEnds(t, env.Destination, topic, n, iso)
				if src[i] == nil || dst[i] == nil {
					lagging = append(lagging, fmt.Sprintf("%s (%s): end offsets unknown (kcat -Q failed on the source: %v, on the destination: %v)", topic, iso, src[i] == nil, dst[i] == nil))
					known = false
				}
			}
			if !known {
				continue
			}
			for p := range n {
				name := fmt.Sprintf("%s-%d", topic, p)
				if _, stopped := gone[name]; stopped {
					continue
				}
				ends := [4]int64{src[0][p], dst[0][p], src[1][p], dst[1][p]}
				if ends[0] == ends[1] && ends[2] == ends[3] {
					continue
				}
				if d := ends[1] - ends[0]; d > 0 && ends[3]-ends[2] == d {
					v, seen := shifts[name]
					if !seen || v.ends != ends {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
						_, _, a, problem, err := alignPartition(ctx, topic, p, ends[0], ends[1])
						cancel()
						if err != nil {
							problem = err.Error()
						}
						v = shiftVerdict{ends: ends, problem: problem}
						shifts[name] = v
						if problem == "" {
							t.Logf("%s %s: destination ends %d above the source's, verified: %s", time.Now().UTC().Format("15:04:05.000"), name, d, a.Describe(name))
						}
					}
					if v.problem == "" {
						continue
					}
					lagging = append(lagging, fmt.Sprintf("%s destination ends %d above the source's (%d, %d), not a shift the checker verifies: %s", name, d, ends[0], ends[2], v.problem))
					continue
				}
				for i, iso := range isolations {
					if dst[i][p] != src[i][p] {
						lagging = append(lagging, fmt.Sprintf("%s (%s) source end %d destination end %d", name, iso, src[i][p], dst[i][p]))
					}
				}
			}
		}
		if len(lagging) == 0 {
			return now, nil, gone
		}
		if now.After(deadline) {
			return now, lagging, gone
		}
		if now.Sub(lastLog) >= 10*time.Second {
			t.Logf("%s %s after the last fault, not converged: %s", now.UTC().Format("15:04:05.000"), now.Sub(since).Round(time.Second), strings.Join(lagging, "; "))
			cur := readActivity(context.Background(), env.Sidecars.Sidecars())
			t.Logf("sidecars meanwhile:%s", cur.since(last))
			last, lastLog = cur, now
		}
		if !described && now.Sub(since) > 30*time.Second {
			described = true
			t.Logf("describe after %s:\n%s", now.Sub(since).Round(time.Second), cli(t, "--describe", "--mirror", mirror))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// failures reads the mirror's describe: every FAILED partition
// ("topic-partition"), and those FAILED for good (no automatic retry) with
// their reasons.
func failures(t *testing.T, mirror string) (failed []string, permanent map[string]string) {
	t.Helper()
	var resp protocol.DescribeClusterMirrorsResponse
	if err := json.Unmarshal([]byte(cli(t, "--describe", "--mirror", mirror, "--json")), &resp); err != nil {
		t.Fatal(err)
	}
	permanent = map[string]string{}
	for _, m := range resp.Mirrors {
		for _, tp := range m.Topics {
			for _, pd := range tp.Partitions {
				if pd.State != "FAILED" {
					continue
				}
				name := fmt.Sprintf("%s-%d", tp.TopicName, pd.PartitionIndex)
				failed = append(failed, name)
				if pd.NonRetryable {
					permanent[name] = ""
					if pd.LastError != nil {
						permanent[name] = *pd.LastError
					}
				}
			}
		}
	}
	return failed, permanent
}

// groupOffsetsAboveEnd describes the workload's group on the destination
// with Kafka's kafka-consumer-groups tool and reports every synced offset
// above the partition's end offset. It compares with the destination's own
// end, never with the source's offsets, so a partition shifted by repeated
// markers needs no allowance (a synced offset translated by the shift, the
// source's plus k, is at most the destination's end, the source's plus k);
// and the group reads the plain topic, which has no markers to repeat.
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
