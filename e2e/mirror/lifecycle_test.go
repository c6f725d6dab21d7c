package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// partitionStates returns the state of every partition of topic in
// describe, and the sum of their lags.
func partitionStates(t *testing.T, mirror, topic string) (map[int32]string, int64) {
	t.Helper()
	states := map[int32]string{}
	var lag int64
	for _, tp := range describe(t, mirror).Topics {
		if tp.TopicName != topic {
			continue
		}
		for _, pd := range tp.Partitions {
			states[pd.PartitionIndex] = pd.State
			if pd.Lag > 0 {
				lag += pd.Lag
			}
		}
	}
	return states, lag
}

// allIn reports whether states is not empty and each state is one of want.
func allIn(states map[int32]string, want ...string) bool {
	for _, s := range states {
		if !slices.Contains(want, s) {
			return false
		}
	}
	return len(states) > 0
}

// aliceWrite tries to write one record to topic on the destination as alice.
func aliceWrite(t *testing.T, topic string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, env.Destination, testbed.Alice, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1),
		kgo.RecordDeliveryTimeout(10*time.Second))
	return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("written after failover")}).FirstErr()
}

// TestLifecycle runs the KIP's workflow: start two topics of 50 partitions
// each by regex with an exclude, pause one (it stays read-only and falls
// behind), resume it (it catches up with identical offsets), stop both
// (all 100 partitions writable within 5 seconds) and delete the mirror.
func TestLifecycle(t *testing.T) {
	dumpLogs(t)
	const mirror, partitions = "life", 50
	for _, topic := range []string{"life-us", "life-eu", "life-internal"} {
		createSourceTopic(t, topic, partitions, nil)
		produceVariety(t, env.Source, topic, 3000, 11)
	}
	createMirror(t, mirror)
	out := mustCLI(t, "--start", "--topics", "life-.*", "--exclude", "life-internal", "--mirror", mirror)
	if want := "Started 2 mirror topic(s) in mirror life: [life-eu, life-us]\n"; out != want {
		t.Fatalf("start printed %q, want %q", out, want)
	}
	waitCaughtUp(t, mirror, "life-us", 2*time.Minute)
	waitCaughtUp(t, mirror, "life-eu", 2*time.Minute)

	out = mustCLI(t, "--pause", "--topics", "life-eu", "--mirror", mirror)
	if want := "Paused mirroring for 1 topic(s) in mirror life: [life-eu]\n"; out != want {
		t.Fatalf("pause printed %q, want %q", out, want)
	}
	produceVariety(t, env.Source, "life-eu", 3000, 12)
	produceVariety(t, env.Source, "life-us", 3000, 12)
	waitCaughtUp(t, mirror, "life-us", 2*time.Minute)
	states, _ := partitionStates(t, mirror, "life-eu")
	if !allIn(states, "PAUSED") {
		t.Fatalf("life-eu states %v, want PAUSED", states)
	}
	if src, dst := sumValues(endOffsets(t, env.Source, "life-eu")), sumValues(endOffsets(t, env.Destination, "life-eu")); dst != 3000 || src != 6000 {
		t.Fatalf("paused topic: source holds %d, destination %d; want 6000 and 3000", src, dst)
	}
	if err := aliceWrite(t, "life-eu"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's write to a paused topic returned %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	out = mustCLI(t, "--resume", "--topics", "life-eu", "--mirror", mirror)
	if want := "Resumed mirroring for 1 topic(s) in mirror life: [life-eu]\n"; out != want {
		t.Fatalf("resume printed %q, want %q", out, want)
	}
	waitCaughtUp(t, mirror, "life-eu", 2*time.Minute)
	compareAll(t, "life-eu", partitions)

	r := cli(t, "--delete", "--mirror", mirror)
	if r.Code == 0 || !strings.Contains(r.Stderr, "stop") {
		t.Fatalf("deleting a mirror with mirroring topics: exit %d, stderr %q; want a refusal", r.Code, r.Stderr)
	}

	start := time.Now()
	out = mustCLI(t, "--stop", "--topics", "life-.*", "--mirror", mirror)
	if want := "Stopped mirroring for 2 topic(s) in mirror life: [life-eu, life-us]\n"; out != want {
		t.Fatalf("stop printed %q, want %q", out, want)
	}
	// Writable within 5 s of --stop: alice writes one record to every
	// one of the 100 partitions.
	deadline := start.Add(5 * time.Second)
	for _, topic := range []string{"life-us", "life-eu"} {
		for p := range int32(partitions) {
			for aliceWriteTo(t, topic, p) != nil {
				if time.Now().After(deadline) {
					t.Fatalf("%s-%d not writable 5 s after --stop: %v", topic, p, aliceWriteTo(t, topic, p))
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	t.Logf("100 stopped partitions writable %v after --stop was issued", time.Since(start).Round(time.Millisecond))
	for _, topic := range []string{"life-us", "life-eu"} {
		states, _ := partitionStates(t, mirror, topic)
		if !allIn(states, "STOPPED") || len(states) != partitions {
			t.Fatalf("%s states %v, want %d partitions STOPPED", topic, states, partitions)
		}
	}

	out = mustCLI(t, "--delete", "--mirror", mirror)
	if want := "Deleted mirror life\n"; out != want {
		t.Fatalf("delete printed %q, want %q", out, want)
	}
	if list := mustCLI(t, "--list"); strings.Contains(list, "life ") {
		t.Fatalf("deleted mirror still listed:\n%s", list)
	}
}

// aliceWriteTo writes one record to one partition as alice.
func aliceWriteTo(t *testing.T, topic string, partition int32) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return aliceClient(t).ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte("after failover")}).FirstErr()
}

var aliceCl *kgo.Client

// aliceClient returns a shared producer for alice with manual partitioning.
func aliceClient(t *testing.T) *kgo.Client {
	t.Helper()
	if aliceCl == nil {
		cl, err := env.Destination.NewClient(testbed.Alice, kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		aliceCl = cl
	}
	return aliceCl
}

// TestLifecycleBadInput sends invalid lifecycle requests: each gets one
// clear error and changes nothing.
func TestLifecycleBadInput(t *testing.T) {
	dumpLogs(t)
	createSourceTopic(t, "bad-a", 1, nil)
	createSourceTopic(t, "bad-b", 1, nil)
	createMirror(t, "bad-one")
	createMirror(t, "bad-two")
	mustCLI(t, "--start", "--topics", "bad-a", "--mirror", "bad-one")
	waitCaughtUp(t, "bad-one", "bad-a", time.Minute)
	snapshot := func() string {
		return stripOffsets(mustCLI(t, "--describe", "--mirror", "bad-one", "--json")) +
			stripOffsets(mustCLI(t, "--describe", "--mirror", "bad-two", "--json"))
	}
	before := snapshot()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"pause a topic not in the mirror", []string{"--pause", "--topics", "bad-b", "--mirror", "bad-one"}, "bad-b"},
		{"resume a topic not in the mirror", []string{"--resume", "--topics", "bad-b", "--mirror", "bad-one"}, "bad-b"},
		{"resume an active topic", []string{"--resume", "--topics", "bad-a", "--mirror", "bad-one"}, "not paused"},
		{"stop an unknown topic", []string{"--stop", "--topics", "no-such-topic", "--mirror", "bad-one"}, "no-such-topic"},
		{"start a topic already in another mirror", []string{"--start", "--topics", "bad-a", "--mirror", "bad-two"}, "bad-one"},
		{"delete a mirror with mirroring topics", []string{"--delete", "--mirror", "bad-one"}, "bad-one"},
		{"pause in an unknown mirror", []string{"--pause", "--topics", "bad-a", "--mirror", "no-such-mirror"}, "no-such-mirror"},
		{"alter a key that does not exist", []string{"--alter", "--mirror", "bad-one", "--delete-config", "no.such.key"}, "no.such.key"},
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
		})
	}
	// Nothing changed: the same topics, states and configs.
	if after := snapshot(); after != before {
		t.Fatalf("bad requests changed the mirrors:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// stripOffsets drops the lines of describe --json that move on their own
// (offsets, lag in records and in time, the last fetch, owners), keeping
// names, states, errors and configs.
func stripOffsets(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, `"sourceOffset"`) || strings.HasPrefix(l, `"destinationOffset"`) ||
			strings.HasPrefix(l, `"lag"`) || strings.HasPrefix(l, `"ownerBrokerId"`) || strings.HasPrefix(l, `"lastError"`) ||
			strings.HasPrefix(l, `"lagTimeMs"`) || strings.HasPrefix(l, `"lastFetchTimestampMs"`) {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// TestFailoverWithSourceDown stops the source cluster and then fails over:
// --stop must succeed and every partition must be STOPPED and writable.
func TestFailoverWithSourceDown(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "dr", "dr"
	createSourceTopic(t, topic, 4, nil)
	produceVariety(t, env.Source, topic, 5000, 13)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, n := range env.Source.Nodes() {
		n.Kill()
	}
	t.Cleanup(func() { _ = env.Source.StartStopped(ctx) })
	out := mustCLI(t, "--stop", "--topics", ".*", "--mirror", mirror)
	if want := "Stopped mirroring for 1 topic(s) in mirror dr: [dr]\n"; out != want {
		t.Fatalf("stop printed %q, want %q", out, want)
	}
	states, _ := partitionStates(t, mirror, topic)
	if !allIn(states, "STOPPED") || len(states) != 4 {
		t.Fatalf("states %v, want 4 partitions STOPPED", states)
	}
	// Writable: alice writes one record to every partition.
	before := endOffsets(t, env.Destination, topic)
	for p := range int32(4) {
		wait.For(t, 30*time.Second, fmt.Sprintf("alice to be able to write to %s-%d", topic, p), func() bool { return aliceWriteTo(t, topic, p) == nil })
	}
	after := endOffsets(t, env.Destination, topic)
	for p := range int32(4) {
		if after[p] != before[p]+1 {
			t.Fatalf("partition %d holds %d records after alice's write, want %d", p, after[p], before[p]+1)
		}
	}
	if sumValues(before) != 5000 {
		t.Fatalf("destination held %d records at the failover, want the 5000 mirrored", sumValues(before))
	}
	if err := env.Source.StartStopped(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDiscovery checks that a new source topic matching the include pattern
// is mirrored within two refresh intervals and that an excluded one is not.
func TestDiscovery(t *testing.T) {
	dumpLogs(t)
	const mirror = "disc"
	createSourceTopic(t, "disc-a", 1, nil)
	const refresh = 5 * time.Second
	out := mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		mirrorConfigFile(t, map[string]string{"mirror.metadata.refresh.interval.ms": strconv.FormatInt(refresh.Milliseconds(), 10)}))
	if out != "Created mirror disc\n" {
		t.Fatalf("create printed %q", out)
	}
	mustCLI(t, "--start", "--topics", "disc-.*", "--exclude", "disc-skip.*", "--mirror", mirror)
	// The excluded topic comes first: the discovery pass that finds disc-b
	// has seen it too.
	createSourceTopic(t, "disc-skip-me", 1, nil)
	start := time.Now()
	createSourceTopic(t, "disc-b", 2, nil)
	// Mirrored within two refresh intervals of its creation: started, with
	// both partitions driven by a sidecar.
	wait.For(t, 2*refresh, "disc-b to be discovered and mirrored", func() bool {
		states, _ := partitionStates(t, mirror, "disc-b")
		return len(states) == 2 && allIn(states, "MIRRORING", "LOG_TRUNCATION")
	})
	t.Logf("disc-b mirrored %v after its creation (refresh interval %v)", time.Since(start).Round(time.Millisecond), refresh)
	produceVariety(t, env.Source, "disc-b", 500, 14)
	waitCaughtUp(t, mirror, "disc-b", time.Minute)
	compareAll(t, "disc-b", 2)
	if states, _ := partitionStates(t, mirror, "disc-skip-me"); len(states) != 0 {
		t.Fatalf("excluded topic disc-skip-me is mirrored: %v", states)
	}
}
