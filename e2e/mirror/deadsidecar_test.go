package mirror

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestDeadSidecar kills a sidecar (kill -9) while its broker keeps leading
// mirror partitions: within 60 s the raft leader must have moved their
// leadership to brokers with live sidecars and every partition must be
// caught up again, with identical dumps. After the sidecar restarts, the
// original replica order and leaders come back and mirroring goes on.
func TestDeadSidecar(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "dead", "dead", 6
	victim := env.Sidecars.Sidecar(2)
	before, led := mirrorLedBy(t, mirror, topic, partitions, 20_000, 41, victim.BrokerID)
	t.Cleanup(func() { startSidecar(t, victim) })

	t.Logf("killing sidecar %d; the raft leader is sidecar %d", victim.BrokerID, raftLeader(t).BrokerID)
	killed := time.Now()
	victim.Kill()
	produceVariety(t, env.Source, topic, 20_000, 42)
	wait.For(t, time.Until(killed.Add(60*time.Second)), "every partition caught up within 60 s of the kill", func() bool {
		ok, _ := caughtUp(t, mirror, topic)
		return ok
	})
	t.Logf("partitions %v of broker %d: caught up %v after the kill", led, victim.BrokerID, time.Since(killed).Round(time.Millisecond))
	after := destMetadata(t, topic)
	for p, pd := range after {
		if pd.Leader == victim.BrokerID {
			t.Fatalf("partition %d is still led by broker %d, whose sidecar is dead", p, victim.BrokerID)
		}
		if !sameReplicaSet(pd.Replicas, before[p].Replicas) {
			t.Fatalf("partition %d: replicas %v, want a reordering of %v", p, pd.Replicas, before[p].Replicas)
		}
	}
	compareAll(t, topic, partitions)
	if page := leaderMetrics(t); !strings.Contains(page, "\nsidemirror_sidecars_alive 2\n") ||
		metricValue(page, `sidemirror_partition_leadership_moves_total{direction="away"}`) < float64(len(led)) {
		t.Fatalf("the raft leader's metrics do not show the dead sidecar and %d moves away:\n%s", len(led), grepMetrics(page, "sidemirror_sidecars_alive", "sidemirror_partition_leadership_moves_total"))
	}

	restarted := time.Now()
	startSidecar(t, victim)
	waitOriginalOrder(t, topic, before, time.Minute)
	t.Logf("original replica order and leaders restored %v after the restart", time.Since(restarted).Round(time.Millisecond))
	produceVariety(t, env.Source, topic, 20_000, 43)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	if total := compareAll(t, topic, partitions); total != 60_000 {
		t.Fatalf("compared %d records, want the 60000 written", total)
	}
	owners := owners(t, mirror, topic)
	for _, p := range led {
		if owners[p] != victim.BrokerID {
			t.Fatalf("partition %d is driven by sidecar %d after the move back, want %d (owners %v)", p, owners[p], victim.BrokerID, owners)
		}
	}
}

