package mirror

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// compactedDump is a kcat dump of one partition: offset -> the rest of the
// record's line (timestamp, key and value lengths, key, value, headers).
type compactedDump struct {
	offsets []int64
	lines   map[int64]string
}

// dumpPartition reads partition p of topic on c with kcat.
func dumpPartition(t *testing.T, c *testbed.Cluster, topic string, p int32, extra ...string) compactedDump {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := c.DumpPartition(ctx, testbed.Admin, topic, p, testbed.DumpFormat, extra...)
	if err != nil {
		t.Fatal(err)
	}
	d := compactedDump{lines: map[int64]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		off, rest, ok := strings.Cut(sc.Text(), " ")
		o, err := strconv.ParseInt(off, 10, 64)
		if !ok || err != nil {
			t.Fatalf("kcat line %q", sc.Text())
		}
		if n := len(d.offsets); n > 0 && o <= d.offsets[n-1] {
			t.Fatalf("%s: offset %d after %d", c.Name(), o, d.offsets[n-1])
		}
		d.offsets = append(d.offsets, o)
		d.lines[o] = rest
	}
	return d
}

// lineKey returns the key of a dump line (its offset cut off).
func lineKey(line string) string { return strings.SplitN(line, " ", 5)[3] }

// supersededAt reports whether a later record of d has the key of the
// record at offset o.
func (d compactedDump) supersededAt(o int64) bool {
	key := lineKey(d.lines[o])
	i := sort.Search(len(d.offsets), func(i int) bool { return d.offsets[i] > o })
	for _, later := range d.offsets[i:] {
		if lineKey(d.lines[later]) == key {
			return true
		}
	}
	return false
}

// table returns the latest value line per key (keys whose latest record is
// a tombstone are absent, as they are once compaction removed it).
func (d compactedDump) table() map[string]string {
	out := map[string]string{}
	for _, o := range d.offsets {
		f := strings.SplitN(d.lines[o], " ", 6) // ts, key length, value length, key, value, headers
		if f[2] == "-1" {
			delete(out, f[3])
			continue
		}
		out[f[3]] = f[4] + " " + f[5]
	}
	return out
}

// holeRuns returns the number of offsets in start..end-1 that no record of
// d holds, and the number of runs they form.
func (d compactedDump) holeRuns(start, end int64) (holes, runs int64) {
	next := start
	for _, o := range append(append([]int64{}, d.offsets...), end) {
		if o > next {
			holes += o - next
			runs++
		}
		next = o + 1
	}
	return holes, runs
}

// innerHoleBatches counts the source batches of topic/p whose record count
// is below their offset range (compaction holes inside the batch) and the
// empty ones.
func innerHoleBatches(t *testing.T, topic string, p int32) (holed, empty int) {
	t.Helper()
	for _, b := range rawBatches(t, env.Source, topic, p) {
		// content is bytes 21..42 then 57..: last offset delta at 2, record count at 22.
		last := int32(binary.BigEndian.Uint32(b.content[2:6]))
		n := int32(binary.BigEndian.Uint32(b.content[22:26]))
		switch {
		case n == 0:
			empty++
		case n != last+1:
			holed++
		}
	}
	return holed, empty
}

// eagerCompaction returns the configs of a compacted source topic whose
// segments roll every 100 ms and whose cleaner runs as soon and as often
// as it can, tombstones included.
func eagerCompaction() map[string]*string {
	str := func(s string) *string { return &s }
	return map[string]*string{
		"cleanup.policy":            str("compact"),
		"segment.ms":                str("100"),
		"segment.bytes":             str("1048576"),
		"min.cleanable.dirty.ratio": str("0.01"),
		"delete.retention.ms":       str("100"),
		"min.compaction.lag.ms":     str("0"),
		"max.compaction.lag.ms":     str("100"),
	}
}

