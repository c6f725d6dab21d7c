package multihost

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// The link of TestLimitedLink: the source host's link limited to
// linkBits each way, linkLatency added each way by the proxy in front of
// its listener (linkLatency*2 on every round trip), a topic written at
// linkRate.
const (
	linkBits     = 80_000_000
	linkLatency  = 50 * time.Millisecond
	linkRate     = 2_000_000 // bytes/s of values
	linkValue    = 1000      // bytes of each record's value
	linkMaxLag   = 5 * time.Second
	linkBacklog  = 100_000_000 // bytes of values drained to measure the link
	linkDuration = "SIDEMIRROR_LINK_DURATION"
)

// linkTestDuration is how long TestLimitedLink writes at linkRate: 2
// minutes, 1 minute when CI=true, or SIDEMIRROR_LINK_DURATION (a Go
// duration).
func linkTestDuration(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv(linkDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive Go duration such as 2m", linkDuration, v)
		}
		return d
	}
	if os.Getenv("CI") == "true" {
		return time.Minute
	}
	return 2 * time.Minute
}

// TestLimitedLink mirrors a topic led by one source node whose host's
// link is limited to 80 Mbit/s each way (tc tbf) and reached through a
// proxy adding 50 ms each way. A producer writes about 2 MB/s to it for
// linkTestDuration; every second the test reads the lag in seconds of
// every partition from the sidecars (sidemirror_partition_lag_seconds)
// and, independently, the records the destination is behind the source
// (their end offsets) over the producer's rate: both must stay under 5 s
// throughout. Then it measures what the link carries: with the topic
// paused, a 100 MB backlog is written, the topic resumed, and the drain
// timed (records/s and MB/s). Last, with the link freed, the kcat dumps of
// source and destination must be identical.
func TestLimitedLink(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, parts = "link", "link", 6
	duration := linkTestDuration(t)
	node := env.Source.Nodes()[0]
	host := node.Host()
	createTopicOn(t, env.Source, topic, parts, node.ID)
	if err := host.LimitBandwidth(linkBits); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Unlimit() })
	if err := env.SetSourceLatency(linkLatency); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.SetSourceLatency(0) })
	createMirror(t, env.Sidecars.AdminBootstrap(), mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	perSecond := linkRate / linkValue
	p := startProducer(t, topic, "link", perSecond, linkValue, 41)
	start := time.Now()
	var samples int
	var maxMetric, maxOffsets float64
	for tick := time.NewTicker(time.Second); time.Since(start) < duration; <-tick.C {
		// The destination first, then the source: the difference can only
		// overstate the lag.
		dst := endOffsets(t, env.Destination, topic)
		src := endOffsets(t, env.Source, topic)
		var behind int64
		for p, o := range src {
			behind += o - dst[p]
		}
		byOffsets := float64(behind) / float64(perSecond)
		lags := partitionGauge(t, "sidemirror_partition_lag_seconds", mirror)
		if len(lags) != parts {
			t.Fatalf("%.0fs in: sidemirror_partition_lag_seconds has %d series, want one per partition: %v",
				time.Since(start).Seconds(), len(lags), lags)
		}
		byMetric := 0.0
		for _, v := range lags {
			byMetric = max(byMetric, v)
		}
		if byMetric >= linkMaxLag.Seconds() || byOffsets >= linkMaxLag.Seconds() {
			t.Fatalf("%.0fs in: lag %.2f s by sidemirror_partition_lag_seconds %v, %.2f s by the end offsets (%d records behind at %d records/s): want under %v",
				time.Since(start).Seconds(), byMetric, lags, byOffsets, behind, perSecond, linkMaxLag)
		}
		maxMetric, maxOffsets = max(maxMetric, byMetric), max(maxOffsets, byOffsets)
		samples++
	}
	p.stop()
	written := p.count()
	rate := float64(p.bytes) / time.Since(start).Seconds()
	if rate < 0.95*linkRate {
		t.Fatalf("the producer wrote %.2f MB/s, want %.2f MB/s", rate/1e6, float64(linkRate)/1e6)
	}
	if want := int(duration/time.Second) - 2; samples < want {
		t.Fatalf("%d lag samples in %v, want one a second", samples, duration)
	}
	t.Logf("%v at %.2f MB/s (%d records of %d bytes) through %d Mbit/s with %v added each way: lag at most %.2f s by sidemirror_partition_lag_seconds, %.2f s by the end offsets (%d samples)",
		duration, rate/1e6, written, linkValue, linkBits/1_000_000, linkLatency, maxMetric, maxOffsets, samples)
	waitCaughtUp(t, mirror, topic, time.Minute)

	drained := measureDrain(t, mirror, topic, host)
	if drained <= linkRate {
		t.Fatalf("the link drained a backlog at %.2f MB/s, no faster than the %.2f MB/s written", drained/1e6, float64(linkRate)/1e6)
	}

	if err := host.Unlimit(); err != nil {
		t.Fatal(err)
	}
	if err := env.SetSourceLatency(0); err != nil {
		t.Fatal(err)
	}
	if n, want := compareAll(t, topic, parts), written+linkBacklog/linkValue; n != want {
		t.Fatalf("compared %d records, want the %d written", n, want)
	}
}

