package main

import (
	"fmt"
	"os"
	"strings"
)

// The contenders.
const (
	limitName      = "limit"
	sidemirrorName = "sidemirror"
	mm2Name        = "mm2"
	// sidemirrorNoLatencyName is sidemirror through the source's proxies
	// without their latency, measured beside sidemirrorName on the latency
	// workloads (not a -contenders choice).
	sidemirrorNoLatencyName = "sidemirror-0ms"
)

var contenderTitle = map[string]string{
	limitName:               "destination's own ingest",
	sidemirrorName:          "sidemirror (3 sidecars)",
	sidemirrorNoLatencyName: "sidemirror, no added latency",
	mm2Name:                 "MirrorMaker 2 (dedicated)",
}

// lagPoint is a mirror's lag at one moment of its backlog's drain.
type lagPoint struct {
	Seconds float64 `json:"s"`       // since the contender's start
	Records int64   `json:"records"` // records (offsets) not yet on the destination
}

// measurement is what one contender measured on one workload.
type measurement struct {
	Contender          string  `json:"contender"`
	Seconds            float64 `json:"seconds"`                      // wall time until every record was on the destination
	FirstRecordSeconds float64 `json:"firstRecordSeconds,omitempty"` // until the first record was (mirrors only)
	CPUSeconds         float64 `json:"cpuSeconds"`                   // the contender's processes, user + system
	PeakRSSMiB         []int64 `json:"peakRssMiB"`                   // per process
	BrokerCPUSeconds   float64 `json:"destinationBrokerCpuSeconds"`  // the three destination brokers together

	MBPerSecond      float64 `json:"mbPerSecond"`
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	CPUSecondsPerGB  float64 `json:"cpuSecondsPerGB"`
	VsLimit          float64 `json:"vsLimit,omitempty"` // records/s over the limit's
	VsMM2            float64 `json:"vsMM2,omitempty"`   // records/s over MM2's

	// Lag is the drain of the backlog over time (mirrors only).
	Lag []lagPoint `json:"lag,omitempty"`
	// The latency probe (mirrors of -probe-workloads only): records/s it
	// wrote, the records it measured, and their end-to-end latency.
	ProbeRecordsPerSecond float64 `json:"probeRecordsPerSecond,omitempty"`
	ProbeRecords          int     `json:"probeRecords,omitempty"`
	LatencyP50Ms          float64 `json:"latencyP50Ms,omitempty"`
	LatencyP99Ms          float64 `json:"latencyP99Ms,omitempty"`
	LatencyMaxMs          float64 `json:"latencyMaxMs,omitempty"`
}

// workloadResult is one workload's measurements.
type workloadResult struct {
	Workload    workload       `json:"workload"`
	Records     int            `json:"records"`
	ValueBytes  int            `json:"valueBytes"`
	SourceBytes int64          `json:"sourceBytes"` // log bytes of one source topic: the MB of MB/s and GB of CPU s/GB
	Results     []*measurement `json:"results"`
	// LatencyRatio (latency workloads): sidemirror's records/s through the
	// latency over its records/s through the same proxies without it.
	LatencyRatio float64 `json:"latencyRatio,omitempty"`
	// Note is a sentence on the workload's preparation (the compaction).
	Note string `json:"note,omitempty"`
}

// report is a whole run.
type report struct {
	Options      options           `json:"options"`
	Host         string            `json:"host"`
	KafkaVersion string            `json:"kafkaVersion"`
	Date         string            `json:"date"`
	Note         string            `json:"note,omitempty"`
	Plot         string            `json:"plot,omitempty"`    // the throughput chart, relative to the doc
	LagPlot      string            `json:"lagPlot,omitempty"` // the lag chart, relative to the doc
	Workloads    []*workloadResult `json:"workloads"`
}

