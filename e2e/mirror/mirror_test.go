package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestExactness mirrors a topic of six partitions holding 1,000,000 records
// written with every compression codec, headers, null keys and values and
// values from 0 B to 900 KB, half of them before mirroring starts and half
// while it runs; every partition's kcat dump must be identical on both
// clusters (offset, timestamp, key, value, headers).
func TestExactness(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions, total = "exact", "exact", 6, 1_000_000
	createSourceTopic(t, topic, partitions, nil)
	produceVariety(t, env.Source, topic, total/2, 1)

	createMirror(t, mirror)
	cpu0 := sidecarCPU(t)
	start := time.Now()
	out := mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	if want := "Started 1 mirror topic(s) in mirror exact: [exact]\n"; out != want {
		t.Fatalf("start printed %q, want %q", out, want)
	}
	produceVariety(t, env.Source, topic, total/2, 2)
	waitCaughtUp(t, mirror, topic, 15*time.Minute)
	elapsed, cpu := time.Since(start), sidecarCPU(t)-cpu0
	bytes := mirroredBytes(t, mirror)
	t.Logf("mirrored %d bytes in %v: %.1f MB/s; sidecars used %.1f CPU seconds, %.1f CPU s/GB",
		bytes, elapsed.Round(time.Millisecond), float64(bytes)/1e6/elapsed.Seconds(), cpu, cpu/(float64(bytes)/1e9))

	n := compareAll(t, topic, partitions)
	if n != total {
		t.Fatalf("compared %d records, want %d", n, total)
	}
}

// TestNoRecompression compares raw fetches of the mirrored topic from both
// clusters: every compressed batch's attributes, timestamps and records
// section must be byte-identical, which is only possible if the sidecar
// never decompressed or recompressed them. The one exception is the
// default coalescing of small batches: a destination batch may span
// several whole source batches, each smaller than coalesceSmallBytes, of
// its codec (the record comparisons of the other tests cover its records).
func TestNoRecompression(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "raw", "raw"
	createSourceTopic(t, topic, 2, nil)
	produceVariety(t, env.Source, topic, 50_000, 3)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 5*time.Minute)

	compressed := map[int16]int{} // byte-identical batches per compression codec
	coalesced := 0
	for p := range int32(2) {
		src := rawBatches(t, env.Source, topic, p)
		dst := rawBatches(t, env.Destination, topic, p)
		pairs, n := matchBatches(t, fmt.Sprintf("partition %d", p), src, dst)
		for _, sd := range pairs {
			if !sameBatchContent(sd[0], sd[1]) {
				t.Fatalf("partition %d: batch at %d differs between the clusters", p, sd[0].base)
			}
			compressed[sd[0].codec]++
		}
		coalesced += n
	}
	for codec, name := range map[int16]string{1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"} {
		if compressed[codec] == 0 {
			t.Fatalf("no %s batch was compared (batches per codec: %v)", name, compressed)
		}
	}
	t.Logf("batches byte-identical per codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd): %v; small source batches coalesced: %d", compressed, coalesced)
}

// TestLeadingGap deletes the head of the source partitions before mirroring
// starts: the destination's log start offsets and every remaining record
// must match the source's.
func TestLeadingGap(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "gap", "gap"
	createSourceTopic(t, topic, 2, nil)
	produceVariety(t, env.Source, topic, 20_000, 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1234})
	offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 5000})
	res, err := kadm.NewClient(newClient(t, env.Source, testbed.Admin)).DeleteRecords(ctx, offs)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("delete records on the source: %v", err)
	}
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 5*time.Minute)

	srcStart, dstStart := startOffsets(t, env.Source, topic), startOffsets(t, env.Destination, topic)
	if srcStart[0] != 1234 || srcStart[1] != 5000 {
		t.Fatalf("source log start offsets %v, want 1234 and 5000", srcStart)
	}
	for p, o := range srcStart {
		if dstStart[p] != o {
			t.Fatalf("partition %d: destination log start offset %d, source %d", p, dstStart[p], o)
		}
	}
	compareAll(t, topic, 2)
}

// TestReadOnly checks that an ordinary user cannot write to a mirror topic
// and can still read it.
func TestReadOnly(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, n = "readonly", "readonly", 100
	createSourceTopic(t, topic, 1, nil)
	produceVariety(t, env.Source, topic, n, 5)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := newClient(t, env.Destination, testbed.Alice, kgo.DefaultProduceTopic(topic),
		kgo.RecordRetries(1), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("not allowed")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's write to a mirror topic returned %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	read := 0
	for read < n {
		fs := alice.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("alice cannot read the mirror topic: %v", err)
		}
		read += fs.NumRecords()
	}
	if end := endOffsets(t, env.Destination, topic)[0]; end != n {
		t.Fatalf("mirror topic holds %d records, want %d: a write got through", end, n)
	}
}

