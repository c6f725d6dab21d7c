package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// scaleOptions are the flags of the many-partitions run (-scale-partitions).
type scaleOptions struct {
	Partitions int `json:"partitions"` // on the one sidecar, the stopped ones included
	Fresh      int `json:"fresh"`      // partitions started once the others mirror
	Stop       int `json:"stop"`       // of Partitions, stopped at the end
	Records    int `json:"records"`    // per partition, the backlog
	ValueBytes int `json:"valueBytes"`
}

// scaleResult is what the many-partitions run measured.
type scaleResult struct {
	Options      scaleOptions `json:"options"`
	KafkaVersion string       `json:"kafkaVersion"`
	Host         string       `json:"host"`
	Date         string       `json:"date"`
	Note         string       `json:"note,omitempty"`
	// The backlog of Partitions partitions: from --start until the
	// destination held the source's end offsets.
	DrainSeconds       float64 `json:"drainSeconds"`
	DrainFirstSeconds  float64 `json:"drainFirstRecordSeconds"`
	PeakRSSMiB         int64   `json:"peakRssMiB"`          // the sidecar's VmHWM over the whole run: the highest of the phases'
	DrainRSSMiB        int64   `json:"drainRssMiB"`         // ... while the backlog drained (from --start)
	FreshRSSMiB        int64   `json:"freshRssMiB"`         // ... from --start of the fresh partitions to their first records
	StopRSSMiB         int64   `json:"stopRssMiB"`          // ... from --stop until the sidecar no longer drove them
	BufferPeakMiB      float64 `json:"bufferPeakMiB"`       // sidemirror_buffer_memory_used_bytes, its highest sample
	FreshFirstSeconds  float64 `json:"freshFirstSeconds"`   // --start of Fresh partitions to the first record of any
	FreshAllSeconds    float64 `json:"freshAllSeconds"`     // ... to a first record in every one of them
	FreshCommand       float64 `json:"freshCommandSeconds"` // ... until the command returned
	FreshReady         float64 `json:"freshReadySeconds"`   // ... until the destination answered every fresh partition's end offset (its leader is ready)
	FreshDriven        float64 `json:"freshDrivenSeconds"`  // ... until the sidecar drove every fresh partition
	StopSeconds        float64 `json:"stopSeconds"`         // --stop of Stop partitions, until the command returned
	StopDrivenSeconds  float64 `json:"stopDrivenSeconds"`   // ... until the sidecar no longer drove them
	CPUSeconds         float64 `json:"cpuSeconds"`          // the sidecar, over the whole run
	DrivenBeforeStop   int     `json:"drivenBeforeStop"`    // partitions the sidecar drove before the stop
	DrivenAfterStop    int     `json:"drivenAfterStop"`     // and after it
	BrokerCPUSeconds   float64 `json:"brokerCpuSeconds"`    // the destination broker, over the whole run
	SourceRecordsTotal int64   `json:"sourceRecordsTotal"`  // records of the backlog
}

// Targets of KIP-1279's scale, as issue 12 states them.
const (
	scaleRSSTargetMiB = 512
	scaleStartTarget  = 5 * time.Second
	scaleStopTarget   = 5 * time.Second
)

