// Command bench measures mirroring on this machine's real Kafka test bed: it
// starts a source and a three-node destination cluster with one sidecar per
// destination broker, writes a backlog of records to the source, starts a
// mirror of the topic and times how long the destination takes to reach the
// source's end offsets. It reports the mirrored bytes per second (batch
// bytes as they travel, compressed), records per second, the CPU seconds the
// three sidecars used per GB mirrored and their peak resident memory.
//
//	go run ./e2e/cmd/bench -records 2000000 -codec zstd
//
// Every sidecar runs beside a broker on the same machine, so the numbers
// are those of a single host running four Kafka brokers and three sidecars:
// compare runs on one machine, not across machines.
package main

import (
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

const (
	mirror = "bench"
	topic  = "bench"
)

// config is what a run measures.
type config struct {
	Records    int    `json:"records"`
	Partitions int    `json:"partitions"`
	ValueBytes int    `json:"valueBytes"`
	Codec      string `json:"codec"`
}

// result is what a run measured.
type result struct {
	config
	SourceBytes       int64   `json:"sourceBytes"` // batch bytes mirrored, as on the wire
	Seconds           float64 `json:"seconds"`     // from --start until the destination reached the source's end offsets
	MBPerSecond       float64 `json:"mbPerSecond"`
	RecordsPerSecond  float64 `json:"recordsPerSecond"`
	SidecarCPUSeconds float64 `json:"sidecarCpuSeconds"` // user + system, the three sidecars together
	CPUSecondsPerGB   float64 `json:"cpuSecondsPerGB"`
	PeakRSSMiB        []int64 `json:"peakRssMiB"` // per sidecar, VmHWM
}

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

func main() {
	var cfg config
	flag.IntVar(&cfg.Records, "records", 1_000_000, "records in the backlog")
	flag.IntVar(&cfg.Partitions, "partitions", 6, "partitions of the topic")
	flag.IntVar(&cfg.ValueBytes, "value-bytes", 500, "average value size in bytes (JSON-like text)")
	flag.StringVar(&cfg.Codec, "codec", "zstd", "producer compression: none, gzip, snappy, lz4 or zstd")
	asJSON := flag.Bool("json", false, "print the result as one JSON line")
	flag.Parse()
	if _, ok := codecs[cfg.Codec]; !ok {
		fmt.Fprintf(os.Stderr, "bench: -codec %q is not one of none, gzip, snappy, lz4, zstd\n", cfg.Codec)
		os.Exit(2)
	}
	if cfg.Records < 1 || cfg.Partitions < 1 || cfg.ValueBytes < 1 {
		fmt.Fprintln(os.Stderr, "bench: -records, -partitions and -value-bytes must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	fmt.Printf("mirrored %d records (%.1f MB of %s batches, %d partitions) in %.2f s: %.1f MB/s, %.0f records/s\n",
		res.Records, float64(res.SourceBytes)/1e6, res.Codec, res.Partitions, res.Seconds, res.MBPerSecond, res.RecordsPerSecond)
	fmt.Printf("sidecars: %.2f CPU seconds, %.1f CPU s/GB; peak RSS %v MiB\n", res.SidecarCPUSeconds, res.CPUSecondsPerGB, res.PeakRSSMiB)
}

func say(s string) { fmt.Fprintln(os.Stderr, "bench:", s) }

func run(ctx context.Context, cfg config) (*result, error) {
	opts := testbed.DefaultEnvOptions()
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true", "log.level": "info"}
	env, err := testbed.StartEnv(ctx, opts, say)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(env.Dir)
	defer env.Close()

	if err := writeBacklog(ctx, env, cfg); err != nil {
		return nil, err
	}
	want, err := env.Source.EndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	mcfg := filepath.Join(env.Dir, "mirror.properties")
	if err := os.WriteFile(mcfg, []byte("bootstrap.servers="+env.Source.Bootstrap()+"\n"), 0o600); err != nil {
		return nil, err
	}
	cli := func(args ...string) error {
		args = append([]string{"--bootstrap-server", env.Sidecars.AdminBootstrap()}, args...)
		out, err := exec.CommandContext(ctx, env.Bin.CLI, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kafka-cluster-mirrors %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := cli("--create", "--mirror", mirror, "--mirror-config", mcfg); err != nil {
		return nil, err
	}

	say("mirroring")
	cpu0 := env.Sidecars.CPUSeconds()
	start := time.Now()
	if err := cli("--start", "--topics", topic, "--mirror", mirror); err != nil {
		return nil, err
	}
	for {
		// An error: the destination topic is new, try again.
		if got, err := env.Destination.EndOffsets(ctx, topic); err == nil && caughtUp(got, want) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	res := &result{config: cfg, Seconds: time.Since(start).Seconds(), SidecarCPUSeconds: env.Sidecars.CPUSeconds() - cpu0}
	if res.SourceBytes, err = mirroredBytes(ctx, env); err != nil {
		return nil, err
	}
	res.MBPerSecond = float64(res.SourceBytes) / 1e6 / res.Seconds
	res.RecordsPerSecond = float64(cfg.Records) / res.Seconds
	res.CPUSecondsPerGB = res.SidecarCPUSeconds / (float64(res.SourceBytes) / 1e9)
	for _, s := range env.Sidecars.Sidecars() {
		res.PeakRSSMiB = append(res.PeakRSSMiB, s.PeakRSS()>>20)
	}
	return res, nil
}

// writeBacklog creates the topic and writes cfg.Records JSON-like records
// to it: an id, a timestamp, a few enums and text from a vocabulary, so
// that they compress like real events.
func writeBacklog(ctx context.Context, env *testbed.Env, cfg config) error {
	adm, err := env.Source.NewClient(testbed.Admin)
	if err != nil {
		return err
	}
	defer adm.Close()
	resp, err := kadm.NewClient(adm).CreateTopic(ctx, int32(cfg.Partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating the source topic: %w", err)
	}
	cl, err := env.Source.NewClient(testbed.Admin, kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(codecs[cfg.Codec]), kgo.ProducerLinger(20*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(50_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	say(fmt.Sprintf("writing %d records to the source", cfg.Records))
	words := strings.Fields("order payment shipped cancelled customer warehouse inventory region europe america asia " +
		"premium standard express refund invoice pending approved declined retry timeout session checkout cart " +
		"product category electronics books garden toys sports device mobile desktop")
	rng := rand.New(rand.NewPCG(1, 2))
	errc := make(chan error, 1)
	began := time.Now()
	for i := range cfg.Records {
		var sb strings.Builder
		fmt.Fprintf(&sb, `{"id":"%016x","ts":%d,"user":%d,"amount":%d.%02d,"msg":"`, rng.Uint64(), began.UnixMilli()+int64(i), rng.IntN(1_000_000), rng.IntN(10_000), rng.IntN(100))
		for sb.Len() < cfg.ValueBytes-2 {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		sb.WriteString(`"}`)
		r := &kgo.Record{Key: []byte("user-" + strconv.Itoa(rng.IntN(100_000))), Value: []byte(sb.String())}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("writing the backlog: %w", err)
	default:
	}
	say(fmt.Sprintf("backlog written in %v", time.Since(began).Round(time.Millisecond)))
	return nil
}

func caughtUp(got, want map[int32]int64) bool {
	for p, o := range want {
		if got[p] != o {
			return false
		}
	}
	return len(want) > 0
}

// mirroredBytes sums sidemirror_mirrored_bytes_total over the sidecars.
func mirroredBytes(ctx context.Context, env *testbed.Env) (int64, error) {
	total, err := env.Sidecars.SumMetric(ctx, "sidemirror_mirrored_bytes_total", mirror)
	if err != nil {
		return 0, err
	}
	if total == 0 {
		return 0, errors.New("the sidecars report no mirrored bytes")
	}
	return int64(total), nil
}
