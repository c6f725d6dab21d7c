package mirror

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestUnplannedFailoverWithLag fails over while the source is down and the
// mirror lags: the consumer group offsets synced to the destination must
// never point beyond the destination's log, and a consumer resuming from
// them on the destination must read every record that reached it.
func TestUnplannedFailoverWithLag(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, group = "ufo", "ufo", "ufo-group"
	createSourceTopic(t, topic, 2, nil)
	produceVariety(t, env.Source, topic, 4000, 31)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		mirrorConfigFile(t, map[string]string{"mirror.metadata.refresh.interval.ms": "2000"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	// A group without members commits half way on the source; metadata
	// sync copies its offsets to the destination.
	half := map[int32]int64{}
	for p, o := range endOffsets(t, env.Source, topic) {
		half[p] = o / 2
	}
	commitOffsets(t, env.Source, group, topic, half)
	wait.For(t, 30*time.Second, "the group's offsets on the destination", func() bool {
		return maps.Equal(groupOffsets(t, env.Destination, group, topic), half)
	})

	// A burst, the group moves to the source's end, and the source dies
	// at once: the mirror has not caught up. A fetch quota on the source
	// makes sure the mirror lags.
	fetchQuota(t, env.Source, 100_000)
	produceVariety(t, env.Source, topic, 30000, 32)
	srcEnd := endOffsets(t, env.Source, topic)
	commitOffsets(t, env.Source, group, topic, srcEnd)
	for _, n := range env.Source.Nodes() {
		n.Kill()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_ = env.Source.StartStopped(ctx)
	})

	out := mustCLI(t, "--stop", "--topics", topic, "--mirror", mirror)
	if want := "Stopped mirroring for 1 topic(s) in mirror ufo: [ufo]\n"; out != want {
		t.Fatalf("stop printed %q, want %q", out, want)
	}
	dstEnd := endOffsets(t, env.Destination, topic)
	committed := groupOffsets(t, env.Destination, group, topic)
	t.Logf("source end %v (lost with the source), destination end %v, committed on the destination %v", srcEnd, dstEnd, committed)
	if len(committed) != len(dstEnd) {
		t.Fatalf("committed offsets %v do not cover every partition %v", committed, dstEnd)
	}
	lagged := false
	for p, end := range dstEnd {
		if end < srcEnd[p] {
			lagged = true
		}
		c := committed[p]
		if c < half[p] || c > end {
			t.Fatalf("partition %d: committed offset %d on the destination is outside [%d, %d] (synced offset, destination end)", p, c, half[p], end)
		}
		if n := consumeFrom(t, env.Destination, topic, p, c, end); n != end-c {
			t.Fatalf("partition %d: read %d records from the committed offset %d to the end %d, want %d", p, n, c, end, end-c)
		}
	}
	if !lagged {
		t.Fatalf("the mirror had caught up before the source died: the lag case was not exercised")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := env.Source.StartStopped(ctx); err != nil {
		t.Fatal(err)
	}
}

// fetchQuota sets consumer_byte_rate for the default client ID on c, and
// removes it at test end, after the cleanups that restart c's nodes.
func fetchQuota(t *testing.T, c *testbed.Cluster, rate float64) {
	t.Helper()
	alter := func(remove bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl, err := c.NewClient(testbed.Admin)
		if err != nil {
			return err
		}
		defer cl.Close()
		entity := kadm.ClientQuotaEntity{{Type: "client-id"}} // nil name: the default
		op := kadm.AlterClientQuotaOp{Key: "consumer_byte_rate", Value: rate, Remove: remove}
		var res []kadm.AlteredClientQuota
		for ctx.Err() == nil { // the cluster may still be coming back
			if res, err = kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{op}}}); err == nil {
				for _, r := range res {
					if r.Err != nil {
						err = r.Err
					}
				}
				if err == nil {
					return nil
				}
			}
			time.Sleep(time.Second)
		}
		return err
	}
	// Registered first, run last: after the cleanup that restarts the nodes.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_ = c.StartStopped(ctx)
		if err := alter(true); err != nil {
			t.Errorf("removing the fetch quota of %s: %v", c.Name(), err)
		}
	})
	if err := alter(false); err != nil {
		t.Fatalf("fetch quota on %s: %v", c.Name(), err)
	}
}

// consumeFrom reads partition p of topic on c from offset from up to end
// and returns how many records it read, failing on a skipped offset.
func consumeFrom(t *testing.T, c *testbed.Cluster, topic string, p int32, from, end int64) int64 {
	t.Helper()
	if from >= end {
		return 0
	}
	cl := newClient(t, c, testbed.Admin, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {p: kgo.NewOffset().At(from)},
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	next, n := from, int64(0)
	for next < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("partition %d: read up to %d of [%d, %d): %v", p, next, from, end, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s-%d on %s: %v", topic, p, c.Name(), err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("%s-%d on %s: read offset %d, want %d: records were skipped", topic, p, c.Name(), r.Offset, next)
			}
			next++
			n++
		})
	}
	return n
}

