package main

import (
	"strings"
	"testing"
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
	for _, s := range []string{"| sidemirror (3 sidecars) | 4.00 | - | 12.5 | 25,000 | 0.50 | 10.0 | 30, 31, 32 | 0.0 | 0.50 | 2.00 |",
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

func TestThroughputSVG(t *testing.T) {
	w := &workloadResult{Records: 1000, SourceBytes: 1e6, Workload: workload{Description: "zstd & co"}}
	w.add(&measurement{Contender: limitName, Seconds: 1})
	w.add(&measurement{Contender: sidemirrorName, Seconds: 2})
	svg := throughputSVG(&report{Workloads: []*workloadResult{w}, Options: options{Records: 1000}})
	if n := strings.Count(svg, "<rect "); n != 3 { // the background and two bars
		t.Errorf("%d rects, want the background and 2 bars:\n%s", n, svg)
	}
	// The fastest bar is the full width, the other half of it.
	for _, s := range []string{`width="420" height="18" fill="#9e9e9e"`, `width="210" height="18" fill="#1f77b4"`, "500 (0.50 of the limit)", "zstd &amp; co"} {
		if !strings.Contains(svg, s) {
			t.Errorf("the chart has no %q:\n%s", s, svg)
		}
	}
}