// TestFaults kills a sidecar mid-copy, restarts a destination broker and
// moves a source partition's leadership while records keep coming; the
// dumps must still match: no loss, no duplicates.
func TestFaults(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "faults", "faults", 3
	createSourceTopic(t, topic, partitions, nil)
	produceVariety(t, env.Source, topic, 200_000, 6)
	createMirror(t, mirror)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// kill -9 a sidecar mid-copy, then restart it.
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	victim := env.Sidecars.Sidecar(2)
	wait.For(t, time.Minute, "the copy to begin on the victim's partitions", func() bool {
		if sumValues(endOffsets(t, env.Destination, topic)) == 0 {
			return false
		}
		for _, owner := range owners(t, mirror, topic) {
			if owner == victim.BrokerID {
				return true
			}
		}
		return false
	})
	victim.Kill()
	if end := sumValues(endOffsets(t, env.Destination, topic)); end >= 200_000 {
		t.Fatalf("the copy had finished (%d records) when sidecar %d was killed: not a kill mid-copy", end, victim.BrokerID)
	}
	if err := victim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, mirror, topic, 5*time.Minute)
	mustCompareAll(t, "after kill -9 of a sidecar", topic, partitions, 200_000)

	// Restart a destination broker while records arrive: leadership moves
	// away and comes back.
	node := env.Destination.Node(3)
	if err := node.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	produceVariety(t, env.Source, topic, 20_000, 7)
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	electPreferred(t, env.Destination, topic)
	produceVariety(t, env.Source, topic, 20_000, 8)
	waitCaughtUp(t, mirror, topic, 5*time.Minute)
	mustCompareAll(t, "after a destination broker restart", topic, partitions, 240_000)

	// Source leader election: stop the leader of partition 0, write, bring
	// it back and move leadership back to it.
	leader := sourceLeader(t, topic, 0)
	sn := env.Source.Node(leader)
	if err := sn.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	produceVariety(t, env.Source, topic, 20_000, 9)
	if err := sn.Start(ctx); err != nil {
		t.Fatal(err)
	}
	electPreferred(t, env.Source, topic)
	produceVariety(t, env.Source, topic, 20_000, 10)
	waitCaughtUp(t, mirror, topic, 5*time.Minute)

	mustCompareAll(t, "after a source leader election", topic, partitions, 280_000)
}

// mustCompareAll compares the dumps of every partition of topic on both
// clusters and checks that they hold want records.
func mustCompareAll(t *testing.T, when, topic string, partitions int32, want int) {
	t.Helper()
	if n := compareAll(t, topic, partitions); n != want {
		t.Fatalf("%s: compared %d records, want %d", when, n, want)
	}
}

// TestRaftLeaderFailover kills the raft leader's sidecar: the other two
// elect a new leader and keep serving admin requests, and the restarted
// sidecar catches up with what happened meanwhile.
func TestRaftLeaderFailover(t *testing.T) {
	dumpLogs(t)
	leader := raftLeader(t)
	leader.Kill()
	var others []string
	for _, s := range env.Sidecars.Sidecars() {
		if s != leader {
			others = append(others, s.AdminAddr)
		}
	}
	bootstrap := strings.Join(others, ",")
	var r cliResult
	wait.For(t, time.Minute, "the other sidecars to accept a new mirror", func() bool {
		r = cliAt(t, bootstrap, "--create", "--mirror", "after-failover", "--mirror-config", mirrorConfigFile(t, nil))
		return r.Code == 0 || strings.Contains(r.Stderr, "already exists")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := leader.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Minute, "the restarted sidecar to know the new mirror", func() bool {
		r := cliAt(t, leader.AdminAddr, "--list")
		return r.Code == 0 && strings.Contains(r.Stdout, "after-failover")
	})
}

// TestBadInput sends invalid requests: each gets one clear error and
// changes nothing.
func TestBadInput(t *testing.T) {
	dumpLogs(t)
	createMirror(t, "taken")
	// What a bad request must not change: the mirrors, and the config and
	// patterns of the mirror the requests name.
	snapshot := func() string {
		return mustCLI(t, "--list") + mustCLI(t, "--describe", "--mirror", "taken", "--json")
	}
	before := snapshot()
	noBootstrap := mirrorConfigFile(t, nil)
	writeFile(t, noBootstrap, "security.protocol=PLAINTEXT\n")
	unreachable := mirrorConfigFile(t, nil)
	writeFile(t, unreachable, "bootstrap.servers=127.0.0.1:1\n")
	good := mirrorConfigFile(t, nil)
	cases := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"empty name", []string{"--create", "--mirror", "", "--mirror-config", good}, "--create requires --mirror"},
		{"name too long", []string{"--create", "--mirror", strings.Repeat("m", 250), "--mirror-config", good}, "is 250 characters long; the limit is 249"},
		{"illegal characters", []string{"--create", "--mirror", "bad/name", "--mirror-config", good}, `"bad/name" contains the illegal character '/'`},
		{"ends with .stopped", []string{"--create", "--mirror", "m.stopped", "--mirror-config", good}, `"m.stopped" ends with ".stopped"`},
		{"ends with .paused", []string{"--create", "--mirror", "m.paused", "--mirror-config", good}, `"m.paused" ends with ".paused"`},
		{"duplicate", []string{"--create", "--mirror", "taken", "--mirror-config", good}, "mirror taken already exists"},
		{"unknown mirror", []string{"--start", "--topics", "x", "--mirror", "nope"}, "mirror nope does not exist"},
		{"invalid regex", []string{"--start", "--topics", "orders-(", "--mirror", "taken"}, `topic pattern "orders-("`},
		{"unreachable source", []string{"--create", "--mirror", "far", "--mirror-config", unreachable}, "cannot reach the source cluster at 127.0.0.1:1"},
		{"no bootstrap.servers", []string{"--create", "--mirror", "nobs", "--mirror-config", noBootstrap}, "has no bootstrap.servers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, tc.args...)
			if r.Code == 0 {
				t.Fatalf("exit 0, want an error; stdout %q", r.Stdout)
			}
			lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
			if len(lines) != 1 || !strings.Contains(r.Stderr, tc.want) {
				t.Fatalf("stderr %q, want one line containing %q", r.Stderr, tc.want)
			}
			if after := snapshot(); after != before {
				t.Fatalf("the bad request changed the mirrors:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
	badFrames(t)
	if after := snapshot(); after != before {
		t.Fatalf("after bad frames, list printed:\n%s\nwant:\n%s", after, before)
	}
}

func sumValues(m map[int32]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}