// runScale measures one sidecar beside a one-node destination, whose
// broker leads every partition: it mirrors a backlog of Partitions
// partitions (Stop of them in a topic of their own), then starts Fresh
// more partitions that hold records and times their first records, then
// stops the Stop partitions and times the command and the sidecar. The
// sidecar's peak RSS is read over the whole run.
func runScale(ctx context.Context, so scaleOptions, say func(string)) (*scaleResult, error) {
	if so.Partitions < 2 || so.Stop < 1 || so.Stop >= so.Partitions || so.Fresh < 1 || so.Records < 1 || so.ValueBytes < 1 {
		return nil, errors.New("-scale-partitions must be at least 2, -scale-stop between 1 and -scale-partitions less 1, -scale-fresh and -scale-records positive")
	}
	if err := checkScaleLimits(so.Partitions + so.Fresh); err != nil {
		return nil, err
	}
	opts := testbed.DefaultEnvOptions()
	opts.Destination.Nodes = 1
	opts.Destination.HeapMB = 1536
	opts.Source.HeapMB = 1536
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true", "log.level": "info"}
	opts.StartTimeout = 10 * time.Minute
	env, err := testbed.StartEnv(ctx, opts, say)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(env.Dir)
	defer env.Close()
	b := &bed{env: env}
	sc := env.Sidecars.Sidecars()[0]
	defer keepLog(sc.LogPath(), filepath.Join("bin", "bench-partitions-sidecar.log"), say)
	mcfg := filepath.Join(env.Dir, "scale.properties")
	if err := os.WriteFile(mcfg, []byte("bootstrap.servers="+env.Source.Bootstrap()+"\nmirror.topic.replication.factor=1\n"), 0o600); err != nil {
		return nil, err
	}
	const name = "scale"
	if err := b.cli(ctx, "--create", "--mirror", name, "--mirror-config", mcfg); err != nil {
		return nil, err
	}
	res := &scaleResult{Options: so, KafkaVersion: env.Dist.Version, Host: describeHost(), Date: time.Now().UTC().Format("2006-01-02")}
	main, stopped, fresh := "scale-main", "scale-stop", "scale-fresh"
	parts := map[string]int{main: so.Partitions - so.Stop, stopped: so.Stop, fresh: so.Fresh}
	for _, t := range []string{main, stopped, fresh} {
		if err := createTopic(ctx, env.Source, t, parts[t], 1, nil); err != nil {
			return nil, err
		}
		say(fmt.Sprintf("scale: writing %d records to each of the %d partitions of %s", so.Records, parts[t], t))
		if err := writePerPartition(ctx, env.Source, t, parts[t], so.Records, so.ValueBytes); err != nil {
			return nil, err
		}
	}
	res.SourceRecordsTotal = int64(so.Records) * int64(so.Partitions)
	// Peak RSS per phase: VmHWM, reset as each phase begins.
	phaseRSS := func() int64 {
		peak := sc.PeakRSS() >> 20
		res.PeakRSSMiB = max(res.PeakRSSMiB, peak)
		testbed.ResetPeakRSS(sc.PID())
		return peak
	}
	testbed.ResetPeakRSS(sc.PID())
	cpu0, brokers0 := env.Sidecars.CPUSeconds(), env.Destination.CPUSeconds()
	sampler := newBufferSampler(ctx, sc)
	defer sampler.stop()

	// The backlog of Partitions partitions.
	wantMain, err := env.Source.EndOffsets(ctx, main)
	if err != nil {
		return nil, err
	}
	wantStop, err := env.Source.EndOffsets(ctx, stopped)
	if err != nil {
		return nil, err
	}
	say(fmt.Sprintf("scale: --start of %d partitions", so.Partitions))
	start := time.Now()
	if err := b.cli(ctx, "--start", "--topics", main+","+stopped, "--mirror", name); err != nil {
		return nil, err
	}
	first, _, err := waitFor(ctx, env.Destination, main, start, sum(wantMain), func(got map[int32]int64) bool { return caughtUp(got, wantMain) })
	if err != nil {
		return nil, err
	}
	if _, _, err := waitFor(ctx, env.Destination, stopped, start, sum(wantStop), func(got map[int32]int64) bool { return caughtUp(got, wantStop) }); err != nil {
		return nil, err
	}
	res.DrainSeconds, res.DrainFirstSeconds = time.Since(start).Seconds(), first.Sub(start).Seconds()
	res.DrainRSSMiB = phaseRSS()
	say(fmt.Sprintf("scale: drained in %.1f s, peak RSS %d MiB", res.DrainSeconds, res.DrainRSSMiB))

	// Fresh partitions while the others mirror.
	say(fmt.Sprintf("scale: --start of %d fresh partitions", so.Fresh))
	drivenBefore, err := drivenPartitions(ctx, sc)
	if err != nil {
		return nil, err
	}
	start = time.Now()
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	ready := timeUntil(wctx, start, 100*time.Millisecond, func(ctx context.Context) bool {
		ends, err := env.Destination.EndOffsets(ctx, fresh)
		return err == nil && len(ends) == so.Fresh
	})
	driven := timeUntil(wctx, start, 250*time.Millisecond, func(ctx context.Context) bool {
		n, err := drivenPartitions(ctx, sc)
		return err == nil && n >= drivenBefore+so.Fresh
	})
	if err := b.cli(ctx, "--start", "--topics", fresh, "--mirror", name); err != nil {
		return nil, err
	}
	res.FreshCommand = time.Since(start).Seconds()
	first, _, err = waitFor(ctx, env.Destination, fresh, start, int64(so.Fresh), func(got map[int32]int64) bool {
		n := 0
		for _, o := range got {
			if o > 0 {
				n++
			}
		}
		return n == so.Fresh
	})
	if err != nil {
		return nil, err
	}
	res.FreshAllSeconds, res.FreshFirstSeconds = time.Since(start).Seconds(), first.Sub(start).Seconds()
	res.FreshRSSMiB = phaseRSS()
	res.FreshReady, res.FreshDriven = <-ready, <-driven
	cancelWatch()
	say(fmt.Sprintf("scale: fresh partitions: --start returned after %.2f s, the destination led every one after %.2f s, the sidecar drove every one after %.2f s",
		res.FreshCommand, res.FreshReady, res.FreshDriven))
	say(fmt.Sprintf("scale: first record of the fresh partitions after %.2f s (in every one: %.2f s), peak RSS %d MiB",
		res.FreshFirstSeconds, res.FreshAllSeconds, res.FreshRSSMiB))

	// The stop of Stop partitions.
	if res.DrivenBeforeStop, err = drivenPartitions(ctx, sc); err != nil {
		return nil, err
	}
	say(fmt.Sprintf("scale: --stop of %d partitions (the sidecar drives %d)", so.Stop, res.DrivenBeforeStop))
	start = time.Now()
	if err := b.cli(ctx, "--stop", "--topics", stopped, "--mirror", name); err != nil {
		return nil, err
	}
	res.StopSeconds = time.Since(start).Seconds()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n, err := drivenPartitions(ctx, sc)
		if err != nil {
			return nil, err
		}
		if n <= res.DrivenBeforeStop-so.Stop {
			res.StopDrivenSeconds, res.DrivenAfterStop = time.Since(start).Seconds(), n
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the sidecar still drives %d partitions 5 minutes after --stop, want at most %d", n, res.DrivenBeforeStop-so.Stop)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	res.StopRSSMiB = phaseRSS()
	say(fmt.Sprintf("scale: --stop returned after %.2f s, the sidecar let go after %.2f s, peak RSS %d MiB",
		res.StopSeconds, res.StopDrivenSeconds, res.StopRSSMiB))
	res.BufferPeakMiB = sampler.stop() / (1 << 20)
	res.CPUSeconds, res.BrokerCPUSeconds = env.Sidecars.CPUSeconds()-cpu0, env.Destination.CPUSeconds()-brokers0
	return res, nil
}

// Kafka 4.1 keeps about one open file (the active segment) and two memory
// mappings (its offset and time indexes) per partition; a broker needs some
// more of each for itself (its jars, sockets, the JVM's own mappings).
const (
	filesPerPartition, filesBase = 1, 2000
	mapsPerPartition, mapsBase   = 2, 10000
)

// checkScaleLimits checks, before anything starts, that this machine lets
// a Kafka broker hold partitions partitions: the open files hard limit
// (the JVM raises its soft limit to it) and vm.max_map_count. A broker
// that meets either limit fails in ways that look like anything else
// (partitions offline, "Map failed" deep in a log).
func checkScaleLimits(partitions int) error {
	var problems []string
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		if need := uint64(filesPerPartition*partitions + filesBase); rl.Max < need {
			problems = append(problems, fmt.Sprintf("open files: a broker needs about %s (%d per partition and %s), the hard limit here is %s "+
				"(ulimit -Hn; raise it in /etc/security/limits.conf, or LimitNOFILE= for a systemd unit, as root)",
				thousands(int64(need)), filesPerPartition, thousands(filesBase), thousands(int64(rl.Max))))
		}
	}
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		have, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if need := int64(mapsPerPartition*partitions + mapsBase); have < need {
			problems = append(problems, fmt.Sprintf("memory mappings: a broker needs about %s (%d per partition and %s), vm.max_map_count here is %s "+
				"(raise it with sysctl -w vm.max_map_count=%d, as root)", thousands(need), mapsPerPartition, thousands(mapsBase), thousands(have), need))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("this machine's limits are too low for %s partitions on one broker (-scale-partitions plus -scale-fresh); run fewer partitions or raise them:\n  %s",
			thousands(int64(partitions)), strings.Join(problems, "\n  "))
	}
	return nil
}

