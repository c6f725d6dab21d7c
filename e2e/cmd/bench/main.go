// Command bench measures mirroring on this machine's real Kafka test bed,
// side by side with MirrorMaker 2 and with the destination's own ingest of
// the same records (the limit).
//
// It starts a 1-node source (a proxy in front of its node) and a 3-node
// destination cluster with one sidecar per destination broker, warms the
// destination up, and then runs every workload (-workloads) with three
// contenders, each on topics of its own holding the same records:
//
//   - limit: kcat writes the records straight to a destination topic
//     (batch.size 128 KiB, linger 20 ms, the workload's codec, acks=all):
//     what the destination ingests from a batching producer; for the
//     transactional workload Kafka's ProducerPerformance with transactions
//     of 100 ms (kcat writes none);
//   - sidemirror: the three sidecars mirror a source topic holding the
//     records (--start until the destination reaches the source's end
//     offsets);
//   - MirrorMaker 2: a dedicated-mode MM2 with IdentityReplicationPolicy
//     replicates a second source topic holding the same records, its
//     producer batching by itself (batch.size 128 KiB, linger 20 ms); its
//     time includes its start-up.
//
// The workloads: large batches with zstd and with lz4; one-record batches;
// many partitions (-many-partitions); transactions (txnRecords per
// transaction); a compacted topic (compacted on the source before the
// mirrors start); and a 50 ms latency link, where the mirrors reach the
// source through its node's proxy with 50 ms added each way, and sidemirror
// is also measured through the proxy without the latency (the ratio is the
// link's cost). After the workloads of -probe-workloads a latency probe
// writes timestamped records at half of each mirror's measured rate and a
// destination consumer measures their end-to-end latency (p50, p99).
//
// Destination topics have replication factor 3 and every write is acks=all.
// It prints one table per workload: wall time, MB/s and records/s, the
// contender's CPU seconds and CPU seconds per GB, its peak RSS, the
// destination brokers' CPU seconds, the ratios of records/s to the limit's
// and to MM2's, and the probe's latency. -doc writes the tables into the
// "Benchmark" section of docs/performance.md, -plot and -lag-plot PNG
// charts of records/s and of each mirror's lag over time.
//
//	go run ./e2e/cmd/bench -records 1000000
//
// -scale-partitions N measures instead one sidecar beside a 1-node
// destination with N partitions (scale.go; make bench-partitions).
//
// Everything runs on one machine (four brokers, three sidecars, MM2, kcat),
// so compare contenders of one run, not runs of different machines.
//
// Files:
//
//	main.go    flags, the test bed, the workloads and the three contenders
//	probe.go   the end-to-end latency probe
//	scale.go   the many-partitions run on one sidecar (-scale-partitions)
//	report.go  the tables, the ratios and the docs/performance.md section
//	plot.go    the PNG charts (gonum/plot): records/s, lag over time
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
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// The mirrors: bench reaches the source directly, benchWAN through the
// source nodes' proxies (the latency workloads).
const (
	mirror    = "bench"
	benchWAN  = "bench-wan"
	probeLead = 2 * time.Second // probe records of the first seconds are not counted
)

// workload is one kind of source traffic.
type workload struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Codec       string `json:"codec"`
	Partitions  int    `json:"partitions"`
	// BatchBytes and Linger are the source producer's batching.
	BatchBytes int           `json:"batchBytes"`
	Linger     time.Duration `json:"linger"`
	// Transactional: the source producer writes transactions of
	// txnRecords records per topic, and the limit is Kafka's
	// ProducerPerformance with transactions.
	Transactional bool `json:"transactional,omitempty"`
	// Compacted: every topic has cleanup.policy=compact, and the source's
	// log cleaner compacts the source topics before the contenders run.
	Compacted bool `json:"compacted,omitempty"`
	// Latency: the mirrors reach the source through the nodes' proxies,
	// which add this latency in each direction.
	Latency time.Duration `json:"latency,omitempty"`
}

