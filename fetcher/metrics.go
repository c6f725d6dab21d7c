package fetcher

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
)

// metrics are the fetcher's Prometheus collectors (DESIGN.md D13).
type metrics struct {
	parts           *partitionCollector      // per partition: lag, offsets, last fetch; read at scrape time
	records         *prometheus.CounterVec   // mirror, topic
	bytes           *prometheus.CounterVec   // mirror, topic
	fillers         *prometheus.CounterVec   // mirror, topic
	rebuilt         *prometheus.CounterVec   // mirror, topic
	coalesced       *prometheus.CounterVec   // mirror, topic
	coalescedInto   *prometheus.CounterVec   // mirror, topic
	markers         *prometheus.CounterVec   // mirror, topic, outcome
	repeatedMarkers *prometheus.CounterVec   // mirror, topic
	fetchLatency    *prometheus.HistogramVec // mirror
	followerBytes   *prometheus.CounterVec   // mirror
	redirects       *prometheus.CounterVec   // mirror
	appendLatency   prometheus.Histogram
	e2eLatency      *prometheus.HistogramVec // mirror
	partitions      *prometheus.GaugeVec     // state
	errors          *prometheus.CounterVec   // op, code
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
		parts: newPartitionCollector(),
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
		repeatedMarkers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_repeated_markers_total",
			Help: "Transaction markers a destination coordinator wrote a second time, recorded as offset shifts: every later source offset of the partition is that much higher on the destination.",
		}, []string{"mirror", "topic"}),
		fetchLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sidemirror_fetch_latency_seconds",
			Help:    "Time from sending a fetch request to a source broker to its response.",
			Buckets: latencyBuckets,
		}, []string{"mirror"}),
		followerBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_follower_fetch_bytes_total",
			Help: "Record batch bytes fetched from source followers, preferred read replicas in the mirror's client.rack (KIP-392), rather than from the leaders.",
		}, []string{"mirror"}),
		redirects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidemirror_preferred_replica_redirects_total",
			Help: "Times a source leader named a preferred read replica for a partition (KIP-392) and its fetches moved there.",
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
	m.parts = register(reg, m.parts, &err)
	m.records = register(reg, m.records, &err)
	m.bytes = register(reg, m.bytes, &err)
	m.fillers = register(reg, m.fillers, &err)
	m.rebuilt = register(reg, m.rebuilt, &err)
	m.markers = register(reg, m.markers, &err)
	m.repeatedMarkers = register(reg, m.repeatedMarkers, &err)
	m.coalesced = register(reg, m.coalesced, &err)
	m.coalescedInto = register(reg, m.coalescedInto, &err)
	m.fetchLatency = register(reg, m.fetchLatency, &err)
	m.followerBytes = register(reg, m.followerBytes, &err)
	m.redirects = register(reg, m.redirects, &err)
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

// partitionCollector reports the per-partition series of every Manager
// registered with it (a registry shared by two Managers holds one), from
// their partitions' status at scrape time: the lag in time keeps growing
// between events, and a removed partition's series are gone with it.
type partitionCollector struct {
	lagRecords, lagSeconds, sourceHW, destLEO, lastFetch, unreachable *prometheus.Desc

	mu       sync.Mutex
	managers map[*Manager]struct{}
}

func newPartitionCollector() *partitionCollector {
	labels := []string{"mirror", "topic", "partition"}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) }
	return &partitionCollector{
		lagRecords: desc("sidemirror_partition_lag_records",
			"Source high watermark minus destination log end offset of a mirrored partition; while the source is unreachable, at its last known high watermark."),
		lagSeconds: desc("sidemirror_partition_lag_seconds",
			"Seconds since the destination last held every record the source had, as of a fetch sent then (an upper bound of the age of the oldest source record not yet on the destination); grows while the source is unreachable."),
		sourceHW: desc("sidemirror_partition_source_high_watermark",
			"The source high watermark of a mirrored partition, from the last successful fetch."),
		destLEO: desc("sidemirror_partition_destination_log_end_offset",
			"The destination log end offset of a mirrored partition."),
		lastFetch: desc("sidemirror_partition_last_fetch_timestamp_seconds",
			"When a fetch of the partition from the source last succeeded (Unix time; 0: none since its driver started)."),
		unreachable: desc("sidemirror_partition_source_unreachable",
			"1 while the partition's source cannot be fetched from: no fetch succeeded for 10 seconds and fetches or source look-ups fail or hang."),
		managers: make(map[*Manager]struct{}),
	}
}