// produceOverwrites writes n records over keys key-0..key-(keys-1), every
// 13th a tombstone, with one producer per codec (batches of at most 4 KiB, so
// that compaction leaves holes inside many), in waves so that segments
// roll (segment.ms) and the cleaner has something to clean.
func produceOverwrites(t *testing.T, topic string, keys, n, waves int, seed uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var cls []*kgo.Client
	for _, cc := range codecs {
		cls = append(cls, newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(cc.codec), kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(4096),
			kgo.RecordPartitioner(kgo.ManualPartitioner())))
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for w := range waves {
		for i := w * n / waves; i < (w+1)*n/waves; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "key-%d", rng.IntN(keys))}
			if i%13 != 0 {
				r.Value = append(fmt.Appendf(nil, "v%d-", i), printable(rng, 10+rng.IntN(90))...)
			}
			if i%5 == 0 {
				r.Headers = []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}
			}
			cls[i%len(cls)].Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		for _, cl := range cls {
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(150 * time.Millisecond) // > segment.ms: the next wave rolls a segment
	}
}

// checkCompactedMirror compares kcat dumps of both sides: the destination
// ends where the source ends; each destination record is the source's
// record at its offset or a copy of the next live source record after it
// (the destination's own compaction may have removed some); the tables
// (latest value per key) are identical.
func checkCompactedMirror(t *testing.T, topic string, extra ...string) (live, copies int) {
	t.Helper()
	src, dst := dumpPartition(t, env.Source, topic, 0, extra...), dumpPartition(t, env.Destination, topic, 0, extra...)
	for _, o := range dst.offsets {
		i := sort.Search(len(src.offsets), func(i int) bool { return src.offsets[i] >= o })
		if i == len(src.offsets) {
			t.Fatalf("destination offset %d: after the last source record %d", o, src.offsets[len(src.offsets)-1])
		}
		s := src.offsets[i]
		if dst.lines[o] != src.lines[s] {
			// The source's cleaner may have removed the record after it was
			// mirrored; it removes a record only when a later one of the
			// same key exists, which the destination must then hold too.
			if s != o && dst.supersededAt(o) {
				continue
			}
			t.Fatalf("destination offset %d: %.200q, want (a copy of) source offset %d: %.200q", o, dst.lines[o], s, src.lines[s])
		}
		if s == o {
			live++
		} else {
			copies++
		}
	}
	st, dt := src.table(), dst.table()
	if len(st) != len(dt) {
		t.Fatalf("source table has %d keys, destination %d", len(st), len(dt))
	}
	for k, v := range st {
		if dt[k] != v {
			t.Fatalf("key %s: source %q, destination %q", k, v, dt[k])
		}
	}
	return live, copies
}