// txnRecords is the number of records of each source transaction per topic.
const txnRecords = 1000

// compactSegmentBytes is the source segment size of the compacted
// workload: small, so that the log cleaner has closed segments to compact.
const compactSegmentBytes = 1 << 20

// workloads returns the named workloads for records of about valueBytes.
func workloads(partitions, many, valueBytes int) map[string]workload {
	large := func(codec string) workload {
		return workload{Name: codec, Description: "large batches (128 KiB, linger 20 ms), " + codec,
			Codec: codec, Partitions: partitions, BatchBytes: 128 << 10, Linger: 20 * time.Millisecond}
	}
	// Room for one record and not two: about one record per batch.
	one := valueBytes*3/2 + 100
	txn := large("lz4")
	txn.Name, txn.Transactional = "txn", true
	txn.Description = fmt.Sprintf("transactions (%s records per transaction and topic), large batches, lz4", thousands(txnRecords))
	compacted := large("lz4")
	compacted.Name, compacted.Compacted = "compacted", true
	compacted.Description = "compacted topic (cleanup.policy=compact, 100,000 keys, compacted on the source first), large batches, lz4"
	wan := large("lz4")
	wan.Name, wan.Latency = "latency50ms", 50*time.Millisecond
	wan.Description = "a 50 ms latency link to the source (each direction), large batches, lz4"
	return map[string]workload{
		"zstd":        large("zstd"),
		"lz4":         large("lz4"),
		"txn":         txn,
		"compacted":   compacted,
		"latency50ms": wan,
		"small": {Name: "small", Description: fmt.Sprintf("one-record batches (batch.size %d, linger 0), lz4", one),
			Codec: "lz4", Partitions: partitions, BatchBytes: one},
		"partitions": {Name: "partitions", Description: fmt.Sprintf("%d partitions, large batches, lz4", many),
			Codec: "lz4", Partitions: many, BatchBytes: 128 << 10, Linger: 20 * time.Millisecond},
	}
}

