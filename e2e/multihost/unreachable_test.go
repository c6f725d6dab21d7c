package multihost

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// sourceCut is how long TestSourceUnreachable keeps the destination cut
// off from the source; the checks during the cut fall within its first
// 20 s.
const sourceCut = 60 * time.Second

// refreshInterval is mirror.metadata.refresh.interval.ms's default, which
// the test's mirror keeps.
const refreshInterval = 30 * time.Second

// TestSourceUnreachable cuts the destination's hosts off from the source
// (the proxies in front of the source's listeners blackhole: connections
// stay open and nothing answers, as behind a network partition) while a
// producer keeps writing to the source. Within 2 refresh intervals describe
// and --json show every partition as unreachable (lag not available, since
// when, never lag 0), the lag-in-time metric grows, and /readyz answers 503
// naming the mirror's source. After the link is back the mirror catches
// up, /readyz answers 200 again, and kcat dumps of source and destination
// are identical.
func TestSourceUnreachable(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, parts = "unreach", "unreach", 3
	createSourceTopic(t, topic, parts)
	produce(t, topic, 3_000, 21)
	createMirror(t, env.Sidecars.AdminBootstrap(), mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	for p, pd := range partitions(describeAt(t, env.Sidecars.AdminBootstrap(), mirror), topic) {
		if pd.SourceUnreachableSinceMs != -1 || pd.LastFetchTimestampMs <= 0 || pd.LagTimeMs < 0 {
			t.Fatalf("healthy partition %d: %+v", p, pd)
		}
	}
	for _, s := range env.Sidecars.Sidecars() {
		wait.For(t, 30*time.Second, fmt.Sprintf("/readyz of sidecar %d answering 200", s.BrokerID), func() bool {
			code, _ := readyz(t, s)
			return code == http.StatusOK
		})
	}

	// A producer writes to the source (directly, not through the proxies)
	// during the whole cut.
	var (
		produced int
		mu       sync.Mutex
		stop     = make(chan struct{})
		stopped  bool
		done     = make(chan error, 1)
	)
	cl := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(50 * time.Millisecond):
			}
			var rs []*kgo.Record
			for j := range 20 {
				rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "cut-%d", j), Value: fmt.Appendf(nil, "during the cut %d/%d", i, j)})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				done <- err
				return
			}
			mu.Lock()
			produced += len(rs)
			mu.Unlock()
		}
	}()
	stopProducer := func() {
		t.Helper()
		if stopped {
			return
		}
		close(stop)
		stopped = true
		if err := <-done; err != nil {
			t.Fatalf("producer: %v", err)
		}
	}
	t.Cleanup(func() { _ = env.RestoreSource() })
	t.Cleanup(func() {
		if !stopped {
			close(stop)
		}
	})
	wait.For(t, 30*time.Second, "the producer to write", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return produced > 0
	})

	cut := time.Now()
	if err := env.BlackholeSource(); err != nil {
		t.Fatal(err)
	}
	var rows map[int32]partitionRow
	wait.For(t, time.Until(cut.Add(2*refreshInterval)), "describe and --json to show every partition unreachable", func() bool {
		rows = describeRows(t, mirror, topic)
		for p := range int32(parts) {
			if !rows[p].unreachable() {
				return false
			}
		}
		return len(rows) == parts
	})
	shown := time.Since(cut)
	t.Logf("every partition shown unreachable %v after the cut", shown.Round(time.Millisecond))
	for p, r := range rows {
		if r.json.Lag == 0 || r.lag == "0" {
			t.Fatalf("partition %d shows lag 0 while the source is unreachable: %+v %q", p, r.json, r.line)
		}
		since := time.UnixMilli(r.json.SourceUnreachableSinceMs)
		if since.After(cut.Add(time.Second)) || since.Before(cut.Add(-30*time.Second)) {
			t.Fatalf("partition %d unreachable since %v; the cut was at %v", p, since, cut)
		}
	}

	lagSeconds := func() map[string]float64 { return partitionGauge(t, "sidemirror_partition_lag_seconds", mirror) }
	first := lagSeconds()
	if len(first) != parts {
		t.Fatalf("lag seconds series %v, want one per partition", first)
	}
	wait.For(t, 30*time.Second, "sidemirror_partition_lag_seconds of every partition to grow", func() bool {
		now := lagSeconds()
		for k, v := range first {
			if now[k] < v+5 {
				return false
			}
		}
		return true
	})
	for k, v := range partitionGauge(t, "sidemirror_partition_source_unreachable", mirror) {
		if v != 1 {
			t.Fatalf("sidemirror_partition_source_unreachable{%s} = %v during the cut", k, v)
		}
	}
	t.Logf("lag seconds at first sight %v, now %v", first, lagSeconds())
	for _, s := range env.Sidecars.Sidecars() {
		code, body := readyz(t, s)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "FAIL source of mirror "+mirror) ||
			!strings.Contains(body, "partition(s) driven here cannot fetch") {
			t.Fatalf("/readyz of sidecar %d during the cut = %d:\n%s", s.BrokerID, code, body)
		}
		if !strings.Contains(body, "ok   raft: member") || !strings.Contains(body, "ok   local broker") {
			t.Fatalf("/readyz of sidecar %d fails more than the source:\n%s", s.BrokerID, body)
		}
		t.Logf("/readyz of sidecar %d during the cut:\n%s", s.BrokerID, body)
	}

	time.Sleep(time.Until(cut.Add(sourceCut))) // the cut's length is the point here
	if err := env.RestoreSource(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return produced
	}
	atHeal := count()
	wait.For(t, 30*time.Second, "records written after the link is back", func() bool { return count() >= atHeal+200 })
	stopProducer()
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	t.Logf("caught up %v after the link was back (%d records written by the producer, %d of them before the link was back after the %v cut)",
		time.Since(healed).Round(time.Millisecond), count(), atHeal, sourceCut)
	for _, s := range env.Sidecars.Sidecars() {
		wait.For(t, 30*time.Second, fmt.Sprintf("/readyz of sidecar %d answering 200 after the heal", s.BrokerID), func() bool {
			code, _ := readyz(t, s)
			return code == http.StatusOK
		})
	}
	for k, v := range partitionGauge(t, "sidemirror_partition_source_unreachable", mirror) {
		if v != 0 {
			t.Fatalf("sidemirror_partition_source_unreachable{%s} = %v after the heal", k, v)
		}
	}
	for p, r := range describeRows(t, mirror, topic) {
		if r.unreachable() || r.json.Lag != 0 {
			t.Fatalf("partition %d after the heal: %+v %q", p, r.json, r.line)
		}
	}
	if n, want := compareAll(t, topic, parts), 3_000+count(); n != want {
		t.Fatalf("compared %d records, want the %d written", n, want)
	}
}

