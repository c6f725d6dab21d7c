// Command bench measures mirroring on this machine's real Kafka test bed,
// side by side with MirrorMaker 2 and with the destination's own ingest of
// the same records (the limit).
//
// It starts a 1-node source and a 3-node destination cluster with one
// sidecar per destination broker, warms the destination up, and then runs
// every workload (-workloads) with three contenders, each on topics of its
// own holding the same records:
//
//   - limit: kcat writes the records straight to a destination topic
//     (batch.size 128 KiB, linger 20 ms, the workload's codec, acks=all):
//     what the destination ingests from a batching producer;
//   - sidemirror: the three sidecars mirror a source topic holding the
//     records (--start until the destination reaches the source's end
//     offsets);
//   - MirrorMaker 2: a dedicated-mode MM2 with IdentityReplicationPolicy
//     replicates a second source topic holding the same records, its
//     producer batching by itself (batch.size 128 KiB, linger 20 ms); its
//     time includes its start-up.
//
// Destination topics have replication factor 3 and every write is acks=all.
// It prints one table per workload: wall time, MB/s and records/s, the
// contender's CPU seconds and CPU seconds per GB, its peak RSS, the
// destination brokers' CPU seconds, and the ratios of records/s to the
// limit's and to MM2's. -doc writes the tables into the "Benchmark"
// section of docs/performance.md.
//
//	go run ./e2e/cmd/bench -records 1000000 -workloads zstd,lz4,small
//
// Everything runs on one machine (four brokers, three sidecars, MM2, kcat),
// so compare contenders of one run, not runs of different machines.
//
// Files:
//
//	main.go    flags, the test bed, the workloads and the three contenders
//	report.go  the tables, the ratios and the docs/performance.md section
//	plot.go    the SVG chart of records/s per workload and contender
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

const mirror = "bench"

// workload is one kind of source traffic.
type workload struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Codec       string `json:"codec"`
	Partitions  int    `json:"partitions"`
	// BatchBytes and Linger are the source producer's batching.
	BatchBytes int           `json:"batchBytes"`
	Linger     time.Duration `json:"linger"`
}

// workloads returns the named workloads for records of about valueBytes.
func workloads(partitions, many, valueBytes int) map[string]workload {
	large := func(codec string) workload {
		return workload{Name: codec, Description: "large batches (128 KiB, linger 20 ms), " + codec,
			Codec: codec, Partitions: partitions, BatchBytes: 128 << 10, Linger: 20 * time.Millisecond}
	}
	// Room for one record and not two: about one record per batch.
	one := valueBytes*3/2 + 100
	return map[string]workload{
		"zstd": large("zstd"),
		"lz4":  large("lz4"),
		"small": {Name: "small", Description: fmt.Sprintf("one-record batches (batch.size %d, linger 0), lz4", one),
			Codec: "lz4", Partitions: partitions, BatchBytes: one},
		"partitions": {Name: "partitions", Description: fmt.Sprintf("%d partitions, large batches, lz4", many),
			Codec: "lz4", Partitions: many, BatchBytes: 128 << 10, Linger: 20 * time.Millisecond},
	}
}

var workloadOrder = []string{"zstd", "lz4", "small", "partitions"}

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// options are the flags.
type options struct {
	Records        int    `json:"records"`
	ValueBytes     int    `json:"valueBytes"`
	Partitions     int    `json:"partitions"`
	ManyPartitions int    `json:"manyPartitions"`
	Workloads      string `json:"workloads"`
	WarmupRecords  int    `json:"warmupRecords"`
	Contenders     string `json:"contenders"`
}

func main() {
	var o options
	flag.IntVar(&o.Records, "records", 1_000_000, "records per workload")
	flag.IntVar(&o.ValueBytes, "value-bytes", 500, "average value size in bytes (JSON-like text)")
	flag.IntVar(&o.Partitions, "partitions", 6, "partitions of the topics (all workloads but partitions)")
	flag.IntVar(&o.ManyPartitions, "many-partitions", 2000, "partitions of the partitions workload")
	flag.StringVar(&o.Workloads, "workloads", strings.Join(workloadOrder, ","), "comma-separated workloads: "+strings.Join(workloadOrder, ", "))
	flag.StringVar(&o.Contenders, "contenders", "limit,sidemirror,mm2", "comma-separated contenders: limit, sidemirror, mm2")
	flag.IntVar(&o.WarmupRecords, "warmup-records", 200_000, "records written to the destination before measuring")
	doc := flag.String("doc", "", "write the tables into the Benchmark section of this Markdown file (docs/performance.md)")
	plot := flag.String("plot", "", "write an SVG chart of records/s per workload per contender to this file (linked from -doc when beside it)")
	note := flag.String("note", "", "a sentence on the run's conditions, written after the run's description in -doc")
	asJSON := flag.Bool("json", false, "print the results as one JSON line")
	flag.Parse()
	wls, err := o.selected()
	if err == nil {
		_, err = o.contenders()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o, wls)
	if err != nil {
		testbed.KillAll()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	rep.Note = *note
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(rep)
	} else {
		fmt.Print(rep.Markdown())
	}
	if *plot != "" {
		if err := writePlot(*plot, rep); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		if *doc != "" {
			if rel, err := filepath.Rel(filepath.Dir(*doc), *plot); err == nil && !strings.HasPrefix(rel, "..") {
				rep.Plot = rel
			}
		}
	}
	if *doc != "" {
		if err := writeDoc(*doc, rep); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		say("wrote the Benchmark section of " + *doc)
	}
}

