package fetcher

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sidemirror/sidemirror/internal/kafkaproxy"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestSourceUnreachable: the source stops answering the sidecar while the
// partition is caught up, and producers keep writing: either the proxy in
// front of it goes away (connections refused: fetches fail at once), or it
// holds every frame (a blackhole: fetches hang, and fail only at kgo's
// request timeout, the fetch wait plus 10 s, after the checks here). The status and
// the metrics then say so: unreachable since the last successful fetch, lag
// in seconds growing, last known offsets kept (the lag in records is not
// reset); CheckSources reports the mirror. Once the source answers again
// the partition catches up, the copy is exact, and the catch-up is logged
// once per transition, not per fetch.
func TestSourceUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		down, up func(t *testing.T, px **kafkaproxy.Proxy, addr, upstream string)
		hangs    bool // no fetch error until the checks are done
	}{
		{
			name: "connections refused",
			down: func(t *testing.T, px **kafkaproxy.Proxy, _, _ string) { _ = (*px).Close() },
			up: func(t *testing.T, px **kafkaproxy.Proxy, addr, upstream string) {
				var err error
				if *px, err = kafkaproxy.Start(addr, upstream); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "no answer",
			down: func(t *testing.T, px **kafkaproxy.Proxy, _, _ string) { (*px).SetLatency(time.Hour) },
			up: func(t *testing.T, px **kafkaproxy.Proxy, _, _ string) {
				(*px).SetLatency(0)
				(*px).Cut() // the held frames go with their connections
			},
			hangs: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testSourceUnreachable(t, tc.down, tc.up, tc.hangs)
		})
	}
}