// failover mirrors topic from A (env.Source) to B (env.Destination), stops
// it on B and writes records on B as its applications would. It returns
// the end offsets both clusters shared at the stop.
func failover(t *testing.T, mirror, topic string, seed uint64) map[int32]int64 {
	t.Helper()
	createSourceTopic(t, topic, 2, nil)
	produceVariety(t, env.Source, topic, 3000, seed)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	common := endOffsets(t, env.Source, topic)
	out := mustCLI(t, "--stop", "--topics", topic, "--mirror", mirror)
	if want := fmt.Sprintf("Stopped mirroring for 1 topic(s) in mirror %s: [%s]\n", mirror, topic); out != want {
		t.Fatalf("stop printed %q, want %q", out, want)
	}
	produceVariety(t, env.Destination, topic, 1000, seed+1)
	return common
}

// sidecarsBesideSource starts a sidecar group beside A, for mirrors from B
// back to A, and creates mirror there with B as its source.
func sidecarsBesideSource(t *testing.T, mirror string) *testbed.SidecarGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	g, err := testbed.StartSidecars(ctx, env.Bin.Sidemirror, env.Source, dir, nil)
	if err != nil {
		t.Fatalf("sidecars beside the source cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(g.LogTails(60))
		}
		g.Close()
	})
	props := env.Destination.ClientProperties(testbed.Sidemirror)
	props["mirror.readonly.enforcement"] = "none"
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	path := filepath.Join(dir, "failback.properties")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var r cliResult
	// The new raft group elects a leader first.
	wait.For(t, time.Minute, "the mirror to be created beside the source", func() bool {
		r = cliAt(t, g.AdminBootstrap(), "--create", "--mirror", mirror, "--mirror-config", path)
		return r.Code == 0 || strings.Contains(r.Stderr, "already exists")
	})
	if r.Code != 0 {
		t.Fatalf("create beside the source: %s", r.Stderr)
	}
	return g
}

// TestFailbackWithoutDivergence fails over from A to B, writes on B and
// fails back: A's log is a prefix of B's, so the start is accepted and A
// catches up with B without copying a record twice.
func TestFailbackWithoutDivergence(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "fb", "fb"
	common := failover(t, mirror, topic, 41)
	g := sidecarsBesideSource(t, mirror)

	r := cliAt(t, g.AdminBootstrap(), "--start", "--topics", topic, "--mirror", mirror)
	if want := "Started 1 mirror topic(s) in mirror fb: [fb]\n"; r.Code != 0 || r.Stdout != want {
		t.Fatalf("failback start: exit %d, stdout %q (want %q), stderr %q", r.Code, r.Stdout, want, r.Stderr)
	}
	var a, b map[int32]int64
	wait.For(t, 2*time.Minute, "A to catch up with B", func() bool {
		a, b = endOffsets(t, env.Source, topic), endOffsets(t, env.Destination, topic)
		return maps.Equal(a, b)
	})
	total := int64(0)
	for p, o := range b {
		if a[p] <= common[p] {
			t.Logf("partition %d got no record on B after the failover", p)
		}
		total += o
	}
	if total != 4000 {
		t.Fatalf("B holds %d records, want 3000 mirrored plus 1000 written after the failover", total)
	}
	if n := compareAll(t, topic, 2); int64(n) != total {
		t.Fatalf("compared %d records, want %d: a record was copied twice or lost (A %v, B %v)", n, total, a, b)
	}
}