// sumMetric sums the samples of metric name for mirror over all sidecars.
func sumMetric(t *testing.T, name, mirror string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	total, err := env.Sidecars.SumMetric(ctx, name, mirror)
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// TestCompaction mirrors a compacted source topic whose log has compaction
// holes between and inside batches (DESIGN.md D2, mirror.offsets=exact).
func TestCompaction(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, keys = "compaction", "compacted", 300
	createSourceTopic(t, topic, 1, eagerCompaction())

	// Overwrite until the cleaner has left holes between and inside batches.
	var holes, runs int64
	var holed, empty int
	deadline := time.Now().Add(3 * time.Minute)
	for wave := uint64(0); ; wave++ {
		produceOverwrites(t, topic, keys, 6000, 6, wave)
		end := endOffsets(t, env.Source, topic)[0]
		src := dumpPartition(t, env.Source, topic, 0)
		holes, runs = src.holeRuns(startOffsets(t, env.Source, topic)[0], end)
		holed, empty = innerHoleBatches(t, topic, 0)
		t.Logf("source: end offset %d, %d records, %d holes in %d runs, %d batches with holes inside, %d empty batches",
			end, len(src.offsets), holes, runs, holed, empty)
		if holes > 0 && holed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the source log has no compaction holes inside batches after 3 minutes")
		}
		time.Sleep(5 * time.Second)
	}

	cpu := sidecarCPU(t)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		mirrorConfigFile(t, map[string]string{"mirror.metadata.refresh.interval.ms": "2000"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 5*time.Minute)
	live, copies := checkCompactedMirror(t, topic)
	fillers := sumMetric(t, "sidemirror_filler_records_total", mirror)
	rebuilt := sumMetric(t, "sidemirror_rebuilt_batches_total", mirror)
	t.Logf("first pass: destination %d live records, %d copies; sidemirror_filler_records_total %v (source holes %d in %d runs), "+
		"sidemirror_rebuilt_batches_total %v (source batches with holes inside %d, empty %d), mirrored bytes %d, sidecar CPU %.2fs",
		live, copies, fillers, holes, runs, rebuilt, holed, empty, mirroredBytes(t, mirror), sidecarCPU(t)-cpu)
	if fillers < float64(holes) || rebuilt == 0 {
		t.Fatalf("fillers %v for %d holes, %v rebuilt batches", fillers, holes, rebuilt)
	}
	checkGroupOutOfHole(t, topic)

	// More overwrites while mirroring.
	for wave := uint64(100); wave < 103; wave++ {
		produceOverwrites(t, topic, keys, 6000, 6, wave)
		time.Sleep(3 * time.Second)
	}
	waitCaughtUp(t, mirror, topic, 5*time.Minute)
	live, copies = checkCompactedMirror(t, topic)
	t.Logf("second pass: destination %d live records, %d copies; sidemirror_filler_records_total %v, sidemirror_rebuilt_batches_total %v, "+
		"mirrored bytes %d, sidecar CPU %.2fs",
		live, copies, sumMetric(t, "sidemirror_filler_records_total", mirror), sumMetric(t, "sidemirror_rebuilt_batches_total", mirror),
		mirroredBytes(t, mirror), sidecarCPU(t)-cpu)
}

// checkGroupOutOfHole commits, for an idle source group, an offset inside a
// compaction hole of topic-0 and waits for the group offset sync: the
// destination's committed offset must be the next live source record (a
// consumer there reads it once, as on the source, instead of the fillers
// that copy it).
func checkGroupOutOfHole(t *testing.T, topic string) {
	t.Helper()
	const group = "compaction-group"
	src := dumpPartition(t, env.Source, topic, 0)
	hole := int64(-1)
	for i := 1; i < len(src.offsets); i++ {
		if src.offsets[i] > src.offsets[i-1]+1 {
			hole = src.offsets[i-1] + 1
			break
		}
	}
	if hole < 0 {
		t.Fatal("no hole between two live source records")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: topic, Partition: 0, At: hole, LeaderEpoch: -1})
	if resp, err := kadm.NewClient(newClient(t, env.Source, testbed.Admin)).CommitOffsets(ctx, group, off); err != nil || resp.Error() != nil {
		t.Fatalf("commit offset %d for %s on the source: %v %v", hole, group, err, resp.Error())
	}
	dstAdm := kadm.NewClient(newClient(t, env.Destination, testbed.Admin))
	var at int64 = -1
	wait.For(t, time.Minute, "the group offset sync", func() bool {
		fetched, err := dstAdm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		o, ok := fetched.Lookup(topic, 0)
		at = o.At
		return ok && o.Err == nil
	})
	// The sync looked the live record up; the cleaner may have removed it
	// since, but never a record before it.
	now := dumpPartition(t, env.Source, topic, 0)
	i := sort.Search(len(now.offsets), func(i int) bool { return now.offsets[i] >= hole })
	if i == len(now.offsets) || at <= hole || at > now.offsets[i] {
		t.Fatalf("source offset %d (a hole) was committed as %d on the destination; the next live source record is at %v",
			hole, at, now.offsets[i:min(i+1, len(now.offsets))])
	}
	dst := dumpPartition(t, env.Destination, topic, 0)
	// (The destination's own cleaner may have removed it meanwhile.)
	if line, ok := dst.lines[at]; ok && at == now.offsets[i] && line != now.lines[at] {
		t.Fatalf("destination offset %d (committed for %s) holds %.200q, want the source's %.200q", at, group, line, now.lines[at])
	}
	t.Logf("group offset in a compaction hole: source %d, destination %d (%d fillers skipped)", hole, at, at-hole)
}