func testSourceUnreachable(t *testing.T, down, up func(t *testing.T, px **kafkaproxy.Proxy, addr, upstream string), hangs bool) {
	const (
		topic = "fresh"
		after = 2 * time.Second
	)
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	upstream := e.src.ListenAddrs()[0]
	px, err := kafkaproxy.Start("127.0.0.1:0", upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	addr := px.Addr()
	core, logs := observer.New(zap.InfoLevel)
	m := e.newManager(SourceUnreachableAfter(after), Logger(zap.New(core)))
	// A short retry timeout makes a failed leader look-up return while the
	// source is away: its retry log's backoff then counts from the end of
	// a look-up that took longer than the backoff itself.
	if err := m.SetMirror(testMirror, []kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second)}, MirrorSettings{}); err != nil {
		t.Fatal(err)
	}
	p := Partition{Mirror: testMirror, Topic: topic, Partition: 0}
	key := p.String()
	cl := e.producer(kgo.NoCompression())
	caughtUpLogs := func() int { return logs.FilterMessage("partition caught up with the source").Len() }

	e.produce(cl, topic, []int32{0}, 0, 50, 10)
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0})
	// More records while caught up: every fetch sees a new high watermark
	// the destination reaches right after; no new catch-up log.
	for round := 1; round <= 3; round++ {
		e.produce(cl, topic, []int32{0}, 50*round, 50, 10)
		e.waitCaughtUp(m, topic, []int32{0})
	}
	testwait.For(t, waitTimeout, "one catch-up logged", func() bool { return caughtUpLogs() == 1 })
	st := status(t, m, p)
	if !st.SourceUnreachableSince.IsZero() || st.LastFetch.IsZero() || st.Lag != 0 {
		t.Fatalf("healthy partition: %s, last fetch %v", st, st.LastFetch)
	}
	if got := partitionSeries(m, m.met.parts.unreachable)[key]; got != 0 {
		t.Fatalf("sidemirror_partition_source_unreachable = %v while healthy", got)
	}
	if got := partitionSeries(m, m.met.parts.sourceHW)[key]; got != 200 {
		t.Fatalf("sidemirror_partition_source_high_watermark = %v, want 200", got)
	}
	if got := partitionSeries(m, m.met.parts.destLEO)[key]; got != 200 {
		t.Fatalf("sidemirror_partition_destination_log_end_offset = %v, want 200", got)
	}
	if h := m.CheckSources(context.Background()); len(h) != 1 || h[0].Mirror != testMirror || h[0].Err != nil || h[0].Unreachable != 0 {
		t.Fatalf("CheckSources while healthy = %+v", h)
	}

	if n := seriesCount(m.met.errors); n != 0 {
		t.Fatalf("%d error series before the source went away", n)
	}
	down(t, &px, addr, upstream)
	testwait.For(t, waitTimeout, "the partition's source unreachable", func() bool {
		st = status(t, m, p)
		return !st.SourceUnreachableSince.IsZero()
	})
	if n := seriesCount(m.met.errors); hangs && n != 0 {
		t.Fatalf("%d error series: a source that does not answer must be seen as unreachable before any request fails", n)
	}
	if !st.SourceUnreachableSince.Equal(st.LastFetch) || st.State != StateMirroring {
		t.Fatalf("unreachable since %v, last fetch %v, state %s: want since the last successful fetch, still MIRRORING",
			st.SourceUnreachableSince, st.LastFetch, st.State)
	}
	if st.SourceHighWatermark != 200 || st.DestinationLogEndOffset != 200 || st.Lag != 0 {
		t.Fatalf("unreachable: %s; want the last known offsets", st)
	}
	if st.LagTime < after {
		t.Fatalf("lag time %s while unreachable for %s", st.LagTime, after)
	}
	series := func(d string) float64 {
		t.Helper()
		var v float64
		var ok bool
		switch d {
		case "lag_seconds":
			v, ok = partitionSeries(m, m.met.parts.lagSeconds)[key]
		case "unreachable":
			v, ok = partitionSeries(m, m.met.parts.unreachable)[key]
		case "lag_records":
			v, ok = partitionSeries(m, m.met.parts.lagRecords)[key]
		}
		if !ok {
			t.Fatalf("no %s series for %s", d, key)
		}
		return v
	}
	if series("unreachable") != 1 || series("lag_records") != 0 {
		t.Fatalf("unreachable %v, lag records %v; want 1 and the last known 0", series("unreachable"), series("lag_records"))
	}
	first := series("lag_seconds")
	testwait.For(t, waitTimeout, "sidemirror_partition_lag_seconds to grow while unreachable", func() bool {
		return series("lag_seconds") >= first+1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	h := m.CheckSources(ctx)
	if len(h) != 1 || h[0].Err == nil || h[0].Unreachable != 1 {
		t.Fatalf("CheckSources while the source is down = %+v; want an error and 1 unreachable partition", h)
	}
	if n := logs.FilterMessageSnippet("source unreachable").Len(); n != 1 {
		for _, l := range logs.All() {
			t.Log(l.Message, l.ContextMap())
		}
		t.Fatalf("%d 'source unreachable' logs, want 1", n)
	}
	if n := logs.FilterMessage("partition fell behind the source").Len(); n != 1 {
		t.Fatalf("%d 'fell behind' logs, want 1", n)
	}
	retries := logs.FilterMessage("no source leader yet").All()
	if !hangs && len(retries) == 0 {
		t.Fatal("no 'no source leader yet' retry logged while connections are refused")
	}
	for _, entry := range retries {
		if d, ok := entry.ContextMap()["backoff"].(time.Duration); !ok || d <= 0 {
			t.Fatalf("retry log with backoff %v: %v", entry.ContextMap()["backoff"], entry.ContextMap())
		}
	}

	e.produce(cl, topic, []int32{0}, 200, 100, 10) // producers reach the source directly
	up(t, &px, addr, upstream)
	e.waitCaughtUp(m, topic, []int32{0})
	testwait.For(t, waitTimeout, "the second catch-up logged", func() bool { return caughtUpLogs() == 2 })
	st = status(t, m, p)
	if !st.SourceUnreachableSince.IsZero() || st.LagTime >= after {
		t.Fatalf("after the source is back: %s", st)
	}
	if series("unreachable") != 0 {
		t.Fatal("sidemirror_partition_source_unreachable still 1 after the source is back")
	}
	if h := m.CheckSources(context.Background()); h[0].Err != nil || h[0].Unreachable != 0 {
		t.Fatalf("CheckSources after the source is back = %+v", h)
	}
	if n := logs.FilterMessage("source reachable again").Len(); n != 1 {
		t.Fatalf("%d 'source reachable again' logs, want 1", n)
	}
	if n := e.compareTopic(topic); n != 300 {
		t.Fatalf("compared %d records, want 300", n)
	}
}

// TestSourceErrorEndsWithAFetch: a caught-up partition with no new
// records shows no error once the source answers again. Replacing the
// mirror's source client (new connection settings) is no error at all, and
// a source that was away is an error only until the next successful fetch:
// describe showed "mirror source client closed or replaced" under a
// MIRRORING partition with lag 0 for good, because only an append ended it.
func TestSourceErrorEndsWithAFetch(t *testing.T) {
	const topic = "idle"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	upstream := e.src.ListenAddrs()[0]
	px, err := kafkaproxy.Start("127.0.0.1:0", upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	addr := px.Addr()
	m := e.newManager(SourceUnreachableAfter(time.Second))
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second)}
	if err := m.SetMirror(testMirror, opts, MirrorSettings{}); err != nil {
		t.Fatal(err)
	}
	p := Partition{Mirror: testMirror, Topic: topic, Partition: 0}
	e.produce(e.producer(kgo.NoCompression()), topic, []int32{0}, 0, 20, 10)
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0})

	// fetchedAfter waits for a successful fetch later than at and returns
	// the status then.
	fetchedAfter := func(what string, at time.Time) PartitionStatus {
		t.Helper()
		var st PartitionStatus
		testwait.For(t, waitTimeout, what, func() bool {
			st = status(t, m, p)
			return st.LastFetch.After(at)
		})
		return st
	}
	replaced := time.Now()
	if err := m.SetMirror(testMirror, append(opts, kgo.ClientID("renamed")), MirrorSettings{}); err != nil {
		t.Fatal(err)
	}
	st := fetchedAfter("a fetch by the new source client", replaced)
	if st.LastError != "" || st.State != StateMirroring {
		t.Fatalf("after the source client was replaced: %s, error %q; want MIRRORING and no error", st.State, st.LastError)
	}

	_ = px.Close()
	testwait.For(t, waitTimeout, "the fetch error shown", func() bool {
		st = status(t, m, p)
		return st.LastError != ""
	})
	if px, err = kafkaproxy.Start(addr, upstream); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	st = fetchedAfter("a fetch after the source is back", back)
	if st.LastError != "" || st.State != StateMirroring || st.Lag != 0 {
		t.Fatalf("after the source is back with no new records: %s, lag %d, error %q; want MIRRORING, lag 0 and no error",
			st.State, st.Lag, st.LastError)
	}
	if n := e.compareTopic(topic); n != 20 {
		t.Fatalf("compared %d records, want 20", n)
	}
}

// status returns p's status.
func status(t *testing.T, m *Manager, p Partition) PartitionStatus {
	t.Helper()
	for _, st := range m.Status() {
		if st.Partition == p {
			return st
		}
	}
	t.Fatalf("%s not in Status", p)
	return PartitionStatus{}
}