// measureDrain pauses topic, writes a backlog of linkBacklog bytes of
// values to the source, resumes it and times its drain through the link of
// host: from the first byte appended to the destination holding every
// record. It logs records/s and MB/s (of record batches appended, and on
// the link's wire) and returns the batch bytes per second.
func measureDrain(t *testing.T, mirror, topic string, host *testbed.Host) float64 {
	t.Helper()
	mustCLI(t, "--pause", "--topics", topic, "--mirror", mirror)
	wait.For(t, time.Minute, topic+" PAUSED", func() bool {
		rows := partitions(describeAt(t, env.Sidecars.AdminBootstrap(), mirror), topic)
		for _, r := range rows {
			if r.State != "PAUSED" {
				return false
			}
		}
		return len(rows) > 0
	})
	cl := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := make([]byte, linkValue)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for i := 0; i < linkBacklog/linkValue; {
		var rs []*kgo.Record
		for ; len(rs) < 1000 && i < linkBacklog/linkValue; i++ {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "backlog-%d", i%997), Value: value,
				Headers: []kgo.RecordHeader{{Key: "seq", Value: strconv.AppendInt(nil, int64(i), 10)}}})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("backlog: %v", err)
		}
	}
	src := endOffsets(t, env.Source, topic)
	dst := endOffsets(t, env.Destination, topic)
	var records int64
	for p, o := range src {
		records += o - dst[p]
	}
	if records != linkBacklog/linkValue {
		t.Fatalf("backlog of %d records while paused, want %d: the paused topic moved", records, linkBacklog/linkValue)
	}
	mirrored := func() float64 {
		sum := 0.0
		for _, s := range env.Sidecars.Sidecars() {
			sum += sidecarCounter(t, s, "sidemirror_mirrored_bytes_total", mirror)
		}
		return sum
	}
	base := mirrored()
	mustCLI(t, "--resume", "--topics", topic, "--mirror", mirror)
	resumed := time.Now()
	var first time.Time
	var firstBytes float64
	var firstLink testbed.Traffic
	deadline := time.Now().Add(3 * time.Minute)
	for {
		now := time.Now()
		b := mirrored()
		link, err := host.LinkTraffic()
		if err != nil {
			t.Fatal(err)
		}
		if first.IsZero() && b > base {
			first, firstBytes, firstLink = now, b, link
		}
		d := endOffsets(t, env.Destination, topic)
		done := true
		for p, o := range src {
			done = done && d[p] == o
		}
		if done {
			b = mirrored()
			link, err = host.LinkTraffic()
			if err != nil {
				t.Fatal(err)
			}
			end := time.Now()
			secs := end.Sub(first).Seconds()
			batches := (b - firstBytes) / secs
			wire := float64(link.Sub(firstLink).ToUpstream) / secs
			t.Logf("backlog of %d records (%d MB of values) drained in %v after resume (%v from the first append): %.0f records/s from the resume, %.2f MB/s of record batches from the first append, %.2f MB/s (%.1f Mbit/s) on the source host's link limited to %d Mbit/s",
				records, linkBacklog/1_000_000, end.Sub(resumed).Round(time.Millisecond), end.Sub(first).Round(time.Millisecond),
				float64(records)/end.Sub(resumed).Seconds(), batches/1e6, wire/1e6, wire*8/1e6, linkBits/1_000_000)
			return batches
		}
		if now.After(deadline) {
			t.Fatalf("backlog not drained 3 minutes after resume: destination %v, source %v", d, src)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// createTopicOn creates a topic on c whose partitions all have one replica,
// on broker.
func createTopicOn(t *testing.T, c *testbed.Cluster, name string, partitions int32, broker int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for p := range partitions {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{broker}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, newClient(t, c, testbed.Admin))
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s on %s with every partition on broker %d: %v", name, c.Name(), broker, err)
	}
}