// selected returns the workloads the flags name, in their order.
func (o options) selected() ([]workload, error) {
	if o.Records < 1 || o.Partitions < 1 || o.ManyPartitions < 1 || o.ValueBytes < 1 || o.WarmupRecords < 0 {
		return nil, errors.New("-records, -partitions, -many-partitions and -value-bytes must be positive, -warmup-records not negative")
	}
	all := workloads(o.Partitions, o.ManyPartitions, o.ValueBytes)
	var out []workload
	for name := range strings.SplitSeq(o.Workloads, ",") {
		name = strings.TrimSpace(name)
		w, ok := all[name]
		if !ok {
			return nil, fmt.Errorf("-workloads: %q is not one of %s", name, strings.Join(workloadOrder, ", "))
		}
		out = append(out, w)
	}
	return out, nil
}

// contenders returns the contenders the flags name.
func (o options) contenders() ([]string, error) {
	var out []string
	for name := range strings.SplitSeq(o.Contenders, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains([]string{limitName, sidemirrorName, mm2Name}, name) {
			return nil, fmt.Errorf("-contenders: %q is not one of limit, sidemirror, mm2", name)
		}
		out = append(out, name)
	}
	return out, nil
}

func say(s string) { fmt.Fprintln(os.Stderr, "bench:", s) }

// bed is the running test bed of a benchmark.
type bed struct {
	env *testbed.Env
	mm2 testbed.Distribution
	o   options
}

func run(ctx context.Context, o options, wls []workload) (*report, error) {
	contenders, _ := o.contenders()
	if _, err := exec.LookPath("kcat"); err != nil && slices.Contains(contenders, limitName) {
		return nil, errors.New("kcat not found on PATH: it measures the limit (apt-get install kcat), or leave limit out of -contenders")
	}
	opts := testbed.DefaultEnvOptions()
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true", "log.level": "info"}
	env, err := testbed.StartEnv(ctx, opts, say)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(env.Dir)
	defer env.Close()
	b := &bed{env: env, o: o}
	if slices.Contains(contenders, mm2Name) {
		if b.mm2, err = testbed.ResolveMirrorMaker(ctx, env.Dist.Version, say); err != nil {
			return nil, err
		}
	}
	mcfg := filepath.Join(env.Dir, "mirror.properties")
	if err := os.WriteFile(mcfg, []byte("bootstrap.servers="+env.Source.Bootstrap()+"\nmirror.topic.replication.factor=3\n"), 0o600); err != nil {
		return nil, err
	}
	if err := b.cli(ctx, "--create", "--mirror", mirror, "--mirror-config", mcfg); err != nil {
		return nil, err
	}
	rep := &report{Options: o, Host: describeHost(), KafkaVersion: env.Dist.Version, Date: time.Now().UTC().Format("2006-01-02")}
	if o.WarmupRecords > 0 {
		if err := b.warmUp(ctx); err != nil {
			return nil, fmt.Errorf("warming the destination up: %w", err)
		}
	}
	for _, w := range wls {
		res, err := b.workload(ctx, w, contenders)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", w.Name, err)
		}
		rep.Workloads = append(rep.Workloads, res)
		fmt.Fprint(os.Stderr, res.Table())
	}
	return rep, nil
}