// add derives m's rates from the workload's size and recomputes every
// result's ratios.
func (w *workloadResult) add(m *measurement) {
	if m.Seconds > 0 {
		m.MBPerSecond = float64(w.SourceBytes) / 1e6 / m.Seconds
		m.RecordsPerSecond = float64(w.Records) / m.Seconds
	}
	if w.SourceBytes > 0 {
		m.CPUSecondsPerGB = m.CPUSeconds / (float64(w.SourceBytes) / 1e9)
	}
	w.Results = append(w.Results, m)
	limit, mm := w.find(limitName), w.find(mm2Name)
	for _, r := range w.Results {
		if limit != nil && limit.RecordsPerSecond > 0 {
			r.VsLimit = r.RecordsPerSecond / limit.RecordsPerSecond
		}
		if mm != nil && mm.RecordsPerSecond > 0 {
			r.VsMM2 = r.RecordsPerSecond / mm.RecordsPerSecond
		}
	}
	if sm, sm0 := w.find(sidemirrorName), w.find(sidemirrorNoLatencyName); sm != nil && sm0 != nil && sm0.RecordsPerSecond > 0 {
		w.LatencyRatio = sm.RecordsPerSecond / sm0.RecordsPerSecond
	}
}

func (w *workloadResult) find(contender string) *measurement {
	for _, r := range w.Results {
		if r.Contender == contender {
			return r
		}
	}
	return nil
}

// Table returns the workload's Markdown table, headed by its description.
func (w *workloadResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", w.Workload.Description)
	fmt.Fprintf(&b, "%s records of about %s B, %d partitions, %.1f MB on the source (one topic's log).\n\n",
		thousands(int64(w.Records)), thousands(int64(w.ValueBytes)), w.Workload.Partitions, float64(w.SourceBytes)/1e6)
	b.WriteString("| contender | wall s | first record s | MB/s | records/s | CPU s | CPU s/GB | peak RSS MiB | destination brokers CPU s | records/s vs limit | vs MM2 | latency p50 / p99 ms |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range w.Results {
		first := "-"
		if r.FirstRecordSeconds > 0 {
			first = fmt.Sprintf("%.2f", r.FirstRecordSeconds)
		}
		latency := "-"
		if r.ProbeRecords > 0 {
			latency = fmt.Sprintf("%.0f / %.0f", r.LatencyP50Ms, r.LatencyP99Ms)
		}
		title := contenderTitle[r.Contender]
		if r.Contender == limitName {
			title += limitTool(w.Workload)
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s | %.1f | %s | %.2f | %.1f | %s | %.1f | %s | %s | %s |\n",
			title, r.Seconds, first, r.MBPerSecond, thousands(int64(r.RecordsPerSecond+0.5)),
			r.CPUSeconds, r.CPUSecondsPerGB, rss(r.PeakRSSMiB), r.BrokerCPUSeconds, ratio(r.VsLimit), ratio(r.VsMM2), latency)
	}
	if sm, mm := w.find(sidemirrorName), w.find(mm2Name); sm != nil && mm != nil && sm.CPUSecondsPerGB > 0 {
		fmt.Fprintf(&b, "\nMM2 used %.1fx the CPU per GB of the three sidecars together.\n", mm.CPUSecondsPerGB/sm.CPUSecondsPerGB)
	}
	if w.Note != "" {
		fmt.Fprintf(&b, "\n%s\n", w.Note)
	}
	if w.LatencyRatio > 0 {
		fmt.Fprintf(&b, "\nThrough the %d ms link sidemirror reached %.2f of its records/s through the same proxies without the latency (the target is at least 0.80).\n",
			w.Workload.Latency.Milliseconds(), w.LatencyRatio)
	}
	var probes []string
	for _, r := range w.Results {
		if r.ProbeRecords > 0 {
			probes = append(probes, fmt.Sprintf("%s at %s records/s (half its capacity), %s records: p50 %.1f ms, p99 %.1f ms, max %.1f ms",
				contenderTitle[r.Contender], thousands(int64(r.ProbeRecordsPerSecond+0.5)), thousands(int64(r.ProbeRecords)), r.LatencyP50Ms, r.LatencyP99Ms, r.LatencyMaxMs))
		}
	}
	if len(probes) > 0 {
		fmt.Fprintf(&b, "\nEnd-to-end latency (source producer's timestamp to a destination consumer's receipt; capacity is the records/s the mirror measured, or the destination's own ingest when lower): %s.\n", strings.Join(probes, "; "))
	}
	b.WriteString("\n")
	return b.String()
}

// limitTool names the limit's producer of w.
func limitTool(w workload) string {
	if w.Transactional {
		return " (ProducerPerformance, transactions)"
	}
	return " (kcat)"
}

func ratio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

func rss(mib []int64) string {
	if len(mib) == 0 {
		return "-"
	}
	s := make([]string, len(mib))
	for i, m := range mib {
		s[i] = fmt.Sprint(m)
	}
	return strings.Join(s, ", ")
}

