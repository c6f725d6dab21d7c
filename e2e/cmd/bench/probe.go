package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// probe measures the end-to-end latency of mirror contender c on workload
// w at half its capacity: half the records/s m measured, or half the
// destination's own ingest (limit, nil when not measured) when that is
// lower, since live records must first be written to a source cluster no
// faster than that (a mirror draining a backlog can outrun it). A producer
// writes timestamped records at that rate to a fresh source topic, spread
// over its partitions, for -probe-duration, and a consumer on the
// destination notes when each arrives. Its latency is the
// receipt less the record's timestamp (the producer's CreateTime, which
// both mirrors keep), so it includes the probe producer's batching and the
// consumer's fetch. The first probeLead of records is left out (the
// pipeline's first round trips). The results go into m.
func (b *bed) probe(ctx context.Context, w workload, c string, m, limit *measurement) error {
	if m == nil || m.RecordsPerSecond <= 0 {
		return errors.New("no measured rate to probe at")
	}
	rate := max(probeCapacity(m, limit)/2, 10)
	topic := probeTopic(w, c)
	if err := createTopic(ctx, b.env.Source, topic, w.Partitions, 1, w.topicConfigs(true)); err != nil {
		return err
	}
	if err := b.env.SetSourceLatency(w.Latency); err != nil && w.Latency > 0 {
		return err
	}
	say(fmt.Sprintf("%s: latency probe of %s at %.0f records/s for %v", w.Name, contenderTitle[c], rate, b.o.ProbeDuration))
	switch c {
	case sidemirrorName:
		name := w.mirror()
		if err := b.cli(ctx, "--start", "--topics", topic, "--mirror", name); err != nil {
			return err
		}
		defer func() {
			if err := b.cli(context.Background(), "--stop", "--topics", topic, "--mirror", name); err != nil {
				say(err.Error())
			}
		}()
	case mm2Name:
		mm, err := b.startMirrorMaker(w, "probe"+alnum(w.Name), topic)
		if err != nil {
			return err
		}
		defer b.stopMirrorMaker(mm)
	default:
		return fmt.Errorf("no probe for %s", c)
	}

	src, err := b.env.Source.NewClient(testbed.Admin, kgo.ProducerBatchCompression(codecs[w.Codec]),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer src.Close()
	// The consumer reads from the start: a record written before the
	// mirror's first fetch is counted once it arrives. The readiness
	// record proves the mirror and the consumer are both live.
	if err := src.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("ready"), Value: []byte("ready")}).FirstErr(); err != nil {
		return err
	}
	dst, err := b.env.Destination.NewClient(testbed.Admin, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer dst.Close()
	col := &latencies{}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go col.consume(cctx, &wg, dst, ready)
	defer wg.Wait()
	select {
	case <-ready:
	case <-time.After(5 * time.Minute):
		return errors.New("the readiness record did not reach the destination's consumer within 5 minutes")
	case <-ctx.Done():
		return ctx.Err()
	}

	start := time.Now()
	col.setFrom(start.Add(probeLead))
	gen := newGenerator(b.o.ValueBytes)
	var sent int
	errc := make(chan error, 1)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < b.o.ProbeDuration {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			return fmt.Errorf("writing probe records: %w", err)
		case <-tick.C:
		}
		for due := int(rate * time.Since(start).Seconds()); sent < due; sent++ {
			_, value := gen.next()
			key := strconv.AppendInt([]byte(probeKey), int64(sent), 10) // spread over the partitions
			src.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: time.Now()}, func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			})
		}
	}
	if err := src.Flush(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for col.received() < sent {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d probe records reached the destination within 2 minutes", col.received(), sent)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()
	p50, p99, top, n := col.percentiles()
	if n == 0 {
		return errors.New("no probe record was measured")
	}
	m.ProbeRecordsPerSecond = float64(sent) / b.o.ProbeDuration.Seconds()
	m.ProbeRecords, m.LatencyP50Ms, m.LatencyP99Ms, m.LatencyMaxMs = n, p50, p99, top
	say(fmt.Sprintf("%s: %s: %d records measured, p50 %.1f ms, p99 %.1f ms, max %.1f ms", w.Name, contenderTitle[c], n, p50, p99, top))
	return nil
}

// probeKey begins the key of every measured probe record.
const probeKey = "probe-"

// probeCapacity is the records/s the probe takes as a mirror's capacity:
// what m measured, or the destination's own ingest (limit) when lower.
func probeCapacity(m, limit *measurement) float64 {
	if limit != nil && limit.RecordsPerSecond > 0 {
		return min(m.RecordsPerSecond, limit.RecordsPerSecond)
	}
	return m.RecordsPerSecond
}

// latencies collects the probe's measurements.
type latencies struct {
	mu    sync.Mutex
	from  time.Time // records of earlier timestamps are not measured
	count int       // probe records received, measured or not
	ms    []float64
}

func (l *latencies) setFrom(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.from = t
}

func (l *latencies) received() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// consume reads the destination topic until ctx ends, closing ready at the
// readiness record.
func (l *latencies) consume(ctx context.Context, wg *sync.WaitGroup, cl *kgo.Client, ready chan struct{}) {
	defer wg.Done()
	isReady := false
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		l.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case string(r.Key) == "ready":
				if !isReady {
					isReady = true
					close(ready)
				}
			case bytes.HasPrefix(r.Key, []byte(probeKey)):
				l.count++
				if !l.from.IsZero() && !r.Timestamp.Before(l.from) {
					l.ms = append(l.ms, float64(now.Sub(r.Timestamp).Microseconds())/1000)
				}
			}
		})
		l.mu.Unlock()
	}
}

// percentiles returns the p50, p99 and maximum in milliseconds, and the
// number of measured records.
func (l *latencies) percentiles() (p50, p99, top float64, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return percentile(l.ms, 0.50), percentile(l.ms, 0.99), percentile(l.ms, 1), len(l.ms)
}

// percentile returns the q quantile of values (nearest rank), 0 for none.
func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(values))
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// alnum keeps the letters and digits of s (MM2's cluster aliases).
func alnum(s string) string {
	out := []byte{}
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			out = append(out, c)
		}
	}
	return string(out)
}

// probeTopic is the topic of the latency probe of contender c after w.
func probeTopic(w workload, c string) string { return "bench-" + w.Name + "-probe-" + c }
