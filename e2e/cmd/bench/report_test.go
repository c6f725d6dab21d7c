package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"
)

func TestReplaceSection(t *testing.T) {
	doc := "# T\n\n## Throttling\n\nkeep\n\n## Benchmark\n\nold figures\n\n## Memory\n\nkeep too\n"
	got := replaceSection(doc, "## Benchmark", "new figures\n")
	want := "# T\n\n## Throttling\n\nkeep\n\n## Benchmark\n\nnew figures\n\n## Memory\n\nkeep too\n"
	if got != want {
		t.Errorf("replaced in the middle:\n%q\nwant\n%q", got, want)
	}
	if again := replaceSection(got, "## Benchmark", "new figures\n"); again != want {
		t.Errorf("a second run changed the doc:\n%q", again)
	}
	got = replaceSection("# T\n\n## Memory\n\nkeep\n", "## Benchmark", "figures")
	if want := "# T\n\n## Memory\n\nkeep\n\n## Benchmark\n\nfigures\n"; got != want {
		t.Errorf("appended:\n%q\nwant\n%q", got, want)
	}
	got = replaceSection("# T\n\n## Benchmark\n\nold\n", "## Benchmark", "new")
	if want := "# T\n\n## Benchmark\n\nnew\n"; got != want {
		t.Errorf("replaced at the end:\n%q\nwant\n%q", got, want)
	}
	// A heading that only starts like the section's is not it.
	got = replaceSection("## Benchmarks of old\n\nkeep\n", "## Benchmark", "new")
	if !strings.HasPrefix(got, "## Benchmarks of old\n\nkeep\n") || !strings.HasSuffix(got, "## Benchmark\n\nnew\n") {
		t.Errorf("a longer heading was taken for the section:\n%q", got)
	}
}

func TestRatios(t *testing.T) {
	w := &workloadResult{Records: 100_000, ValueBytes: 500, SourceBytes: 50_000_000, Workload: workload{Description: "d", Partitions: 6}}
	w.add(&measurement{Contender: limitName, Seconds: 2, CPUSeconds: 1})
	w.add(&measurement{Contender: sidemirrorName, Seconds: 4, CPUSeconds: 0.5, PeakRSSMiB: []int64{30, 31, 32}})
	w.add(&measurement{Contender: mm2Name, Seconds: 8, CPUSeconds: 10, PeakRSSMiB: []int64{900}})
	sm := w.find(sidemirrorName)
	if sm.MBPerSecond != 12.5 || sm.RecordsPerSecond != 25_000 || sm.CPUSecondsPerGB != 10 {
		t.Errorf("sidemirror: %.2f MB/s, %.0f records/s, %.2f CPU s/GB; want 12.5, 25000, 10", sm.MBPerSecond, sm.RecordsPerSecond, sm.CPUSecondsPerGB)
	}
	// The limit came first: its ratio to MM2 is set once MM2 is measured.
	if l := w.find(limitName); l.VsLimit != 1 || l.VsMM2 != 4 {
		t.Errorf("limit: %.2f of the limit, %.2f of MM2; want 1 and 4", l.VsLimit, l.VsMM2)
	}
	if sm.VsLimit != 0.5 || sm.VsMM2 != 2 {
		t.Errorf("sidemirror: %.2f of the limit, %.2f of MM2; want 0.5 and 2", sm.VsLimit, sm.VsMM2)
	}
	table := w.Table()
	for _, s := range []string{"| sidemirror (3 sidecars) | 4.00 | - | 12.5 | 25,000 | 0.50 | 10.0 | 30, 31, 32 | 0.0 | 0.50 | 2.00 | - |",
		"100,000 records of about 500 B, 6 partitions, 50.0 MB", "MM2 used 20.0x the CPU per GB"} {
		if !strings.Contains(table, s) {
			t.Errorf("the table has no %q:\n%s", s, table)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// hasColor reports whether the image holds a pixel of exactly c.
func hasColor(img image.Image, c color.RGBA) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B && uint8(a>>8) == c.A {
				return true
			}
		}
	}
	return false
}

func TestThroughputPNG(t *testing.T) {
	w := &workloadResult{Records: 1000, SourceBytes: 1e6, Workload: workload{Name: "zstd", Description: "zstd & co"}}
	w.add(&measurement{Contender: limitName, Seconds: 1})
	w.add(&measurement{Contender: sidemirrorName, Seconds: 2})
	r := &report{Workloads: []*workloadResult{w}, Options: options{Records: 1000}}
	p, err := throughputPlot(r)
	if err != nil {
		t.Fatal(err)
	}
	// The tallest bar is the limit's 1,000 records/s.
	if p.Y.Max < 1000 {
		t.Errorf("the y axis ends at %v, below the limit's 1000 records/s", p.Y.Max)
	}
	data, err := throughputPNG(r)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	for _, c := range []string{limitName, sidemirrorName} {
		if !hasColor(img, contenderColor[c]) {
			t.Errorf("the chart has no bar in %s's colour", c)
		}
	}
	if hasColor(img, contenderColor[mm2Name]) {
		t.Error("the chart has MM2's colour, which was not measured")
	}
}