// thousands formats n with commas: 1,234,567.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Markdown returns the run as the body of the Benchmark section: how it
// was run, on what, and a table per workload.
func (r *report) Markdown() string {
	var b strings.Builder
	names := make([]string, len(r.Workloads))
	for i, w := range r.Workloads {
		names[i] = w.Workload.Name
	}
	fmt.Fprintf(&b, "Run of %s: `go run ./e2e/cmd/bench -records %d -value-bytes %d -partitions %d -many-partitions %d -workloads %s -contenders %s -warmup-records %d -probe-workloads '%s' -probe-duration %v`, "+
		"Kafka %s, on %s. ",
		r.Date, r.Options.Records, r.Options.ValueBytes, r.Options.Partitions, r.Options.ManyPartitions, strings.Join(names, ","), r.Options.Contenders,
		r.Options.WarmupRecords, r.Options.ProbeWorkloads, r.Options.ProbeDuration, r.KafkaVersion, r.Host)
	if r.Note != "" {
		b.WriteString(r.Note)
	}
	b.WriteString("\n\n")
	if r.Plot != "" {
		fmt.Fprintf(&b, "![records/s per workload and contender](%s)\n\n", r.Plot)
	}
	if r.LagPlot != "" {
		fmt.Fprintf(&b, "![each mirror's lag over time while it drains a workload's backlog](%s)\n\n", r.LagPlot)
	}
	for _, w := range r.Workloads {
		b.WriteString(w.Table())
	}
	return b.String()
}

// benchmarkIntro opens the generated section: what the figures are.
const benchmarkIntro = "`make bench` (`e2e/cmd/bench`) starts the loopback test bed (a 1-node source with a TCP proxy in\n" +
	"front of its node, a 3-node destination with SASL and an authorizer, one sidecar per destination broker,\n" +
	"all on this host), warms the destination up, and runs every workload with three contenders, each on\n" +
	"topics of its own holding the same records: the destination's own ingest (kcat writing the records\n" +
	"straight to the destination, batch.size 128 KiB, linger 20 ms: the limit; for transactions Kafka's\n" +
	"ProducerPerformance, see [Workloads](#workloads)), sidemirror (the three sidecars, from `--start` until\n" +
	"the destination holds the source's end offsets), and MirrorMaker 2 in dedicated mode\n" +
	"(IdentityReplicationPolicy, jars from Maven Central of the brokers' version, three tasks, its producer\n" +
	"batching by itself: batch.size 128 KiB, linger 20 ms; its wall time includes its start-up). Destination\n" +
	"topics have replication factor 3, every write is acks=all; a workload's topics are deleted on both\n" +
	"clusters before the next workload (sidemirror's mirror topics stopped first). MB/s is the source's\n" +
	"log bytes of one topic\n" +
	"per second (the same bytes for every contender, so the ratios of MB/s and of records/s are equal); CPU s\n" +
	"is the contender's own processes (the three sidecars, the MM2 JVM, kcat), the brokers' CPU has a column\n" +
	"of its own; peak RSS is per process (VmHWM, reset before each contender). The limit's producer\n" +
	"compresses the records itself, on the same cores as the brokers; the mirrors copy the source's\n" +
	"compressed batches. Latency p50 / p99 is the probe's ([Latency probe](#latency-probe)). The rest of\n" +
	"this section is written by `make bench` (`-doc docs/performance.md`) from its last run.\n\n"

// writeDoc replaces the Benchmark section of the Markdown file at path (or
// appends one) with the run's tables.
func writeDoc(path string, r *report) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := replaceSection(string(old), "## Benchmark", benchmarkIntro+r.Markdown())
	return os.WriteFile(path, []byte(doc), 0o644)
}

// replaceSection returns doc with the body of the section headed by the
// line heading (up to the next heading of its level, or the end) replaced
// by body; a doc without that section gets it appended.
func replaceSection(doc, heading, body string) string {
	section := heading + "\n\n" + strings.TrimRight(body, "\n") + "\n"
	start := -1
	if strings.HasPrefix(doc, heading+"\n") {
		start = 0
	} else if i := strings.Index(doc, "\n"+heading+"\n"); i >= 0 {
		start = i + 1
	}
	if start < 0 {
		return strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	rest := doc[start+len(heading)+1:]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		return doc[:start] + section + rest[end:]
	}
	return doc[:start] + section
}