// warmUp writes WarmupRecords records to a destination topic with kcat, so
// that the first contender does not meet a cold cluster (JIT, page cache,
// producer IDs).
func (b *bed) warmUp(ctx context.Context) error {
	w := workloads(b.o.Partitions, b.o.ManyPartitions, b.o.ValueBytes)["lz4"]
	say(fmt.Sprintf("warming the destination up with %d records", b.o.WarmupRecords))
	file := filepath.Join(b.env.Dir, "warmup.records")
	if err := writeRecordFile(file, b.o.WarmupRecords, b.o.ValueBytes); err != nil {
		return err
	}
	defer os.Remove(file)
	if err := createTopic(ctx, b.env.Destination, "bench-warmup", w.Partitions, 3); err != nil {
		return err
	}
	_, err := b.kcat(ctx, w, "bench-warmup", file)
	return err
}

// workload runs the contenders on one workload.
func (b *bed) workload(ctx context.Context, w workload, contenders []string) (*workloadResult, error) {
	n := b.o.Records
	smTopic, mmTopic, limitTopic := "bench-"+w.Name+"-sidemirror", "bench-"+w.Name+"-mm2", "bench-"+w.Name+"-limit"
	for _, t := range []string{smTopic, mmTopic} {
		if err := createTopic(ctx, b.env.Source, t, w.Partitions, 1); err != nil {
			return nil, err
		}
	}
	if err := b.writeSource(ctx, w, smTopic, mmTopic); err != nil {
		return nil, err
	}
	want, err := b.env.Source.EndOffsets(ctx, smTopic)
	if err != nil {
		return nil, err
	}
	res := &workloadResult{Workload: w, Records: n, ValueBytes: b.o.ValueBytes}
	// The same records on both source topics, written the same way: one
	// byte count for every contender (the source's log bytes of one topic).
	if res.SourceBytes, err = topicBytes(ctx, b.env.Source, smTopic); err != nil {
		return nil, err
	}
	for _, c := range contenders {
		var m *measurement
		switch c {
		case limitName:
			if err := createTopic(ctx, b.env.Destination, limitTopic, w.Partitions, 3); err != nil {
				return nil, err
			}
			file := filepath.Join(b.env.Dir, w.Name+".records")
			if err := writeRecordFile(file, n, b.o.ValueBytes); err != nil {
				return nil, err
			}
			say(fmt.Sprintf("%s: limit (kcat to the destination)", w.Name))
			m, err = b.kcat(ctx, w, limitTopic, file)
			os.Remove(file)
			if err == nil {
				var got map[int32]int64
				if got, err = b.env.Destination.EndOffsets(ctx, limitTopic); err == nil && sum(got) != int64(n) {
					err = fmt.Errorf("kcat wrote %d records to %s, want %d", sum(got), limitTopic, n)
				}
			}
		case sidemirrorName:
			say(fmt.Sprintf("%s: sidemirror", w.Name))
			m, err = b.sidemirror(ctx, smTopic, want)
		case mm2Name:
			say(fmt.Sprintf("%s: MirrorMaker 2", w.Name))
			m, err = b.mirrorMaker(ctx, w, mmTopic, int64(n))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		m.Contender = c
		res.add(m)
	}
	return res, nil
}

// writeSource writes the workload's records to both source topics, each
// record to one and then the other, with the workload's batching.
func (b *bed) writeSource(ctx context.Context, w workload, topics ...string) error {
	cl, err := b.env.Source.NewClient(testbed.Admin,
		kgo.ProducerBatchCompression(codecs[w.Codec]), kgo.ProducerLinger(w.Linger),
		kgo.ProducerBatchMaxBytes(int32(w.BatchBytes)), kgo.MaxBufferedRecords(50_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	say(fmt.Sprintf("%s: writing %d records to each of %s on the source", w.Name, b.o.Records, strings.Join(topics, ", ")))
	errc := make(chan error, 1)
	began := time.Now()
	gen := newGenerator(b.o.ValueBytes)
	for range b.o.Records {
		key, value := gen.next()
		for _, t := range topics {
			cl.Produce(ctx, &kgo.Record{Topic: t, Key: key, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("writing the source topics: %w", err)
	default:
	}
	say(fmt.Sprintf("%s: source written in %v", w.Name, time.Since(began).Round(time.Millisecond)))
	return nil
}

// generator makes the benchmark's records: JSON-like values of an id, a
// timestamp, a few numbers and text from a vocabulary, so that they
// compress like real events, and keys of 100,000 users. Every generator
// makes the same sequence.
type generator struct {
	rng        *rand.Rand
	valueBytes int
	ts         int64
}

var vocabulary = strings.Fields("order payment shipped cancelled customer warehouse inventory region europe america asia " +
	"premium standard express refund invoice pending approved declined retry timeout session checkout cart " +
	"product category electronics books garden toys sports device mobile desktop")

func newGenerator(valueBytes int) *generator {
	return &generator{rng: rand.New(rand.NewPCG(1, 2)), valueBytes: valueBytes, ts: 1_780_000_000_000}
}

func (g *generator) next() (key, value []byte) {
	var sb strings.Builder
	g.ts++
	fmt.Fprintf(&sb, `{"id":"%016x","ts":%d,"user":%d,"amount":%d.%02d,"msg":"`, g.rng.Uint64(), g.ts, g.rng.IntN(1_000_000), g.rng.IntN(10_000), g.rng.IntN(100))
	for sb.Len() < g.valueBytes-2 {
		sb.WriteString(vocabulary[g.rng.IntN(len(vocabulary))])
		sb.WriteByte(' ')
	}
	sb.WriteString(`"}`)
	return []byte("user-" + strconv.Itoa(g.rng.IntN(100_000))), []byte(sb.String())
}

// writeRecordFile writes n records of the generator as kcat's input: one
// record a line, key and value separated by a tab.
func writeRecordFile(path string, n, valueBytes int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	gen := newGenerator(valueBytes)
	for range n {
		k, v := gen.next()
		w.Write(k)
		w.WriteByte('\t')
		w.Write(v)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// kcat writes the records of file to topic on the destination with kcat
// (librdkafka) batching as MM2's producer does, and measures the process.
func (b *bed) kcat(ctx context.Context, w workload, topic, file string) (*measurement, error) {
	in, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	args := append(b.env.Destination.KcatArgs(testbed.Admin), "-P", "-t", topic, "-K", "\t",
		"-X", "acks=all", "-X", "enable.idempotence=true", "-X", "compression.codec="+w.Codec,
		"-X", "batch.size=131072", "-X", "linger.ms=20", "-X", "partitioner=murmur2_random",
		"-X", "queue.buffering.max.kbytes=65536")
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = in
	var stderr strings.Builder
	cmd.Stderr = &stderr
	brokers0 := b.env.Destination.CPUSeconds()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kcat: %w: %s", err, stderr.String())
	}
	m := &measurement{Seconds: time.Since(start).Seconds(), BrokerCPUSeconds: b.env.Destination.CPUSeconds() - brokers0}
	m.CPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.PeakRSSMiB = []int64{ru.Maxrss >> 10}
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		say("kcat: " + s)
	}
	return m, nil
}

// sidemirror starts the mirror of topic and waits for the destination to
// reach the source's end offsets.
func (b *bed) sidemirror(ctx context.Context, topic string, want map[int32]int64) (*measurement, error) {
	sidecars := b.env.Sidecars.Sidecars()
	for _, s := range sidecars {
		testbed.ResetPeakRSS(s.PID())
	}
	bytes0, err := b.env.Sidecars.SumMetric(ctx, "sidemirror_mirrored_bytes_total", mirror)
	if err != nil {
		return nil, err
	}
	cpu0, brokers0 := b.env.Sidecars.CPUSeconds(), b.env.Destination.CPUSeconds()
	start := time.Now()
	if err := b.cli(ctx, "--start", "--topics", topic, "--mirror", mirror); err != nil {
		return nil, err
	}
	first, err := waitFor(ctx, b.env.Destination, topic, func(got map[int32]int64) bool { return caughtUp(got, want) })
	if err != nil {
		return nil, err
	}
	m := &measurement{Seconds: time.Since(start).Seconds(), FirstRecordSeconds: first.Sub(start).Seconds(),
		CPUSeconds: b.env.Sidecars.CPUSeconds() - cpu0, BrokerCPUSeconds: b.env.Destination.CPUSeconds() - brokers0}
	for _, s := range sidecars {
		m.PeakRSSMiB = append(m.PeakRSSMiB, s.PeakRSS()>>20)
	}
	bytes1, err := b.env.Sidecars.SumMetric(ctx, "sidemirror_mirrored_bytes_total", mirror)
	if err != nil {
		return nil, err
	}
	if bytes1 <= bytes0 {
		return nil, errors.New("the sidecars report no mirrored bytes")
	}
	return m, nil
}

// mirrorMaker runs a dedicated-mode MM2 that replicates topic to the
// destination under the same name, waits for the destination to hold its
// records, and stops MM2.
func (b *bed) mirrorMaker(ctx context.Context, w workload, topic string, records int64) (*measurement, error) {
	alias := "src" + w.Name
	flow := alias + "->dst."
	identity := "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
	brokers0 := b.env.Destination.CPUSeconds()
	start := time.Now()
	mm, err := testbed.StartMirrorMaker(b.mm2, b.env.Dir, testbed.MirrorMakerOptions{
		SourceAlias: alias, TargetAlias: "dst", Source: b.env.Source, Target: b.env.Destination,
		Topics: topic, Groups: "none-" + w.Name, HeapMB: 1024,
		Config: map[string]string{
			"replication.policy.class":               identity,
			flow + "replication.policy.class":        identity,
			flow + "replication.factor":              "3",
			flow + "tasks.max":                       "3",
			flow + "emit.heartbeats.enabled":         "false",
			flow + "emit.checkpoints.enabled":        "false",
			flow + "sync.group.offsets.enabled":      "false",
			flow + "sync.topic.acls.enabled":         "false",
			flow + "refresh.topics.interval.seconds": "5",
			"dst.producer.batch.size":                "131072",
			"dst.producer.linger.ms":                 "20",
			"dst.producer.acks":                      "all",
			"dst.producer.compression.type":          w.Codec,
			"dst.producer.enable.idempotence":        "true",
		},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := mm.Stop(sctx); err != nil {
			say(err.Error())
		}
	}()
	pid := mm.PID()
	first, err := waitFor(ctx, b.env.Destination, topic, func(got map[int32]int64) bool {
		if !mm.Running() {
			return true
		}
		return sum(got) >= records
	})
	if err != nil {
		return nil, err
	}
	if !mm.Running() {
		return nil, fmt.Errorf("MirrorMaker 2 exited:\n%s", mm.LogTail(40))
	}
	return &measurement{Seconds: time.Since(start).Seconds(), FirstRecordSeconds: first.Sub(start).Seconds(),
		CPUSeconds: testbed.ProcessCPUSeconds(pid), PeakRSSMiB: []int64{testbed.ProcessPeakRSS(pid) >> 20},
		BrokerCPUSeconds: b.env.Destination.CPUSeconds() - brokers0}, nil
}

// waitFor polls topic's end offsets on c until done accepts them and
// returns when the first record was seen.
func waitFor(ctx context.Context, c *testbed.Cluster, topic string, done func(map[int32]int64) bool) (time.Time, error) {
	var first time.Time
	deadline := time.Now().Add(30 * time.Minute)
	for {
		// An error: the destination topic is new, try again.
		got, err := c.EndOffsets(ctx, topic)
		if err == nil && sum(got) > 0 && first.IsZero() {
			first = time.Now()
		}
		if err == nil && done(got) {
			return first, nil
		}
		if time.Now().After(deadline) {
			return first, fmt.Errorf("%s did not catch up within 30 minutes (end offsets %v, %v)", topic, got, err)
		}
		select {
		case <-ctx.Done():
			return first, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (b *bed) cli(ctx context.Context, args ...string) error {
	args = append([]string{"--bootstrap-server", b.env.Sidecars.AdminBootstrap()}, args...)
	out, err := exec.CommandContext(ctx, b.env.Bin.CLI, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafka-cluster-mirrors %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func createTopic(ctx context.Context, c *testbed.Cluster, topic string, partitions, rf int) error {
	adm, err := c.NewClient(testbed.Admin)
	if err != nil {
		return err
	}
	defer adm.Close()
	resp, err := kadm.NewClient(adm).CreateTopic(ctx, int32(partitions), int16(rf), nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating %s on %s: %w", topic, c.Name(), err)
	}
	return nil
}

// topicBytes returns the size of topic's logs on c (one replica each).
func topicBytes(ctx context.Context, c *testbed.Cluster, topic string) (int64, error) {
	adm, err := c.NewClient(testbed.Admin)
	if err != nil {
		return 0, err
	}
	defer adm.Close()
	dirs, err := kadm.NewClient(adm).DescribeAllLogDirs(ctx, nil) // nil: every topic (a topic without partitions in the set would be none)
	if err != nil {
		return 0, fmt.Errorf("describing the log directories of %s: %w", topic, err)
	}
	var total int64
	for _, ds := range dirs {
		ds.EachPartition(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic {
				total += p.Size
			}
		})
	}
	if total == 0 {
		return 0, fmt.Errorf("%s has no bytes on %s", topic, c.Name())
	}
	return total, nil
}

func caughtUp(got, want map[int32]int64) bool {
	for p, o := range want {
		if got[p] != o {
			return false
		}
	}
	return len(want) > 0
}

func sum(offs map[int32]int64) int64 {
	var n int64
	for _, o := range offs {
		n += o
	}
	return n
}

// describeHost names the machine: CPU model, cores and load at the start.
func describeHost() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := ""
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = ", load average " + strings.Join(strings.Fields(string(data))[:3], " ") + " at the start"
	}
	return fmt.Sprintf("%d cores (%s)%s", runtime.NumCPU(), model, load)
}