func TestLagPNG(t *testing.T) {
	lag := []lagPoint{{0.5, 1000}, {1, 600}, {2, 0}} // neither starts at 0 s: the axis does
	a := &workloadResult{Records: 1000, SourceBytes: 1e6, Workload: workload{Name: "lz4"}}
	a.add(&measurement{Contender: limitName, Seconds: 1})
	a.add(&measurement{Contender: sidemirrorName, Seconds: 2, Lag: lag})
	a.add(&measurement{Contender: mm2Name, Seconds: 4, Lag: []lagPoint{{0.3, 1000}, {3, 1000}, {4, 0}}})
	b := &workloadResult{Records: 1000, SourceBytes: 1e6, Workload: workload{Name: "small"}}
	b.add(&measurement{Contender: limitName, Seconds: 1}) // no mirror: no chart
	r := &report{Workloads: []*workloadResult{a, b}}
	plots, err := lagPlots(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 1 {
		t.Fatalf("%d charts, want 1 (the workload without mirrors has none)", len(plots))
	}
	if plots[0].X.Min != 0 || plots[0].X.Max != 4 || plots[0].Y.Max < 1000 {
		t.Errorf("x from %v to %v s, y to %v records; want 0 to 4 and at least 1000", plots[0].X.Min, plots[0].X.Max, plots[0].Y.Max)
	}
	data, err := lagPNG(r)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if !hasColor(img, contenderColor[sidemirrorName]) || !hasColor(img, contenderColor[mm2Name]) {
		t.Error("the chart lacks a mirror's line")
	}
	if _, err := lagPNG(&report{Workloads: []*workloadResult{b}}); err == nil {
		t.Error("a run without lag made a chart")
	}
}

func TestLatencyInTable(t *testing.T) {
	w := &workloadResult{Records: 1000, SourceBytes: 1e6, Workload: workload{Name: "latency50ms", Description: "d", Latency: 50 * time.Millisecond}}
	w.add(&measurement{Contender: sidemirrorNoLatencyName, Seconds: 1})
	w.add(&measurement{Contender: sidemirrorName, Seconds: 1.25, ProbeRecords: 900, ProbeRecordsPerSecond: 400, LatencyP50Ms: 104.2, LatencyP99Ms: 131.6, LatencyMaxMs: 140})
	if w.LatencyRatio != 0.8 {
		t.Errorf("latency ratio %v, want 0.8", w.LatencyRatio)
	}
	table := w.Table()
	for _, s := range []string{"| 104 / 132 |", "Through the 50 ms link sidemirror reached 0.80 of its records/s", "p50 104.2 ms, p99 131.6 ms",
		"| sidemirror, no added latency | 1.00 |"} {
		if !strings.Contains(table, s) {
			t.Errorf("the table has no %q:\n%s", s, table)
		}
	}
}

func TestPercentile(t *testing.T) {
	var v []float64
	for i := 100; i >= 1; i-- {
		v = append(v, float64(i))
	}
	for q, want := range map[float64]float64{0.5: 50, 0.99: 99, 1: 100, 0: 1} {
		if got := percentile(v, q); got != want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", q, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

func TestSelectedWorkloads(t *testing.T) {
	all := workloads(6, 2000, 500)
	for _, name := range workloadOrder {
		if w, ok := all[name]; !ok || w.Name != name || w.Description == "" {
			t.Errorf("workload %q: %+v", name, w)
		}
	}
	if len(all) != len(workloadOrder) {
		t.Errorf("%d workloads, %d in the order", len(all), len(workloadOrder))
	}
	if w := all["txn"]; !w.Transactional || w.Latency != 0 {
		t.Errorf("txn: %+v", w)
	}
	if w := all["compacted"]; !w.Compacted || *w.topicConfigs(true)["cleanup.policy"] != "compact" || w.topicConfigs(false)["segment.bytes"] != nil {
		t.Errorf("compacted: %+v, source configs %v", w, w.topicConfigs(true))
	}
	if w := all["latency50ms"]; w.Latency != 50*time.Millisecond || w.topicConfigs(true) != nil {
		t.Errorf("latency50ms: %+v", w)
	}
	good := options{Records: 10, ValueBytes: 5, Partitions: 1, ManyPartitions: 2, Workloads: strings.Join(workloadOrder, ","),
		ProbeWorkloads: "lz4,latency50ms", ProbeDuration: 5 * time.Second, Contenders: "limit,mm2"}
	if ws, err := good.selected(); err != nil || len(ws) != len(workloadOrder) {
		t.Fatalf("selected: %d workloads, %v", len(ws), err)
	}
	for name, o := range map[string]options{
		"unknown workload":       func() options { o := good; o.Workloads = "lz4,wan"; return o }(),
		"unknown probe workload": func() options { o := good; o.ProbeWorkloads = "lz5"; return o }(),
		"probe too short":        func() options { o := good; o.ProbeDuration = probeLead; return o }(),
	} {
		if _, err := o.selected(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o := good
	o.ProbeWorkloads = ""
	if _, err := o.selected(); err != nil {
		t.Errorf("no probe: %v", err)
	}
}