func (c *partitionCollector) add(m *Manager) {
	c.mu.Lock()
	c.managers[m] = struct{}{}
	c.mu.Unlock()
}

func (c *partitionCollector) remove(m *Manager) {
	c.mu.Lock()
	delete(c.managers, m)
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lagRecords, c.lagSeconds, c.sourceHW, c.destLEO, c.lastFetch, c.unreachable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: a series set per partition that
// a Manager drives and that is not STOPPED. Offsets not known yet have no
// series. At thousands of partitions a scrape is tens of thousands of
// series, all held at once by the registry until it has encoded them: each
// is a partitionGauge sharing its partition's label pairs, built once when
// the partition starts (prometheus.MustNewConstMetric built and sorted them
// for every series of every scrape: 6.4 KB allocated per partition and
// scrape, 1.3 KB now).
func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	managers := make([]*Manager, 0, len(c.managers))
	for m := range c.managers {
		managers = append(managers, m)
	}
	c.mu.Unlock()
	for _, m := range managers {
		for _, p := range m.partitions() {
			st := p.status()
			if st.State == StateStopped {
				continue
			}
			var g [6]partitionGauge // one allocation per partition
			n := 0
			gauge := func(d *prometheus.Desc, v float64) {
				g[n] = partitionGauge{desc: d, labels: p.promLabels, value: v}
				ch <- &g[n]
				n++
			}
			if st.Lag >= 0 {
				gauge(c.lagRecords, float64(st.Lag))
			}
			gauge(c.lagSeconds, st.LagTime.Seconds())
			if st.SourceHighWatermark >= 0 {
				gauge(c.sourceHW, float64(st.SourceHighWatermark))
			}
			if st.DestinationLogEndOffset >= 0 {
				gauge(c.destLEO, float64(st.DestinationLogEndOffset))
			}
			last := 0.0
			if !st.LastFetch.IsZero() {
				last = float64(st.LastFetch.UnixNano()) / float64(time.Second)
			}
			gauge(c.lastFetch, last)
			unreachable := 0.0
			if !st.SourceUnreachableSince.IsZero() {
				unreachable = 1
			}
			gauge(c.unreachable, unreachable)
		}
	}
}

// partitionGauge is one per-partition series of a scrape.
type partitionGauge struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair // the partition's, shared by its series: read only
	value  float64
}

func (g *partitionGauge) Desc() *prometheus.Desc { return g.desc }

func (g *partitionGauge) Write(out *dto.Metric) error {
	out.Label = g.labels
	out.Gauge = &dto.Gauge{Value: &g.value}
	return nil
}

// partitionLabels returns the label pairs of p's series, sorted by name as
// the registry wants them.
func partitionLabels(p Partition) []*dto.LabelPair {
	pair := func(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }
	return []*dto.LabelPair{
		pair("mirror", p.Mirror),
		pair("partition", strconv.Itoa(int(p.Partition))),
		pair("topic", p.Topic),
	}
}

// startPartition creates the per-topic counters of p's topic at 0, so
// that rate() over them returns 0 rather than no data (a dashboard's
// panels, alert rules) before the first filler, rebuilt batch or marker.
func (m *metrics) startPartition(p Partition) {
	for _, c := range []*prometheus.CounterVec{m.records, m.bytes, m.fillers, m.rebuilt, m.coalesced, m.coalescedInto} {
		c.WithLabelValues(p.Mirror, p.Topic)
	}
}
