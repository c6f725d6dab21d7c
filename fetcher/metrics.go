package fetcher

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
)

// metrics are the fetcher's Prometheus collectors (DESIGN.md D13).
type metrics struct {
	lag           *prometheus.GaugeVec     // mirror, topic, partition
	records       *prometheus.CounterVec   // mirror, topic
	bytes         *prometheus.CounterVec   // mirror, topic
	fillers       *prometheus.CounterVec   // mirror, topic
	rebuilt       *prometheus.CounterVec   // mirror, topic
	coalesced     *prometheus.CounterVec   // mirror, topic
	coalescedInto *prometheus.CounterVec   // mirror, topic
	markers       *prometheus.CounterVec   // mirror, topic, outcome
	fetchLatency  *prometheus.HistogramVec // mirror
	appendLatency prometheus.Histogram
	e2eLatency    *prometheus.HistogramVec // mirror
	partitions    *prometheus.GaugeVec     // state
	errors        *prometheus.CounterVec   // op, code
}

// Values of the op label of sidemirror_errors_total.
const (
	opFetch       = "fetch"
	opAppend      = "append"
	opListOffsets = "list_offsets"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	latencyBuckets := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5ms .. ~16s
	m := &metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidemirror_partition_lag_records",
			Help: "Source high watermark minus destination log end offset of a mirrored partition.",
		}, []string{"mirror", "topic", "partition"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_mirrored_records_total",
			Help: "Source records appended to the destination.",
		}, []string{"mirror", "topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_mirrored_bytes_total",
			Help: "Record batch bytes appended to the destination (filler batches excluded).",
		}, []string{"mirror", "topic"}),
		fillers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_filler_records_total",
			Help: "Filler records written to close gaps in source logs (leading gaps and compaction holes).",
		}, []string{"mirror", "topic"}),
		rebuilt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_rebuilt_batches_total",
			Help: "Source batches with compaction holes inside, appended rebuilt (decompressed, holes filled, recompressed).",
		}, []string{"mirror", "topic"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_coalesced_source_batches_total",
			Help: "Small source batches appended merged with their neighbours into larger destination batches (same records and offsets).",
		}, []string{"mirror", "topic"}),
		coalescedInto: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_coalesced_batches_total",
			Help: "Destination batches made of several small source batches.",
		}, []string{"mirror", "topic"}),
		markers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_transaction_markers_total",
			Help: "Source transaction markers replayed on the destination at their source offsets, by outcome (commit, abort).",
		}, []string{"mirror", "topic", "outcome"}),
		fetchLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sidemirror_fetch_latency_seconds",
			Help:    "Time from sending a fetch request to a source broker to its response.",
			Buckets: latencyBuckets,
		}, []string{"mirror"}),
		appendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sidemirror_append_latency_seconds",
			Help:    "Time from sending a produce request to the local broker to its response.",
			Buckets: latencyBuckets,
		}),
		e2eLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sidemirror_end_to_end_latency_seconds",
			Help: "Time from a source batch's max timestamp (its last record's create time, or the source's append time) to the destination's acknowledgement of its append.",
			// 1ms .. ~9 minutes: a backlog being copied shows as its age.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20),
		}, []string{"mirror"}),
		partitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidemirror_partitions",
			Help: "Partitions this sidecar's fetcher drives, by state.",
		}, []string{"state"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_errors_total",
			Help: "Errors of fetches, appends and offset look-ups by Kafka error name (or network).",
		}, []string{"op", "code"}),
	}
	var err error
	m.lag = register(reg, m.lag, &err)
	m.records = register(reg, m.records, &err)
	m.bytes = register(reg, m.bytes, &err)
	m.fillers = register(reg, m.fillers, &err)
	m.rebuilt = register(reg, m.rebuilt, &err)
	m.markers = register(reg, m.markers, &err)
	m.coalesced = register(reg, m.coalesced, &err)
	m.coalescedInto = register(reg, m.coalescedInto, &err)
	m.fetchLatency = register(reg, m.fetchLatency, &err)
	m.appendLatency = register(reg, m.appendLatency, &err)
	m.e2eLatency = register(reg, m.e2eLatency, &err)
	m.partitions = register(reg, m.partitions, &err)
	m.errors = register(reg, m.errors, &err)
	// Every state a driver can be in exists from the start, at 0, so that
	// sum(sidemirror_partitions{state="FAILED"}) is 0 rather than no data
	// while nothing failed.
	for _, st := range []State{StateUnknown, StateLogTruncation, StateMirroring, StateStopping, StateFailed} {
		m.partitions.WithLabelValues(st.String())
	}
	return m, err
}

// register registers c, or returns the collector already registered under
// the same description (a second Manager on one registry shares it).
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		if *errp == nil {
			*errp = err
		}
	}
	return c
}

// errorCode returns the code label for err: the Kafka error name, or
// "network" for anything else (connection errors, timeouts). Code 6 gets
// the name Kafka has used since 2.7 (kerr keeps the old one).
func errorCode(err error) string {
	ke, ok := errors.AsType[*kerr.Error](err)
	switch {
	case !ok:
		return "network"
	case ke == kerr.NotLeaderForPartition:
		return "NOT_LEADER_OR_FOLLOWER"
	}
	return ke.Message
}

func (m *metrics) countError(op string, err error) {
	m.errors.WithLabelValues(op, errorCode(err)).Inc()
}

func (m *metrics) setLag(p Partition, lag int64) {
	m.lag.WithLabelValues(p.Mirror, p.Topic, strconv.Itoa(int(p.Partition))).Set(float64(lag))
}

// startPartition creates the per-topic counters of p's topic at 0, so
// that rate() over them returns 0 rather than no data (a dashboard's
// panels, alert rules) before the first filler, rebuilt batch or marker.
func (m *metrics) startPartition(p Partition) {
	for _, c := range []*prometheus.CounterVec{m.records, m.bytes, m.fillers, m.rebuilt, m.coalesced, m.coalescedInto} {
		c.WithLabelValues(p.Mirror, p.Topic)
	}
}

func (m *metrics) deletePartition(p Partition) {
	m.lag.DeleteLabelValues(p.Mirror, p.Topic, strconv.Itoa(int(p.Partition)))
}