// TestFrozenSidecar freezes a sidecar (SIGSTOP) in the middle of a steady
// stream of writes: its partitions move to brokers with live sidecars and
// catch up. When it is thawed (SIGCONT), its broker no longer leads them:
// Kafka refuses its appends (NOT_LEADER), it stops driving them, and
// leadership only returns once it has. The dumps must show no duplicate
// and no gap.
func TestFrozenSidecar(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "frozen", "frozen", 6
	victim := env.Sidecars.Sidecar(2)
	before, led := mirrorLedBy(t, mirror, topic, partitions, 20_000, 51, victim.BrokerID)
	t.Cleanup(victim.Thaw)

	// The sidecar is frozen while it mirrors a stream of writes, so that it
	// wakes up with fetched batches it has not appended yet.
	stream := produceSteadily(t, topic)
	start := endOffsets(t, env.Destination, topic)
	wait.For(t, 30*time.Second, "the stream to reach the destination", func() bool {
		now := endOffsets(t, env.Destination, topic)
		for _, p := range led {
			if now[p] <= start[p] {
				return false
			}
		}
		return true
	})
	frozen := time.Now()
	victim.Freeze()
	wait.For(t, time.Minute, fmt.Sprintf("leadership of %s to leave broker %d", topic, victim.BrokerID), func() bool {
		return len(ledBy(destMetadata(t, topic), victim.BrokerID)) == 0
	})
	t.Logf("leadership of partitions %v moved %v after the freeze", led, time.Since(frozen).Round(time.Millisecond))
	streamed := stream()
	waitCaughtUp(t, mirror, topic, time.Minute)
	t.Logf("caught up %v after the freeze (%d records streamed)", time.Since(frozen).Round(time.Millisecond), streamed)
	// The fence a woken sidecar meets: its broker refuses appends to the
	// partitions it no longer leads, from anyone.
	ends := endOffsets(t, env.Destination, topic)
	for _, p := range led {
		if err := produceToFollower(t, victim.BrokerID, topic, p); !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Fatalf("append to %s-%d on broker %d after the move: %v, want NOT_LEADER_OR_FOLLOWER", topic, p, victim.BrokerID, err)
		}
	}
	if now := endOffsets(t, env.Destination, topic); !maps.Equal(now, ends) {
		t.Fatalf("end offsets changed by refused appends: %v -> %v", ends, now)
	}
	produceVariety(t, env.Source, topic, 10_000, 52)
	waitCaughtUp(t, mirror, topic, time.Minute)

	logOffset := fileSize(t, victim.LogPath())
	stream = produceSteadily(t, topic)
	thawed := time.Now()
	victim.Thaw()
	// The woken sidecar stops every partition it drove (NOT_LEADER from its
	// broker, or reconcile seeing the new leaders) before leadership
	// returns; had it appended a stale batch, the dumps would differ.
	wait.For(t, 30*time.Second, "the thawed sidecar to stop driving its partitions", func() bool {
		return len(stoppedAfter(t, victim.LogPath(), logOffset, topic)) == len(led)
	})
	t.Logf("thawed sidecar stopped its partitions %v after the thaw (%d mentions of NOT_LEADER in its log):\n%s",
		time.Since(thawed).Round(time.Millisecond), countAfter(t, victim.LogPath(), logOffset, "NOT_LEADER"),
		strings.Join(stoppedAfter(t, victim.LogPath(), logOffset, topic), "\n"))
	waitOriginalOrder(t, topic, before, time.Minute)
	t.Logf("original replica order and leaders restored %v after the thaw", time.Since(thawed).Round(time.Millisecond))
	streamed += stream()
	produceVariety(t, env.Source, topic, 10_000, 53)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	if total, want := compareAll(t, topic, partitions), 40_000+streamed; total != want {
		t.Fatalf("compared %d records, want the %d written", total, want)
	}
	owners := owners(t, mirror, topic)
	for _, p := range led {
		if owners[p] != victim.BrokerID {
			t.Fatalf("partition %d is driven by sidecar %d after the move back, want %d (owners %v)", p, owners[p], victim.BrokerID, owners)
		}
	}
}

// destMetadata returns the destination's metadata of every partition of
// topic.
func destMetadata(t *testing.T, topic string) map[int32]kadm.PartitionDetail {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(newClient(t, env.Destination, testbed.Admin)).Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("destination metadata of %s: %v", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		t.Fatalf("destination metadata of %s: %v", topic, td.Err)
	}
	return td.Partitions
}

// mirrorLedBy creates topic on the source with partitions, writes records
// of produceVariety (seed), mirrors it as mirror until caught up and
// returns the destination's metadata with preferred leaders and the
// partitions broker leads (at least one).
func mirrorLedBy(t *testing.T, mirror, topic string, partitions int32, records int, seed uint64, broker int32) (map[int32]kadm.PartitionDetail, []int32) {
	t.Helper()
	createSourceTopic(t, topic, partitions, nil)
	produceVariety(t, env.Source, topic, records, seed)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	before := preferredLeaders(t, topic)
	led := ledBy(before, broker)
	if len(led) == 0 {
		t.Fatalf("broker %d leads no partition of %s: %+v", broker, topic, before)
	}
	return before, led
}