var workloadOrder = []string{"zstd", "lz4", "small", "partitions", "txn", "compacted", "latency50ms"}

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
	// ProbeWorkloads are the workloads after which the latency probe runs
	// for each mirror, ProbeDuration how long it writes.
	ProbeWorkloads string        `json:"probeWorkloads"`
	ProbeDuration  time.Duration `json:"probeDuration"`
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
	flag.StringVar(&o.ProbeWorkloads, "probe-workloads", "lz4,latency50ms", "comma-separated workloads after which a probe measures each mirror's end-to-end latency at half its measured records/s or of the destination's own ingest, the lower (empty: none)")
	flag.DurationVar(&o.ProbeDuration, "probe-duration", 20*time.Second, "how long the latency probe writes")
	doc := flag.String("doc", "", "write the tables into the Benchmark section of this Markdown file (docs/performance.md)")
	plot := flag.String("plot", "", "write a PNG chart of records/s per workload per contender to this file (linked from -doc when beside it)")
	lagPlot := flag.String("lag-plot", "", "write a PNG chart of each mirror's lag over time during each workload's backlog drain to this file (linked from -doc when beside it)")
	note := flag.String("note", "", "a sentence on the run's conditions, written after the run's description in -doc")
	asJSON := flag.Bool("json", false, "print the results as one JSON line")
	var so scaleOptions
	flag.IntVar(&so.Partitions, "scale-partitions", 0, "instead of the workloads: one sidecar beside a 1-node destination mirrors a backlog of this many partitions (make bench-partitions: 10000)")
	flag.IntVar(&so.Fresh, "scale-fresh", 2000, "with -scale-partitions: partitions started once the others mirror, timed to their first record")
	flag.IntVar(&so.Stop, "scale-stop", 1000, "with -scale-partitions: partitions of the backlog stopped at the end, timed")
	flag.IntVar(&so.Records, "scale-records", 20, "with -scale-partitions: records of the backlog per partition")
	flag.Parse()
	if so.Partitions > 0 {
		so.ValueBytes = o.ValueBytes
		mainScale(so, *doc, *note, *asJSON)
		return
	}
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
	for _, pl := range []struct {
		path  string
		write func(string, *report) error
		link  *string
	}{{*plot, writeThroughputPNG, &rep.Plot}, {*lagPlot, writeLagPNG, &rep.LagPlot}} {
		if pl.path == "" {
			continue
		}
		if err := pl.write(pl.path, rep); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		say("wrote " + pl.path)
		if *doc != "" {
			if rel, err := filepath.Rel(filepath.Dir(*doc), pl.path); err == nil && !strings.HasPrefix(rel, "..") {
				*pl.link = rel
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

// mainScale runs the many-partitions measurement (-scale-partitions)
// and writes its section of doc.
func mainScale(so scaleOptions, doc, note string, asJSON bool) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := runScale(ctx, so, say)
	if err != nil {
		testbed.KillAll()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	res.Note = note
	if asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(res)
	} else {
		fmt.Print(res.Markdown())
	}
	if doc != "" {
		if err := writeScaleDoc(doc, res); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		say("wrote the " + strings.TrimPrefix(scaleHeading, "## ") + " section of " + doc)
	}
}

// selected returns the workloads the flags name, in their order.
func (o options) selected() ([]workload, error) {
	if o.Records < 1 || o.Partitions < 1 || o.ManyPartitions < 1 || o.ValueBytes < 1 || o.WarmupRecords < 0 || o.ProbeDuration <= probeLead {
		return nil, fmt.Errorf("-records, -partitions, -many-partitions and -value-bytes must be positive, -warmup-records not negative, -probe-duration longer than %v", probeLead)
	}
	all := workloads(o.Partitions, o.ManyPartitions, o.ValueBytes)
	for name := range strings.SplitSeq(o.ProbeWorkloads, ",") {
		if name = strings.TrimSpace(name); name != "" && all[name].Name == "" {
			return nil, fmt.Errorf("-probe-workloads: %q is not one of %s", name, strings.Join(workloadOrder, ", "))
		}
	}
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
	// A proxy in front of every source node (idle but for the latency
	// workloads, whose mirrors reach the source through them).
	opts.Source.Proxied = true
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
	for name, bootstrap := range map[string]string{mirror: env.Source.Bootstrap(), benchWAN: env.Source.RemoteBootstrap()} {
		mcfg := filepath.Join(env.Dir, name+".properties")
		if err := os.WriteFile(mcfg, []byte("bootstrap.servers="+bootstrap+"\nmirror.topic.replication.factor=3\n"), 0o600); err != nil {
			return nil, err
		}
		if err := b.cli(ctx, "--create", "--mirror", name, "--mirror-config", mcfg); err != nil {
			return nil, err
		}
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
	if err := writeRecordFile(file, b.o.WarmupRecords, b.o.ValueBytes, false); err != nil {
		return err
	}
	defer os.Remove(file)
	if err := createTopic(ctx, b.env.Destination, "bench-warmup", w.Partitions, 3, nil); err != nil {
		return err
	}
	_, err := b.kcat(ctx, w, "bench-warmup", file)
	return err
}

// workload runs the contenders on one workload: it writes the records to
// a source topic per mirror contender, then measures each contender, then
// runs the latency probe for each mirror if the workload is one of
// -probe-workloads.
func (b *bed) workload(ctx context.Context, w workload, contenders []string) (*workloadResult, error) {
	n := b.o.Records
	topic := func(c string) string { return "bench-" + w.Name + "-" + c }
	// A latency workload also measures sidemirror through the same proxies
	// without the latency: the ratio of the two is the link's cost.
	if w.Latency > 0 && slices.Contains(contenders, sidemirrorName) {
		i := slices.Index(contenders, sidemirrorName)
		contenders = slices.Insert(slices.Clone(contenders), i, sidemirrorNoLatencyName)
	}
	var sources []string
	for _, c := range contenders {
		if c != limitName {
			sources = append(sources, topic(c))
		}
	}
	for _, t := range sources {
		if err := createTopic(ctx, b.env.Source, t, w.Partitions, 1, w.topicConfigs(true)); err != nil {
			return nil, err
		}
	}
	if len(sources) > 0 {
		if err := b.writeSource(ctx, w, sources...); err != nil {
			return nil, err
		}
	}
	res := &workloadResult{Workload: w, Records: n, ValueBytes: b.o.ValueBytes}
	if w.Compacted && len(sources) > 0 {
		var err error
		if res.Note, err = b.waitCompacted(ctx, w, sources); err != nil {
			return nil, err
		}
	}
	// The same records on every source topic, written the same way: one
	// byte count for every contender (the source's log bytes of one topic).
	if len(sources) > 0 {
		var err error
		if res.SourceBytes, err = topicBytes(ctx, b.env.Source, sources[0]); err != nil {
			return nil, err
		}
	}
	if w.Latency > 0 {
		defer b.env.SetSourceLatency(0)
	}
	for _, c := range contenders {
		var m *measurement
		var err error
		switch c {
		case limitName:
			m, err = b.limit(ctx, w, topic(c))
		case sidemirrorName, sidemirrorNoLatencyName:
			name := w.mirror()
			if w.Latency > 0 {
				lat := w.Latency
				if c == sidemirrorNoLatencyName {
					lat = 0
				}
				if err := b.env.SetSourceLatency(lat); err != nil {
					return nil, err
				}
			}
			say(fmt.Sprintf("%s: %s", w.Name, contenderTitle[c]))
			var want map[int32]int64
			if want, err = b.env.Source.EndOffsets(ctx, topic(c)); err == nil {
				m, err = b.sidemirror(ctx, name, topic(c), want)
			}
		case mm2Name:
			if err := b.env.SetSourceLatency(w.Latency); err != nil && w.Latency > 0 {
				return nil, err
			}
			say(fmt.Sprintf("%s: MirrorMaker 2", w.Name))
			// MM2 copies records, not offsets: what it must write is the
			// records its source topic holds (fewer than were written once
			// compacted; no transaction markers).
			records := int64(n)
			if w.Compacted {
				if records, err = countRecords(ctx, b.env.Source, topic(c)); err != nil {
					return nil, err
				}
			}
			m, err = b.mirrorMaker(ctx, w, topic(c), records)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		m.Contender = c
		res.add(m)
	}
	if b.probes(w) {
		for _, c := range contenders {
			if c != sidemirrorName && c != mm2Name {
				continue
			}
			if err := b.probe(ctx, w, c, res.find(c), res.find(limitName)); err != nil {
				return nil, fmt.Errorf("latency probe of %s: %w", c, err)
			}
		}
	}
	if err := b.drop(ctx, w, contenders, topic); err != nil {
		say(fmt.Sprintf("%s: cleaning up (the measurements stand): %v", w.Name, err))
	}
	return res, nil
}

// drop stops sidemirror's mirror topics of a measured workload and deletes
// the workload's topics (its probes' too) on both clusters, so that the
// next workload meets brokers that hold no more than the warm-up (after the
// partitions workload, five topics of 2,000 partitions had made every later
// write to the 2-core destination slower).
func (b *bed) drop(ctx context.Context, w workload, contenders []string, topic func(string) string) error {
	var sources, dests []string
	for _, c := range contenders {
		dests = append(dests, topic(c))
		if c == limitName {
			continue
		}
		sources = append(sources, topic(c))
		if b.probes(w) && (c == sidemirrorName || c == mm2Name) {
			probe := probeTopic(w, c) // its mirror stopped by the probe
			sources, dests = append(sources, probe), append(dests, probe)
		}
		if c == sidemirrorName || c == sidemirrorNoLatencyName {
			if err := b.cli(ctx, "--stop", "--topics", topic(c), "--mirror", w.mirror()); err != nil {
				return err
			}
		}
	}
	if err := deleteTopics(ctx, b.env.Source, sources...); err != nil {
		return err
	}
	return deleteTopics(ctx, b.env.Destination, dests...)
}

// deleteTopics deletes topics on c; one that does not exist is no error.
func deleteTopics(ctx context.Context, c *testbed.Cluster, topics ...string) error {
	adm, err := c.NewClient(testbed.Admin)
	if err != nil {
		return err
	}
	defer adm.Close()
	resps, err := kadm.NewClient(adm).DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("deleting %v on %s: %w", topics, c.Name(), err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("deleting %s on %s: %w", r.Topic, c.Name(), r.Err)
		}
	}
	return nil
}

// mirror is the sidemirror mirror that reads w's topics: the one through the
// source's latency proxy for a latency workload.
func (w workload) mirror() string {
	if w.Latency > 0 {
		return benchWAN
	}
	return mirror
}

// probes reports whether the latency probe runs after w.
func (b *bed) probes(w workload) bool {
	for name := range strings.SplitSeq(b.o.ProbeWorkloads, ",") {
		if strings.TrimSpace(name) == w.Name {
			return true
		}
	}
	return false
}

// topicConfigs returns the configs of the workload's topics: compaction
// for the compacted workload (with small segments on the source, so that
// its cleaner has closed segments to compact).
func (w workload) topicConfigs(source bool) map[string]*string {
	if !w.Compacted {
		return nil
	}
	cfg := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	if source {
		cfg["segment.bytes"] = kadm.StringPtr(strconv.Itoa(compactSegmentBytes))
		cfg["min.cleanable.dirty.ratio"] = kadm.StringPtr("0.01")
	}
	return cfg
}

// limit measures the destination's own ingest of the workload's records:
// kcat, or for transactions Kafka's ProducerPerformance (kcat writes no
// transactions).
func (b *bed) limit(ctx context.Context, w workload, topic string) (*measurement, error) {
	n := b.o.Records
	if err := createTopic(ctx, b.env.Destination, topic, w.Partitions, 3, w.topicConfigs(false)); err != nil {
		return nil, err
	}
	file := filepath.Join(b.env.Dir, w.Name+".records")
	lines := n
	if w.Transactional {
		// ProducerPerformance holds its payload file in memory and picks
		// a payload at random for every record: a sample of the values
		// does, where a million of them would not fit its heap.
		lines = min(n, perfPayloads)
	}
	if err := writeRecordFile(file, lines, b.o.ValueBytes, w.Transactional); err != nil {
		return nil, err
	}
	defer os.Remove(file)
	var m *measurement
	var err error
	if w.Transactional {
		say(fmt.Sprintf("%s: limit (ProducerPerformance with transactions to the destination)", w.Name))
		m, err = b.producerPerformance(ctx, w, topic, file)
	} else {
		say(fmt.Sprintf("%s: limit (kcat to the destination)", w.Name))
		m, err = b.kcat(ctx, w, topic, file)
	}
	if err != nil {
		return nil, err
	}
	got, err := b.env.Destination.EndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	// Transactions add a marker per partition and transaction.
	if sum(got) < int64(n) || (!w.Transactional && sum(got) != int64(n)) {
		return nil, fmt.Errorf("the limit wrote %d offsets to %s, want %d records", sum(got), topic, n)
	}
	return m, nil
}

// waitCompacted waits until the source's log cleaner compacted every one
// of topics: their log bytes dropped and then held still for three polls
// (at most 5 minutes a topic, then it warns and goes on). A topic whose
// partitions hold two segments or less each has no closed segment worth
// cleaning and is not waited for. It returns a sentence on what the
// cleaner did, for the workload's table.
func (b *bed) waitCompacted(ctx context.Context, w workload, topics []string) (string, error) {
	var done []string
	for _, t := range topics {
		first, err := topicBytes(ctx, b.env.Source, t)
		if err != nil {
			return "", err
		}
		if first/int64(w.Partitions) <= 2*compactSegmentBytes {
			say(fmt.Sprintf("%s: %s holds %d bytes in %d partitions, too few to compact; mirrored as written", w.Name, t, first, w.Partitions))
			done = append(done, fmt.Sprintf("%s: %.1f MB, too few to compact (two segments or less a partition), mirrored as written", t, float64(first)/1e6))
			continue
		}
		say(fmt.Sprintf("%s: waiting for the source's log cleaner to compact %s (%.1f MB)", w.Name, t, float64(first)/1e6))
		last, still := first, 0
		deadline := time.Now().Add(5 * time.Minute)
		for last == first || still < 3 {
			if time.Now().After(deadline) {
				// The run goes on, and the table's note says so.
				say(fmt.Sprintf("%s: WARNING: %s not compacted within 5 minutes (%d bytes, %d at first); mirrored as it is", w.Name, t, last, first))
				break
			}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(2 * time.Second):
			}
			now, err := topicBytes(ctx, b.env.Source, t)
			if err != nil {
				return "", err
			}
			if now == last {
				still++
			} else {
				still = 0
			}
			last = now
		}
		verb := "compacted"
		if last == first {
			verb = "NOT compacted within 5 minutes"
		}
		say(fmt.Sprintf("%s: %s %s: %.1f MB, %.1f MB at first", w.Name, t, verb, float64(last)/1e6, float64(first)/1e6))
		done = append(done, fmt.Sprintf("%s %s from %.1f MB to %.1f MB", t, verb, float64(first)/1e6, float64(last)/1e6))
	}
	return "On the source before the mirrors started: " + strings.Join(done, "; ") + ".", nil
}

// countRecords counts the records of topic on c by reading it to its end
// offsets.
func countRecords(ctx context.Context, c *testbed.Cluster, topic string) (int64, error) {
	ends, err := c.EndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	cl, err := c.NewClient(testbed.Admin, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var n int64
	pos := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if e > 0 && pos[p] < e-1 {
				return false
			}
		}
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(cctx)
		if err := cctx.Err(); err != nil {
			return 0, fmt.Errorf("counting the records of %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			pos[r.Partition] = r.Offset
		})
	}
	return n, nil
}

// writeSource writes the workload's records to every one of the source
// topics, each record to one after the other, with the workload's
// batching; a transactional workload commits a transaction every
// txnRecords records (of each topic).
func (b *bed) writeSource(ctx context.Context, w workload, topics ...string) error {
	opts := []kgo.Opt{kgo.ProducerBatchCompression(codecs[w.Codec]), kgo.ProducerLinger(w.Linger),
		kgo.ProducerBatchMaxBytes(int32(w.BatchBytes)), kgo.MaxBufferedRecords(50_000)}
	if w.Transactional {
		opts = append(opts, kgo.TransactionalID("bench-source-"+w.Name), kgo.TransactionTimeout(time.Minute))
	}
	cl, err := b.env.Source.NewClient(testbed.Admin, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	endTxn := func() error {
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	say(fmt.Sprintf("%s: writing %d records to each of %s on the source", w.Name, b.o.Records, strings.Join(topics, ", ")))
	errc := make(chan error, 1)
	began := time.Now()
	gen := newGenerator(b.o.ValueBytes)
	for i := range b.o.Records {
		if w.Transactional && i%txnRecords == 0 {
			if i > 0 {
				if err := endTxn(); err != nil {
					return fmt.Errorf("committing a source transaction: %w", err)
				}
			}
			if err := cl.BeginTransaction(); err != nil {
				return err
			}
		}
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
	if w.Transactional {
		if err := endTxn(); err != nil {
			return fmt.Errorf("committing a source transaction: %w", err)
		}
	} else if err := cl.Flush(ctx); err != nil {
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
// record a line, key and value separated by a tab; valuesOnly leaves the
// keys out (ProducerPerformance's --payload-file, which takes values).
func writeRecordFile(path string, n, valueBytes int, valuesOnly bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	gen := newGenerator(valueBytes)
	for range n {
		k, v := gen.next()
		if !valuesOnly {
			w.Write(k)
			w.WriteByte('\t')
		}
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

// perfPayloads is the most values ProducerPerformance's payload file holds.
const perfPayloads = 10_000

// perfSummary is the last line of ProducerPerformance's output.
var perfSummary = regexp.MustCompile(`(?m)^(\d+) records sent, ([0-9.]+) records/sec`)

// producerPerformance writes the values of file to topic on the
// destination with Kafka's ProducerPerformance in transactions of 100 ms,
// batching as kcat does for the other workloads. Its time is the records
// over the rate it reports (the JVM's start-up excluded; its CPU included).
func (b *bed) producerPerformance(ctx context.Context, w workload, topic, file string) (*measurement, error) {
	props := filepath.Join(b.env.Dir, "perf-producer.properties")
	if err := b.env.Destination.WriteClientProperties(props, testbed.Admin); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "java", "-Xmx512m", "-cp", b.env.Dist.Classpath(), "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", strconv.Itoa(b.o.Records), "--throughput", "-1", "--payload-file", file,
		"--producer.config", props, "--transactional-id", "bench-limit-"+w.Name, "--transaction-duration-ms", "100",
		"--producer-props", "acks=all", "enable.idempotence=true", "compression.type="+w.Codec,
		"batch.size=131072", "linger.ms=20", "buffer.memory=67108864")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	brokers0 := b.env.Destination.CPUSeconds()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ProducerPerformance: %w: %s", err, out.String())
	}
	wall := time.Since(start).Seconds()
	all := perfSummary.FindAllStringSubmatch(out.String(), -1)
	if len(all) == 0 {
		return nil, fmt.Errorf("ProducerPerformance printed no summary: %s", out.String())
	}
	last := all[len(all)-1]
	sent, _ := strconv.Atoi(last[1])
	rate, _ := strconv.ParseFloat(last[2], 64)
	if sent != b.o.Records || rate <= 0 {
		return nil, fmt.Errorf("ProducerPerformance sent %d records at %v records/s, want %d: %s", sent, rate, b.o.Records, last[0])
	}
	m := &measurement{Seconds: float64(sent) / rate, BrokerCPUSeconds: b.env.Destination.CPUSeconds() - brokers0}
	m.CPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.PeakRSSMiB = []int64{ru.Maxrss >> 10}
	}
	say(fmt.Sprintf("%s: ProducerPerformance: %s (the JVM ran %.1f s)", w.Name, last[0], wall))
	return m, nil
}

// sidemirror starts the mirror of topic and waits for the destination to
// reach the source's end offsets.
func (b *bed) sidemirror(ctx context.Context, mirror, topic string, want map[int32]int64) (*measurement, error) {
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
	first, lag, err := waitFor(ctx, b.env.Destination, topic, start, sum(want), func(got map[int32]int64) bool { return caughtUp(got, want) })
	if err != nil {
		return nil, err
	}
	m := &measurement{Seconds: time.Since(start).Seconds(), FirstRecordSeconds: first.Sub(start).Seconds(), Lag: lag,
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
	brokers0 := b.env.Destination.CPUSeconds()
	start := time.Now()
	mm, err := b.startMirrorMaker(w, "src"+alnum(w.Name), topic)
	if err != nil {
		return nil, err
	}
	defer b.stopMirrorMaker(mm)
	pid := mm.PID()
	first, lag, err := waitFor(ctx, b.env.Destination, topic, start, records, func(got map[int32]int64) bool {
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
	return &measurement{Seconds: time.Since(start).Seconds(), FirstRecordSeconds: first.Sub(start).Seconds(), Lag: lag,
		CPUSeconds: testbed.ProcessCPUSeconds(pid), PeakRSSMiB: []int64{testbed.ProcessPeakRSS(pid) >> 20},
		BrokerCPUSeconds: b.env.Destination.CPUSeconds() - brokers0}, nil
}

// startMirrorMaker starts a dedicated-mode MM2 with IdentityReplicationPolicy
// that replicates topic from the source (as w's mirrors reach it) to the
// destination, its producer batching as kcat does.
func (b *bed) startMirrorMaker(w workload, alias, topic string) (*testbed.MirrorMaker, error) {
	flow := alias + "->dst."
	identity := "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
	return testbed.StartMirrorMaker(b.mm2, b.env.Dir, testbed.MirrorMakerOptions{
		SourceAlias: alias, TargetAlias: "dst", Source: b.env.Source, Target: b.env.Destination,
		Topics: topic, Groups: "none-" + alias, HeapMB: 1024,
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
			// The source as the sidecars reach it: directly, or through
			// the nodes' proxies (and their latency).
			alias + ".bootstrap.servers": b.sourceBootstrap(w),
		},
	})
}

func (b *bed) stopMirrorMaker(mm *testbed.MirrorMaker) {
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mm.Stop(sctx); err != nil {
		say(err.Error())
	}
}

// waitFor polls topic's end offsets on c until done accepts them and
// returns when the first record was seen, and the lag (target less the
// end offsets' sum) over time since start, sampled every lagEvery.
func waitFor(ctx context.Context, c *testbed.Cluster, topic string, start time.Time, target int64, done func(map[int32]int64) bool) (time.Time, []lagPoint, error) {
	const lagEvery = 250 * time.Millisecond
	var first time.Time
	lag := []lagPoint{{Seconds: 0, Records: target}} // nothing is on the destination at the start
	deadline := time.Now().Add(30 * time.Minute)
	for {
		// An error: the destination topic is new, try again.
		got, err := c.EndOffsets(ctx, topic)
		now := time.Now()
		if err == nil && sum(got) > 0 && first.IsZero() {
			first = now
		}
		if err == nil {
			if t := now.Sub(start).Seconds(); t-lag[len(lag)-1].Seconds >= lagEvery.Seconds() || done(got) {
				lag = append(lag, lagPoint{Seconds: t, Records: max(target-sum(got), 0)})
			}
		}
		if err == nil && done(got) {
			return first, lag, nil
		}
		if time.Now().After(deadline) {
			return first, lag, fmt.Errorf("%s did not catch up within 30 minutes (end offsets %v, %v)", topic, got, err)
		}
		select {
		case <-ctx.Done():
			return first, lag, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sourceBootstrap is the source as the mirrors of w reach it: through the
// nodes' proxies for a latency workload, else directly.
func (b *bed) sourceBootstrap(w workload) string {
	if w.Latency > 0 {
		return b.env.Source.RemoteBootstrap()
	}
	return b.env.Source.Bootstrap()
}

func (b *bed) cli(ctx context.Context, args ...string) error {
	args = append([]string{"--bootstrap-server", b.env.Sidecars.AdminBootstrap()}, args...)
	out, err := exec.CommandContext(ctx, b.env.Bin.CLI, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafka-cluster-mirrors %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func createTopic(ctx context.Context, c *testbed.Cluster, topic string, partitions, rf int, configs map[string]*string) error {
	adm, err := c.NewClient(testbed.Admin)
	if err != nil {
		return err
	}
	defer adm.Close()
	resp, err := kadm.NewClient(adm).CreateTopic(ctx, int32(partitions), int16(rf), configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating %s on %s: %w", topic, c.Name(), err)
	}
	// A broker leads a partition in its metadata a moment before its log
	// exists, and a producer that meets UNKNOWN_TOPIC_OR_PARTITION a few
	// times gives up: with 2,000 partitions that moment is seconds long.
	// The topic is ready once every partition has an end offset.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		ends, err := c.EndOffsets(wctx, topic)
		if err == nil && len(ends) == partitions {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("%s on %s: %d of %d partitions have an end offset after 2 minutes (last error: %v)",
				topic, c.Name(), len(ends), partitions, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
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
