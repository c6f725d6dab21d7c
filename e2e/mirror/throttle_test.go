package mirror

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

// restartWith restarts every sidecar, one after the other, with key set to
// value in its properties; the test's end restores them (to defaultValue
// where the key was not set).
func restartWith(t *testing.T, key, value, defaultValue string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, s := range env.Sidecars.Sidecars() {
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		old, err := s.SetConfig(key, value)
		if err != nil {
			t.Fatal(err)
		}
		if old == "" {
			old = defaultValue // the file had no line: restore the default
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := s.Stop(ctx); err != nil {
				t.Error(err)
			}
			if _, err := s.SetConfig(key, old); err != nil {
				t.Error(err)
			}
			if err := s.Start(ctx); err != nil {
				t.Error(err)
			}
			if err := s.WaitHealthy(ctx); err != nil {
				t.Error(err)
			}
		})
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// sidecarSample is a sidecar's sidemirror_mirrored_bytes_total of a mirror
// and when it was read.
type sidecarSample struct {
	bytes float64
	at    time.Time
}

// mirroredBytesBySidecar reads sidemirror_mirrored_bytes_total of mirror on
// each sidecar, by broker ID, each with the time of its own scrape.
func mirroredBytesBySidecar(t *testing.T, mirror string) map[int32]sidecarSample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[int32]sidecarSample{}
	for _, s := range env.Sidecars.Sidecars() {
		page, err := s.Metrics(ctx)
		at := time.Now()
		if err != nil {
			t.Fatalf("metrics of sidecar %d: %v", s.BrokerID, err)
		}
		var total float64
		for line := range strings.Lines(page) {
			if strings.HasPrefix(line, "sidemirror_mirrored_bytes_total{") && strings.Contains(line, `mirror="`+mirror+`"`) {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				total += v
			}
		}
		out[s.BrokerID] = sidecarSample{total, at}
	}
	return out
}

// sidecarGauge reads the unlabelled metric name of sidecar id; -1 when it
// cannot be read.
func sidecarGauge(t *testing.T, id int32, name string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := env.Sidecars.Sidecar(id).Metrics(ctx)
	if err != nil {
		return -1
	}
	for line := range strings.Lines(page) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return -1
}

// produceBacklog writes perPartition records of 1,000 B, uncompressed, to
// each of the partitions of topic on the source, in batches of about 32 KB.
// Bytes count when the broker answers an append, and up to 5 appends are in
// flight per partition: small batches keep what is in flight at either end
// of a measurement window (at most 160 KB) small against the 4 MB it
// measures at 1 MB/s.
func produceBacklog(t *testing.T, topic string, partitions []int32, perPartition int) {
	t.Helper()
	cl := newClient(t, env.Source, testbed.Admin, kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(32<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	value := bytes.Repeat([]byte("0123456789"), 100)
	for i := 0; i < perPartition; i += 500 {
		var rs []*kgo.Record
		for _, p := range partitions {
			for j := i; j < min(i+500, perPartition); j++ {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", j), Value: value})
			}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// sidecarRates measures each sidecar's appended bytes per second of mirror
// (sidemirror_mirrored_bytes_total): it waits until some sidecar's bytes
// grew past base (nil: zero), then measures over four seconds starting
// 1.5 s later, and returns the rates of the sidecars whose bytes moved in
// the window.
func sidecarRates(t *testing.T, mirror string, base map[int32]sidecarSample) map[int32]float64 {
	t.Helper()
	testwait.Every(50*time.Millisecond).For(t, time.Minute, "the first mirrored bytes", func() bool {
		for id, b := range mirroredBytesBySidecar(t, mirror) {
			if b.bytes > base[id].bytes {
				return true
			}
		}
		return false
	})
	time.Sleep(1500 * time.Millisecond) // the measurement window starts here; it is no check
	s0 := mirroredBytesBySidecar(t, mirror)
	time.Sleep(4 * time.Second) // the measurement window
	s1 := mirroredBytesBySidecar(t, mirror)
	out := map[int32]float64{}
	for id, end := range s1 {
		moved, d := end.bytes-s0[id].bytes, end.at.Sub(s0[id].at)
		if moved == 0 {
			continue // this sidecar drives none of the partitions
		}
		out[id] = moved / d.Seconds()
		t.Logf("sidecar %d: %.0f bytes in %s: %.0f bytes/s", id, moved, d.Round(time.Millisecond), out[id])
	}
	return out
}

// TestThrottledRate mirrors a backlog with
// mirror.replication.throttled.rate=1000000 on every sidecar and measures
// each sidecar's appended bytes per second over four seconds of the drain:
// 1 MB/s +-10% (the rate is per sidecar, as KIP-1279's is per broker).
func TestThrottledRate(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, rate = "throttled", "throttled", 1_000_000
	restartWith(t, "mirror.replication.throttled.rate", strconv.Itoa(rate), "0")
	createSourceTopic(t, topic, 3, nil)
	// 3 x 7,000 records of 1,000 B: about 7 MB per partition, about 7 s
	// per sidecar at the rate (one partition each, mostly).
	const perPartition = 7000
	produceBacklog(t, topic, []int32{0, 1, 2}, perPartition)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)

	rates := sidecarRates(t, mirror, nil)
	for id, got := range rates {
		if got < 0.9*rate || got > 1.1*rate {
			t.Errorf("sidecar %d appended %.0f bytes/s, want %d +-10%%", id, got, rate)
		}
	}
	if len(rates) == 0 {
		t.Fatal("no sidecar mirrored during the window")
	}
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	if n := compareAll(t, topic, 3); n != 3*perPartition {
		t.Fatalf("compared %d records, want %d", n, 3*perPartition)
	}
}

// TestFirstRecordAfterStart measures how long after `--start` the first
// record of a warm cluster's backlog is on the destination: within 1 s.
func TestFirstRecordAfterStart(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "startup", "startup"
	// Warm up: a mirror whose first topic goes through the whole path.
	createSourceTopic(t, "startup-warm", 1, nil)
	produceTo(t, env.Source, "startup-warm", "w", 10)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", "startup-warm", "--mirror", mirror)
	waitCaughtUp(t, mirror, "startup-warm", time.Minute)

	createSourceTopic(t, topic, 6, nil)
	produceTo(t, env.Source, topic, "v", 600)
	adm := kadm.NewClient(newClient(t, env.Destination, testbed.Admin))
	start := time.Now()
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	returned := time.Since(start)
	var first time.Duration
	testwait.Every(10*time.Millisecond).For(t, time.Minute, "the first record on the destination", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		got := false
		ends.Each(func(o kadm.ListedOffset) { got = got || (o.Err == nil && o.Offset > 0) })
		first = time.Since(start)
		return got
	})
	t.Logf("--start returned after %s; first record on the destination %s after --start", returned.Round(time.Millisecond), first.Round(time.Millisecond))
	if first > time.Second {
		t.Errorf("first record %s after --start, want within 1 s", first)
	}
	waitCaughtUp(t, mirror, topic, time.Minute)
}