// preferredLeaders waits until every partition of topic is led by its
// first replica and returns the metadata.
func preferredLeaders(t *testing.T, topic string) map[int32]kadm.PartitionDetail {
	t.Helper()
	var md map[int32]kadm.PartitionDetail
	wait.For(t, 30*time.Second, "preferred leaders of "+topic, func() bool {
		md = destMetadata(t, topic)
		for _, pd := range md {
			if len(pd.Replicas) < 2 || pd.Leader != pd.Replicas[0] {
				return false
			}
		}
		return len(md) > 0
	})
	return md
}

// ledBy returns the partitions broker leads, sorted.
func ledBy(md map[int32]kadm.PartitionDetail, broker int32) []int32 {
	var out []int32
	for p, pd := range md {
		if pd.Leader == broker {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// waitOriginalOrder waits until every partition of topic has the replica
// order of before and is led by its first replica.
func waitOriginalOrder(t *testing.T, topic string, before map[int32]kadm.PartitionDetail, d time.Duration) {
	t.Helper()
	var last map[int32]kadm.PartitionDetail
	wait.For(t, d, "the original replica order and preferred leaders of "+topic, func() bool {
		last = destMetadata(t, topic)
		for p, pd := range before {
			now := last[p]
			if !slices.Equal(now.Replicas, pd.Replicas) || now.Leader != pd.Replicas[0] {
				return false
			}
		}
		return true
	})
}

func sameReplicaSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// caughtUp is waitCaughtUp's condition, without failing the test.
func caughtUp(t *testing.T, mirror, topic string) (bool, string) {
	t.Helper()
	src := endOffsets(t, env.Source, topic)
	dst := endOffsets(t, env.Destination, topic)
	ok := len(src) > 0 && len(src) == len(dst)
	for p, o := range src {
		ok = ok && dst[p] == o
	}
	rows := 0
	m := describe(t, mirror)
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
	return ok && rows == len(src), fmt.Sprintf("source %v, destination %v, describe %+v", src, dst, m.Topics)
}

// owners returns the broker whose sidecar drives each partition of topic,
// as describe reports.
func owners(t *testing.T, mirror, topic string) map[int32]int32 {
	t.Helper()
	out := map[int32]int32{}
	for _, tp := range describe(t, mirror).Topics {
		if tp.TopicName == topic {
			for _, pd := range tp.Partitions {
				out[pd.PartitionIndex] = pd.OwnerBrokerId
			}
		}
	}
	return out
}

// startSidecar starts s unless it runs.
func startSidecar(t *testing.T, s *testbed.Sidecar) {
	t.Helper()
	if s.Running() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("restart sidecar %d: %v", s.BrokerID, err)
	}
}

// produceSteadily writes small records to topic on the source, about one
// per millisecond, until the returned function is called; that function
// waits for every record to be acknowledged and returns how many were
// written.
func produceSteadily(t *testing.T, topic string) func() int {
	t.Helper()
	cl := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var n int
	var firstErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%100), Value: fmt.Appendf(nil, "steady record %d", i)}
			cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					n++
				}
			})
		}
	}()
	return func() int {
		t.Helper()
		cancel()
		wg.Wait()
		fctx, fcancel := context.WithTimeout(context.Background(), time.Minute)
		defer fcancel()
		if err := cl.Flush(fctx); err != nil {
			t.Fatalf("flushing the steady producer: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil {
			t.Fatalf("steady producer: %v", firstErr)
		}
		return n
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// stoppedAfter returns the log lines from offset on that say a partition of
// topic stopped being driven: by the data plane on NOT_LEADER, or by
// reconcile.
func stoppedAfter(t *testing.T, path string, offset int64, topic string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"topic": "`+topic+`"`) {
			continue
		}
		if strings.Contains(line, "local broker is no longer the leader") || strings.Contains(line, "no longer driving partition") {
			out = append(out, line)
		}
	}
	return dedupPartitions(out)
}

// countAfter counts the log lines from offset on that contain s.
func countAfter(t *testing.T, path string, offset int64, s string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data[min(offset, int64(len(data))):]), s)
}

// dedupPartitions keeps the first line of each "partition": N field.
func dedupPartitions(lines []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		i := strings.Index(l, `"partition": `)
		if i < 0 {
			continue
		}
		key := l[i:]
		if j := strings.IndexAny(key, ",}"); j > 0 {
			key = key[:j]
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, l)
		}
	}
	return out
}

// leaderMetrics returns the raft leader's /metrics page.
func leaderMetrics(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := raftLeader(t).Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// metricValue returns the value of the sample named exactly name (with its
// labels), or -1.
func metricValue(page, name string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

// grepMetrics returns the lines of page that mention one of names.
func grepMetrics(page string, names ...string) string {
	var b strings.Builder
	for _, line := range strings.Split(page, "\n") {
		for _, n := range names {
			if strings.Contains(line, n) {
				b.WriteString(line + "\n")
				break
			}
		}
	}
	return b.String()
}

// produceToFollower sends one record straight to broker for partition p of
// topic on the destination, as the sidecars' super user, and returns the
// partition's error: what a woken sidecar's append to its former partition
// gets.
func produceToFollower(t *testing.T, broker int32, topic string, p int32) error {
	t.Helper()
	cl := newClient(t, env.Destination, testbed.Sidemirror)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = oneRecordBatch([]byte("a stale append"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := (&produceV12{req}).RequestWith(ctx, cl.Broker(int(broker)))
	if err != nil {
		t.Fatalf("produce to broker %d: %v", broker, err)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// produceV12 caps Produce at v12, the last version that names topics.
type produceV12 struct{ *kmsg.ProduceRequest }

func (r *produceV12) MaxVersion() int16 { return min(r.ProduceRequest.MaxVersion(), 12) }

func (r *produceV12) RequestWith(ctx context.Context, b *kgo.Broker) (*kmsg.ProduceResponse, error) {
	resp, err := b.Request(ctx, r)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ProduceResponse), nil
}

// oneRecordBatch returns a v2 record batch (no producer ID, no
// compression) holding one record with value v.
func oneRecordBatch(v []byte) []byte {
	var rec []byte
	rec = append(rec, 0)             // attributes
	rec = kbin.AppendVarlong(rec, 0) // timestamp delta
	rec = kbin.AppendVarint(rec, 0)  // offset delta
	rec = kbin.AppendVarint(rec, -1) // null key
	rec = kbin.AppendVarint(rec, int32(len(v)))
	rec = append(rec, v...)
	rec = kbin.AppendVarint(rec, 0) // headers
	now := time.Now().UnixMilli()
	b := kbin.AppendInt64(nil, 0) // base offset
	b = kbin.AppendInt32(b, 0)    // batch length, below
	b = kbin.AppendInt32(b, -1)   // partition leader epoch
	b = kbin.AppendInt8(b, 2)     // magic
	b = kbin.AppendUint32(b, 0)   // CRC, below
	b = kbin.AppendInt16(b, 0)    // attributes
	b = kbin.AppendInt32(b, 0)    // last offset delta
	b = kbin.AppendInt64(b, now)  // first timestamp
	b = kbin.AppendInt64(b, now)  // max timestamp
	b = kbin.AppendInt64(b, -1)   // producer ID
	b = kbin.AppendInt16(b, -1)   // producer epoch
	b = kbin.AppendInt32(b, -1)   // base sequence
	b = kbin.AppendInt32(b, 1)    // record count
	b = kbin.AppendVarint(b, int32(len(rec)))
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
