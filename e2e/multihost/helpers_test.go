package multihost

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

// wait polls conditions that ask real clusters every 250 ms.
var wait = testwait.Every(250 * time.Millisecond)

// dumpLogs prints the clusters' and sidecars' logs when t fails.
func dumpLogs(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(60))
		}
	})
}

// cliResult is what one kafka-cluster-mirrors run printed.
type cliResult = testbed.CLIResult

// cliAt runs kafka-cluster-mirrors from the root namespace against the
// given admin endpoints.
func cliAt(t *testing.T, bootstrap string, args ...string) cliResult {
	t.Helper()
	return testbed.RunCLI(t, env.Bin.CLI, append([]string{"--bootstrap-server", bootstrap}, args...)...)
}

// mustCLIAt runs the CLI against bootstrap and fails the test unless it
// exits 0.
func mustCLIAt(t *testing.T, bootstrap string, args ...string) string {
	t.Helper()
	r := cliAt(t, bootstrap, args...)
	if r.Code != 0 {
		t.Fatalf("kafka-cluster-mirrors --bootstrap-server %s %v: exit %d\nstdout: %s\nstderr: %s", bootstrap, args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// mustCLI runs the CLI against every sidecar.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	return mustCLIAt(t, env.Sidecars.AdminBootstrap(), args...)
}

// mirrorConfigFile writes a --mirror-config file that reaches the source
// the way the destination's hosts do: through the proxies.
func mirrorConfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(path, []byte("bootstrap.servers="+env.Source.RemoteBootstrap()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// createMirror creates a mirror of the source through the sidecar(s) at
// bootstrap.
func createMirror(t *testing.T, bootstrap, name string) {
	t.Helper()
	out := mustCLIAt(t, bootstrap, "--create", "--mirror", name, "--mirror-config", mirrorConfigFile(t))
	if want := "Created mirror " + name + "\n"; out != want {
		t.Fatalf("create printed %q, want %q", out, want)
	}
}

// describeAt returns the --describe --json output of one mirror, asked of
// the sidecar(s) at bootstrap.
func describeAt(t *testing.T, bootstrap, mirror string) protocol.DescribedMirror {
	t.Helper()
	r := cliAt(t, bootstrap, "--describe", "--mirror", mirror, "--json")
	var resp protocol.DescribeClusterMirrorsResponse
	if err := json.Unmarshal([]byte(r.Stdout), &resp); err != nil {
		t.Fatalf("describe --json (exit %d) printed unparsable output: %v\n%s\n%s", r.Code, err, r.Stdout, r.Stderr)
	}
	if len(resp.Mirrors) != 1 || resp.Mirrors[0].MirrorName != mirror {
		t.Fatalf("describe of %s returned %d mirrors: %s", mirror, len(resp.Mirrors), r.Stdout)
	}
	want := 0 // 2 with a FAILED partition
	for _, tp := range resp.Mirrors[0].Topics {
		for _, pd := range tp.Partitions {
			if pd.State == "FAILED" {
				want = 2
			}
		}
	}
	if r.Code != want {
		t.Fatalf("describe of %s: exit %d, want %d\nstdout: %s\nstderr: %s", mirror, r.Code, want, r.Stdout, r.Stderr)
	}
	return resp.Mirrors[0]
}

// partitions returns describe's rows of topic by partition.
func partitions(m protocol.DescribedMirror, topic string) map[int32]protocol.PartitionDetail {
	out := map[int32]protocol.PartitionDetail{}
	for _, tp := range m.Topics {
		if tp.TopicName == topic {
			for _, pd := range tp.Partitions {
				out[pd.PartitionIndex] = pd
			}
		}
	}
	return out
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

// createSourceTopic creates a topic with replication factor 2 on the
// source.
func createSourceTopic(t *testing.T, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newClient(t, env.Source, testbed.Admin)).CreateTopic(ctx, partitions, 2, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create source topic %s: %v", name, err)
	}
}

// produce writes n records to topic on the source, half lz4 and half zstd
// batches, with keys, null and random values of up to 2 KB and headers,
// drawn from seed.
func produce(t *testing.T, topic string, n int, seed uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i, codec := range []kgo.CompressionCodec{kgo.Lz4Compression(), kgo.ZstdCompression()} {
		cl := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(5*time.Millisecond))
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		var records []*kgo.Record
		for j := i; j < n; j += 2 {
			r := &kgo.Record{Key: fmt.Appendf(nil, "key-%d", j%997)}
			if j%50 != 0 { // every 50th value is null
				r.Value = make([]byte, rng.IntN(2048))
				for k := range r.Value {
					r.Value[k] = byte('a' + rng.IntN(26))
				}
			}
			if j%3 == 0 {
				r.Headers = []kgo.RecordHeader{{Key: "seq", Value: strconv.AppendInt(nil, int64(j), 10)}}
			}
			records = append(records, r)
		}
		if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
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

// caughtUp reports whether every partition of topic is MIRRORING with lag 0
// in describe and the destination's end offsets, read independently of the
// sidecars, equal the source's; the string says what was seen.
func caughtUp(t *testing.T, mirror, topic string) (bool, string) {
	t.Helper()
	src := endOffsets(t, env.Source, topic)
	dst := endOffsets(t, env.Destination, topic)
	rows := partitions(describeAt(t, env.Sidecars.AdminBootstrap(), mirror), topic)
	ok := len(src) > 0 && len(src) == len(dst) && len(rows) == len(src)
	for p, o := range src {
		pd := rows[p]
		if pd.State == "FAILED" {
			t.Fatalf("%s-%d FAILED: %s", topic, p, deref(pd.LastError))
		}
		ok = ok && dst[p] == o && pd.State == "MIRRORING" && pd.Lag == 0 && pd.DestinationOffset == o
	}
	return ok, fmt.Sprintf("source %v, destination %v, describe %+v", src, dst, rows)
}

// waitCaughtUp waits until caughtUp holds.
func waitCaughtUp(t *testing.T, mirror, topic string, d time.Duration) {
	t.Helper()
	var last string
	deadline := time.Now().Add(d)
	for {
		ok, seen := caughtUp(t, mirror, topic)
		if ok {
			return
		}
		last = seen
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

// compareDumps reads partition p of topic from the source and the
// destination with kcat in the root namespace, as an independent client,
// and fails the test at the first line that differs. It returns the number
// of records compared.
func compareDumps(t *testing.T, topic string, p int32) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := testbed.ComparePartition(ctx, env.Source, env.Destination, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// compareAll compares the dumps of every partition of topic and returns
// the number of records compared.
func compareAll(t *testing.T, topic string, partitions int32) int {
	t.Helper()
	n := 0
	for p := range partitions {
		n += compareDumps(t, topic, p)
	}
	return n
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

// metrics returns a sidecar's /metrics page.
func metrics(t *testing.T, s *testbed.Sidecar) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := s.Metrics(ctx)
	if err != nil {
		t.Fatalf("metrics of sidecar %d: %v", s.BrokerID, err)
	}
	return page
}

// metricValue returns the value of the sample named exactly name (with its
// labels), or -1.
func metricValue(page, name string) float64 {
	for line := range strings.Lines(page) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// raftLeader returns the sidecar that reports itself raft leader.
func raftLeader(t *testing.T) *testbed.Sidecar {
	t.Helper()
	var leader *testbed.Sidecar
	wait.For(t, 30*time.Second, "a raft leader", func() bool {
		for _, s := range env.Sidecars.Sidecars() {
			if s.Running() && metricValue(metrics(t, s), "sidemirror_raft_leader") == 1 {
				leader = s
				return true
			}
		}
		return false
	})
	return leader
}

// backgroundProducer writes records to a source topic from a goroutine at
// a steady rate until stopped: record i has key "<prefix>-<i mod 997>", a
// value of valueSize random letters and a "seq" header, and is produced
// uncompressed, so that what crosses the network is what was written.
type backgroundProducer struct {
	t        *testing.T
	mu       sync.Mutex
	produced int
	bytes    int64
	stopc    chan struct{}
	done     chan error
	stopped  bool
}

// startProducer starts a backgroundProducer writing perSecond records a
// second to topic, in batches every 50 ms; it is stopped at test end.
func startProducer(t *testing.T, topic, prefix string, perSecond, valueSize int, seed uint64) *backgroundProducer {
	t.Helper()
	cl := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20))
	p := &backgroundProducer{t: t, stopc: make(chan struct{}), done: make(chan error, 1)}
	rng := rand.New(rand.NewPCG(seed, 1))
	go func() {
		start := time.Now()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; {
			select {
			case <-p.stopc:
				p.done <- nil
				return
			case <-tick.C:
			}
			// As many records as keep the rate since the start: a slow
			// round is made up in the next ones.
			due := int(time.Since(start).Seconds() * float64(perSecond))
			var rs []*kgo.Record
			var size int64
			for ; i < due; i++ {
				v := make([]byte, valueSize)
				for k := range v {
					v[k] = byte('a' + rng.IntN(26))
				}
				rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", prefix, i%997), Value: v,
					Headers: []kgo.RecordHeader{{Key: "seq", Value: strconv.AppendInt(nil, int64(i), 10)}}})
				size += int64(valueSize)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := cl.ProduceSync(ctx, rs...).FirstErr()
			cancel()
			if err != nil {
				p.done <- fmt.Errorf("produce to %s: %w", topic, err)
				return
			}
			p.mu.Lock()
			p.produced += len(rs)
			p.bytes += size
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if !p.stopped {
			close(p.stopc)
			p.stopped = true
		}
	})
	wait.For(t, 30*time.Second, "the producer to write to "+topic, func() bool { return p.count() > 0 })
	return p
}

// count returns the records written so far.
func (p *backgroundProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.produced
}

// stop stops the producer and fails the test if it failed.
func (p *backgroundProducer) stop() {
	p.t.Helper()
	if p.stopped {
		return
	}
	close(p.stopc)
	p.stopped = true
	if err := <-p.done; err != nil {
		p.t.Fatalf("producer: %v", err)
	}
}

// sidecarCounter returns the sum of the samples of the counter name with
// mirror's label on one sidecar's /metrics.
func sidecarCounter(t *testing.T, s *testbed.Sidecar, name, mirror string) float64 {
	t.Helper()
	sum := 0.0
	for line := range strings.Lines(metrics(t, s)) {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `mirror="`+mirror+`"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metrics line %q", line)
		}
		sum += v
	}
	return sum
}