// partitionRow is one partition of describe: its --json row and its line
// in the table (with the error line below it, if any).
type partitionRow struct {
	json      jsonRow
	line, lag string // the table's row and its LAG column
	errLine   string
}

// jsonRow is what the test reads of a --json row.
type jsonRow struct {
	Lag                      int64
	SourceUnreachableSinceMs int64
	LastError                string
}

// unreachable reports whether both outputs show the partition unreachable.
func (r partitionRow) unreachable() bool {
	return r.json.SourceUnreachableSinceMs > 0 && r.json.Lag == -1 && strings.Contains(r.json.LastError, "source unreachable since ") &&
		r.lag == "-" && strings.Contains(r.errLine, "error: source unreachable since ")
}

// describeRows returns describe's rows of topic, from --json and from the
// table.
func describeRows(t *testing.T, mirror, topic string) map[int32]partitionRow {
	t.Helper()
	out := map[int32]partitionRow{}
	for p, pd := range partitions(describeAt(t, env.Sidecars.AdminBootstrap(), mirror), topic) {
		out[p] = partitionRow{json: jsonRow{Lag: pd.Lag, SourceUnreachableSinceMs: pd.SourceUnreachableSinceMs, LastError: deref(pd.LastError)}}
	}
	lines := strings.Split(mustCLI(t, "--describe", "--mirror", mirror), "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 7 || f[0] != mirror || f[1] != topic {
			continue
		}
		p, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("describe row %q", line)
		}
		r := out[int32(p)]
		r.line, r.lag = line, f[5]
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  error: ") {
			r.errLine = lines[i+1]
		}
		out[int32(p)] = r
	}
	return out
}

// partitionGauge returns the per-partition gauge name of mirror from every
// sidecar's /metrics, keyed by broker and partition label.
func partitionGauge(t *testing.T, name, mirror string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range env.Sidecars.Sidecars() {
		for line := range strings.Lines(metrics(t, s)) {
			if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `mirror="`+mirror+`"`) {
				continue
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q", line)
			}
			labels := f[0][len(name):]
			out[fmt.Sprintf("broker=%d %s", s.BrokerID, labels)] = v
		}
	}
	return out
}

// readyz returns a sidecar's /readyz status and body.
func readyz(t *testing.T, s *testbed.Sidecar) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.HTTPAddr+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("/readyz of sidecar %d: %v", s.BrokerID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("/readyz of sidecar %d: %v", s.BrokerID, err)
	}
	return resp.StatusCode, string(body)
}
