package mirror

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sidecarCPU returns the CPU seconds (user + system) the running sidecars
// have used.
func sidecarCPU(*testing.T) float64 { return env.Sidecars.CPUSeconds() }

// mirroredBytes sums sidemirror_mirrored_bytes_total of a mirror over the
// sidecars' /metrics.
func mirroredBytes(t *testing.T, mirror string) int64 {
	t.Helper()
	return int64(sumMetric(t, "sidemirror_mirrored_bytes_total", mirror))
}

// rawBatch is the part of a stored record batch that mirroring must keep:
// attributes (codec, timestamp type), last offset delta, timestamps, record
// count and the records section.
type rawBatch struct {
	codec   int16
	content []byte
	base    int64
	next    int64 // the offset after the batch
	size    int   // bytes of the whole batch
}

// coalesceSmallBytes is the fetcher's bound: only source batches smaller
// than this may be coalesced with their neighbours into one destination
// batch; larger ones must arrive byte-identical.
const coalesceSmallBytes = 16 << 10

// sameBatchContent reports whether two batches agree in everything but the
// fields the destination legitimately rewrites (partition leader epoch,
// CRC, producer ID, epoch and base sequence).
func sameBatchContent(a, b rawBatch) bool {
	return a.codec == b.codec && string(a.content) == string(b.content)
}

// matchBatches pairs each destination batch of a partition with the source
// batch of the same offset range. A destination batch that spans several
// whole source batches must be a coalesced run: every one of them smaller
// than coalesceSmallBytes, of the destination batch's codec, neither
// transactional nor a control batch. Anything else fails the test, and so
// does a source batch that no destination batch covers. It also returns
// how many source batches were coalesced.
func matchBatches(t *testing.T, what string, src, dst map[int64]rawBatch) (pairs [][2]rawBatch, coalesced int) {
	t.Helper()
	covered := 0
	for base, d := range dst {
		if s, ok := src[base]; ok && s.next == d.next {
			pairs = append(pairs, [2]rawBatch{s, d})
			covered++
			continue
		}
		off := base
		for off < d.next {
			s, ok := src[off]
			if !ok || s.size >= coalesceSmallBytes || s.codec != d.codec || s.content[1]&0x30 != 0 {
				t.Fatalf("%s: destination batch %d..%d (codec %d) is no run of small data batches of its codec: source at %d: %v %+v",
					what, base, d.next-1, d.codec, off, ok, s)
			}
			off = s.next
			covered++
			coalesced++
		}
		if off != d.next {
			t.Fatalf("%s: destination batch %d..%d ends inside a source batch", what, base, d.next-1)
		}
	}
	if covered != len(src) {
		t.Fatalf("%s: %d source batches, the destination's cover %d", what, len(src), covered)
	}
	return pairs, coalesced
}

// rawBatches fetches every record batch of a partition from its leader with
// raw Fetch requests, keyed by base offset.
func rawBatches(t *testing.T, c *testbed.Cluster, topic string, partition int32) map[int64]rawBatch {
	t.Helper()
	cl := newClient(t, c, testbed.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader, topicID := leaderOf(t, c, topic, partition)
	out := map[int64]rawBatch{}
	offset := startOffsets(t, c, topic)[partition]
	end := endOffsets(t, c, topic)[partition]
	for offset < end {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 500
		req.MaxBytes = 8 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.TopicID = topicID // Fetch v13+ names topics by ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = partition
		rp.FetchOffset = offset
		rp.PartitionMaxBytes = 8 << 20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			t.Fatalf("raw fetch from %s: %v", c.Name(), err)
		}
		pr := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(pr.ErrorCode); err != nil {
			t.Fatalf("raw fetch of %s-%d from %s: %v", topic, partition, c.Name(), err)
		}
		data := pr.RecordBatches
		progressed := false
		for len(data) >= 61 {
			length := int(binary.BigEndian.Uint32(data[8:12]))
			if 12+length > len(data) {
				break
			}
			b := data[:12+length]
			data = data[12+length:]
			base := int64(binary.BigEndian.Uint64(b[0:8]))
			last := base + int64(binary.BigEndian.Uint32(b[23:27]))
			if base < offset {
				continue
			}
			content := append(append([]byte{}, b[21:43]...), b[57:]...)
			out[base] = rawBatch{codec: int16(binary.BigEndian.Uint16(b[21:23])) & 0x7, content: content, base: base, next: last + 1, size: len(b)}
			offset = last + 1
			progressed = true
		}
		if !progressed {
			t.Fatalf("raw fetch of %s-%d from %s at %d returned no whole batch", topic, partition, c.Name(), offset)
		}
	}
	return out
}

// leaderOf returns the leader of a partition on c and the topic's ID.
func leaderOf(t *testing.T, c *testbed.Cluster, topic string, partition int32) (int32, [16]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(newClient(t, c, testbed.Admin)).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := md.Topics[topic].Partitions[partition]
	if !ok {
		t.Fatalf("no metadata for %s-%d on %s", topic, partition, c.Name())
	}
	return p.Leader, md.Topics[topic].ID
}

func sourceLeader(t *testing.T, topic string, partition int32) int32 {
	t.Helper()
	leader, _ := leaderOf(t, env.Source, topic, partition)
	return leader
}

// electPreferred moves leadership of topic's partitions back to their
// preferred replicas, waiting until the restarted replicas are in sync.
func electPreferred(t *testing.T, c *testbed.Cluster, topic string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, c, testbed.Admin))
	wait.For(t, 2*time.Minute, "preferred leaders on "+c.Name(), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		set := kadm.TopicsSet{}
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		done := true
		for _, p := range md.Topics[topic].Partitions {
			set.Add(topic, p.Partition)
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				done = false
			}
		}
		if done {
			return true
		}
		_, _ = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		return false
	})
}

// raftLeader returns the sidecar that reports itself raft leader.
func raftLeader(t *testing.T) *testbed.Sidecar {
	t.Helper()
	var leader *testbed.Sidecar
	wait.For(t, 30*time.Second, "a raft leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range env.Sidecars.Sidecars() {
			page, err := s.Metrics(ctx)
			if err == nil && strings.Contains(page, "\nsidemirror_raft_leader 1\n") {
				leader = s
				return true
			}
		}
		return false
	})
	return leader
}

// badFrames sends an oversized frame and a garbage frame to a sidecar's
// admin port: each connection must be closed by the sidecar.
func badFrames(t *testing.T) {
	t.Helper()
	addr := env.Sidecars.Sidecars()[0].AdminAddr
	for name, frame := range map[string][]byte{
		"oversized": {0x7f, 0xff, 0xff, 0xff},
		"garbage":   {0, 0, 0, 8, 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef},
	} {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(frame); err != nil {
			t.Fatalf("%s frame: %v", name, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		conn.Close()
		if err == nil || n > 0 {
			t.Fatalf("%s frame: the sidecar answered %d bytes instead of closing the connection", name, n)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%s frame: the sidecar kept the connection open", name)
		}
	}
}