// timeUntil polls cond every interval from now on and sends the seconds
// from start until it held, or -1 once ctx ends first.
func timeUntil(ctx context.Context, start time.Time, every time.Duration, cond func(context.Context) bool) <-chan float64 {
	out := make(chan float64, 1)
	go func() {
		for {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			ok := cond(pctx)
			cancel()
			if ok {
				out <- time.Since(start).Seconds()
				return
			}
			select {
			case <-ctx.Done():
				out <- -1
				return
			case <-time.After(every):
			}
		}
	}()
	return out
}

// keepLog copies the sidecar's log to dst before the run's directory is
// removed, for a look at what took the time.
func keepLog(src, dst string, say func(string)) {
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(dst), 0o755)
	}
	if err == nil {
		err = os.WriteFile(dst, b, 0o644)
	}
	if err != nil {
		say("scale: the sidecar's log was not kept: " + err.Error())
		return
	}
	say("scale: the sidecar's log is in " + dst)
}

// writePerPartition writes records records of about valueBytes to every
// one of the partitions of topic on c.
func writePerPartition(ctx context.Context, c *testbed.Cluster, topic string, partitions, records, valueBytes int) error {
	cl, err := c.NewClient(testbed.Admin, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	errc := make(chan error, 1)
	gen := newGenerator(valueBytes)
	for range records {
		for p := range partitions {
			key, value := gen.next()
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Key: key, Value: value}, func(_ *kgo.Record, err error) {
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
		return fmt.Errorf("writing %s: %w", topic, err)
	default:
		return nil
	}
}

// drivenPartitions returns the partitions the sidecar drives, in every
// state (the sum of sidemirror_partitions).
func drivenPartitions(ctx context.Context, s *testbed.Sidecar) (int, error) {
	page, err := s.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	var n float64
	for line := range strings.Lines(page) {
		if strings.HasPrefix(line, "sidemirror_partitions{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += v
		}
	}
	return int(n), nil
}

// bufferSampler reads the sidecar's sidemirror_buffer_memory_used_bytes
// every 250 ms and keeps the highest.
type bufferSampler struct {
	cancel context.CancelFunc
	done   chan float64
}

func newBufferSampler(ctx context.Context, s *testbed.Sidecar) *bufferSampler {
	ctx, cancel := context.WithCancel(ctx)
	bs := &bufferSampler{cancel: cancel, done: make(chan float64, 1)}
	go bs.run(ctx, s)
	return bs
}

func (bs *bufferSampler) run(ctx context.Context, s *testbed.Sidecar) {
	var peak float64
	defer func() { bs.done <- peak }()
	for {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		page, err := s.Metrics(mctx)
		cancel()
		if err == nil {
			for line := range strings.Lines(page) {
				if v, ok := strings.CutPrefix(line, "sidemirror_buffer_memory_used_bytes "); ok {
					f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					peak = max(peak, f)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stop ends the sampling and returns the highest sample; later calls
// return 0.
func (bs *bufferSampler) stop() float64 {
	bs.cancel()
	select {
	case v := <-bs.done:
		return v
	case <-time.After(10 * time.Second):
		return 0
	}
}

// Markdown returns the run as the body of its section.
func (r *scaleResult) Markdown() string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "Run of %s: `go run ./e2e/cmd/bench -scale-partitions %d -scale-fresh %d -scale-stop %d -scale-records %d -value-bytes %d`, Kafka %s, on %s. ",
		r.Date, o.Partitions, o.Fresh, o.Stop, o.Records, o.ValueBytes, r.KafkaVersion, r.Host)
	if r.Note != "" {
		b.WriteString(r.Note)
	}
	b.WriteString("\n\n")
	check := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	b.WriteString("| measure | value | target | met |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| backlog of %s partitions (%s records) drained, from `--start` | %.1f s (first record %.2f s) | - | - |\n",
		thousands(int64(o.Partitions)), thousands(r.SourceRecordsTotal), r.DrainSeconds, r.DrainFirstSeconds)
	fmt.Fprintf(&b, "| peak RSS of the sidecar over the run | %d MiB | < %d MiB | %s |\n", r.PeakRSSMiB, scaleRSSTargetMiB, check(r.PeakRSSMiB < scaleRSSTargetMiB))
	fmt.Fprintf(&b, "| peak RSS while the backlog drained / the fresh partitions started / the stop | %d / %d / %d MiB | - | - |\n",
		r.DrainRSSMiB, r.FreshRSSMiB, r.StopRSSMiB)
	fmt.Fprintf(&b, "| highest `sidemirror_buffer_memory_used_bytes` sampled | %.1f MiB | - | - |\n", r.BufferPeakMiB)
	fmt.Fprintf(&b, "| first record of %s freshly started partitions, from `--start` | %.2f s (every one of them: %.2f s) | < %.0f s | %s |\n",
		thousands(int64(o.Fresh)), r.FreshFirstSeconds, r.FreshAllSeconds, scaleStartTarget.Seconds(), check(r.FreshFirstSeconds < scaleStartTarget.Seconds()))
	fmt.Fprintf(&b, "| ... of which: `--start` returned / the destination led every fresh partition / the sidecar drove every one | %.2f / %.2f / %.2f s | - | - |\n",
		r.FreshCommand, r.FreshReady, r.FreshDriven)
	fmt.Fprintf(&b, "| `--stop` of %s partitions returned | %.2f s (sidecar no longer driving them: %.2f s; it drove %s, then %s) | < %.0f s | %s |\n",
		thousands(int64(o.Stop)), r.StopSeconds, r.StopDrivenSeconds, thousands(int64(r.DrivenBeforeStop)), thousands(int64(r.DrivenAfterStop)),
		scaleStopTarget.Seconds(), check(r.StopSeconds < scaleStopTarget.Seconds()))
	fmt.Fprintf(&b, "| CPU s of the sidecar / of the destination broker, whole run | %.1f / %.1f | - | - |\n", r.CPUSeconds, r.BrokerCPUSeconds)
	return b.String()
}

// scaleIntro opens the many-partitions section.
const scaleIntro = "`make bench-partitions` (`go run ./e2e/cmd/bench -scale-partitions 10000`) starts a 1-node source and a\n" +
	"1-node destination with one sidecar, whose broker therefore leads every partition (replication factor 1).\n" +
	"It writes a backlog of `-scale-records` records to every partition of two topics holding `-scale-partitions`\n" +
	"partitions together (`-scale-stop` of them in the second), and of a third topic of `-scale-fresh` partitions;\n" +
	"it starts the first two and waits until the destination holds the source's end offsets, then starts the\n" +
	"third and times its first record (and a first record in every one of its partitions), then stops the second\n" +
	"and times the command and the sidecar's letting go of its partitions (the sum of `sidemirror_partitions`).\n" +
	"Peak RSS is the sidecar's VmHWM, reset as each phase begins (the backlog, the fresh partitions, the stop); over\n" +
	"the run it is the highest of the three. The harness itself reads the sidecar's /metrics every 250 ms (and every\n" +
	"50 ms during the stop), far more often than Prometheus would. It first checks that the machine lets a broker hold\n" +
	"the partitions (open files, vm.max_map_count). The rest of this section is written by\n" +
	"`make bench-partitions` from its last run.\n\n"

// scaleHeading heads the many-partitions section of docs/performance.md.
const scaleHeading = "## Benchmark: many partitions on one sidecar"

func writeScaleDoc(path string, r *scaleResult) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(replaceSection(string(old), scaleHeading, scaleIntro+r.Markdown())), 0o644)
}
