package fetcher

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStartedPartitionCountersAtZero checks that starting a partition
// creates its topic's counters at 0, before anything was counted, so that
// rate() over them has data: the records, bytes, fillers, rebuilt and
// coalesced batches of a topic with no gaps and no records yet.
func TestStartedPartitionCountersAtZero(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"quiet": 1})
	m := e.newManager()
	counters := map[string]*prometheus.CounterVec{
		"sidemirror_mirrored_records_total":         m.met.records,
		"sidemirror_mirrored_bytes_total":           m.met.bytes,
		"sidemirror_filler_records_total":           m.met.fillers,
		"sidemirror_rebuilt_batches_total":          m.met.rebuilt,
		"sidemirror_coalesced_source_batches_total": m.met.coalesced,
		"sidemirror_coalesced_batches_total":        m.met.coalescedInto,
	}
	for name, c := range counters {
		if n := seriesOf(c); n != 0 {
			t.Fatalf("%s has %d series before any partition started", name, n)
		}
	}
	startAll(t, m, "quiet", []int32{0})
	for name, c := range counters {
		if n := seriesOf(c); n != 1 {
			t.Errorf("%s has %d series after partition quiet-0 started, want 1", name, n)
		} else if v := metricValue(t, c.WithLabelValues(testMirror, "quiet")); v != 0 {
			t.Errorf("%s{topic=quiet} = %v, want 0", name, v)
		}
	}
}

// seriesOf returns how many series c holds.
func seriesOf(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// TestPartitionStatesAtZero checks that the partitions gauge has a series
// at 0 for FAILED, MIRRORING and the fetcher's other states before any
// partition started.
func TestPartitionStatesAtZero(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"quiet": 1})
	m := e.newManager()
	// Counted before anything reads a series (reading creates it).
	if n := seriesOf(m.met.partitions); n != 5 {
		t.Errorf("sidemirror_partitions has %d series, want 5", n)
	}
	for _, st := range []State{StateUnknown, StateLogTruncation, StateMirroring, StateStopping, StateFailed} {
		if v := metricValue(t, m.met.partitions.WithLabelValues(st.String())); v != 0 {
			t.Errorf("sidemirror_partitions{state=%q} = %v, want 0", st, v)
		}
	}
}