// TestFailbackWithDivergence writes on A after the failover as well: A's
// log is no longer a prefix of B's. The start reports the partition and
// offset where the logs part, the diverged partitions show FAILED with that
// reason and A's log is left alone. --start --reseed then copies A's
// divergent records to <topic>.diverged-<timestamp> (checked with kcat),
// re-creates the topic and mirrors it again at B's offsets (compared with
// kcat); a second --reseed is refused.
func TestFailbackWithDivergence(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "fbd", "fbd"
	common := failover(t, mirror, topic, 51)
	produceVariety(t, env.Source, topic, 200, 53)
	a := endOffsets(t, env.Source, topic)
	var diverged []int32
	for p := range int32(2) {
		if a[p] > common[p] {
			diverged = append(diverged, p)
		}
	}
	if len(diverged) == 0 {
		t.Fatalf("no partition got the extra records: A %v, common %v", a, common)
	}
	first := diverged[0]
	g := sidecarsBesideSource(t, mirror)

	r := cliAt(t, g.AdminBootstrap(), "--start", "--topics", topic, "--mirror", mirror)
	want := fmt.Sprintf("partition %d diverged at offset %d: this cluster has %d records", first, common[first], a[first]-common[first])
	if r.Code != 1 || !strings.Contains(r.Stderr, "Error for topic fbd: ") || !strings.Contains(r.Stderr, want) ||
		!strings.Contains(r.Stderr, "--start --reseed") {
		t.Fatalf("failback start onto a diverged topic: exit %d, stdout %q, stderr %q; want exit 1, %q and the --reseed hint", r.Code, r.Stdout, r.Stderr, want)
	}
	t.Logf("start: %s", strings.TrimSpace(r.Stderr))

	// Describe shows every diverged partition FAILED with its divergence.
	desc := cliAt(t, g.AdminBootstrap(), "--describe", "--mirror", mirror)
	if desc.Code != 3 {
		t.Fatalf("describe of FAILED partitions: exit %d, want 3: %s", desc.Code, desc.Stderr)
	}
	for _, p := range diverged {
		reason := fmt.Sprintf("error: partition %d diverged at offset %d: this cluster has %d records", p, common[p], a[p]-common[p])
		if !describeRowHas(desc.Stdout, topic, p, "FAILED") || !strings.Contains(desc.Stdout, reason) {
			t.Fatalf("describe does not show partition %d FAILED with %q:\n%s", p, reason, desc.Stdout)
		}
	}
	t.Logf("describe:\n%s", desc.Stdout)
	// Nothing mirrors onto the diverged topic: B has more records than A,
	// so a fetcher driving it would move A's end offsets.
	time.Sleep(5 * time.Second)
	if got := endOffsets(t, env.Source, topic); !maps.Equal(got, a) {
		t.Fatalf("A's end offsets moved from %v to %v while the topic is diverged", a, got)
	}

	// What A holds beyond the divergence, as kcat reads it.
	before := map[int32][]string{}
	for _, p := range diverged {
		before[p] = kcatRecords(t, env.Source, topic, p, common[p], a[p]-common[p])
	}

	r = cliAt(t, g.AdminBootstrap(), "--start", "--reseed", "--topics", topic, "--mirror", mirror)
	if r.Code != 0 || !strings.HasSuffix(r.Stdout, "Started 1 mirror topic(s) in mirror fbd: [fbd]\n") {
		t.Fatalf("--start --reseed: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("reseed:\n%s", r.Stdout)
	m := regexp.MustCompile(`Copied the diverged records of topic fbd to topic (fbd\.diverged-\d{8}T\d{6}Z) `).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("--start --reseed did not name the copy: %q", r.Stdout)
	}
	copyTopic := m[1]
	for _, p := range diverged {
		line := fmt.Sprintf("  partition %d: offsets %d to %d, %d record(s)\n", p, common[p], a[p]-1, a[p]-common[p])
		if !strings.Contains(r.Stdout, line) {
			t.Fatalf("--start --reseed output lacks %q: %q", line, r.Stdout)
		}
		// The copy holds exactly those records (offsets from 0).
		got := kcatRecords(t, env.Source, copyTopic, p, 0, -1)
		if !slices.Equal(got, before[p]) {
			t.Fatalf("%s-%d holds %d records that differ from the %d diverged records of %s-%d", copyTopic, p, len(got), len(before[p]), topic, p)
		}
	}
	if got := endOffsets(t, env.Source, copyTopic); len(got) != 2 {
		t.Fatalf("%s has partitions %v, want 2", copyTopic, got)
	}

	// The topic mirrors again, at B's offsets.
	var aEnd, bEnd map[int32]int64
	wait.For(t, 3*time.Minute, "A to mirror B again after the re-seed", func() bool {
		aEnd, bEnd = endOffsets(t, env.Source, topic), endOffsets(t, env.Destination, topic)
		return maps.Equal(aEnd, bEnd)
	})
	total := int64(0)
	for _, o := range bEnd {
		total += o
	}
	if n := compareAll(t, topic, 2); int64(n) != total {
		t.Fatalf("compared %d records, want %d (A %v, B %v)", n, total, aEnd, bEnd)
	}
	desc = cliAt(t, g.AdminBootstrap(), "--describe", "--mirror", mirror)
	for p := range int32(2) {
		if !describeRowHas(desc.Stdout, topic, p, "MIRRORING") {
			t.Fatalf("partition %d is not MIRRORING after the re-seed:\n%s", p, desc.Stdout)
		}
	}

	// Nothing diverges any more: another re-seed is refused.
	r = cliAt(t, g.AdminBootstrap(), "--start", "--reseed", "--topics", topic, "--mirror", mirror)
	if r.Code != 1 || !strings.Contains(r.Stderr, "has no diverged partitions") {
		t.Fatalf("second --start --reseed: exit %d, stdout %q, stderr %q; want it refused", r.Code, r.Stdout, r.Stderr)
	}
}

// describeRowHas reports whether describe's table has a row for partition p
// of topic with the given state.
func describeRowHas(out, topic string, p int32, state string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 7 && f[1] == topic && f[2] == strconv.Itoa(int(p)) && f[6] == state {
			return true
		}
	}
	return false
}

// kcatRecords reads n records (all with n < 0) of partition p of topic on
// c from offset from with kcat, an independent client, and returns them as
// lines of timestamp, key and value lengths, key, value and headers: no
// offset, so that copies at other offsets compare equal.
func kcatRecords(t *testing.T, c *testbed.Cluster, topic string, p int32, from, n int64) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-C", "-t", topic, "-p", strconv.Itoa(int(p)),
		"-o", strconv.FormatInt(from, 10), "-e", "-q", "-f", `%T %K %S %k %s %h\n`}
	if n >= 0 {
		args = append(args, "-c", strconv.FormatInt(n, 10))
	}
	out, err := c.Kcat(ctx, testbed.Admin, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(out), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
