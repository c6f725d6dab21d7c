package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// activityMetrics are the sidecar counters whose changes tell, while a run
// converges, where each sidecar's time goes: records copied, produce
// requests to its broker and their mean latency, source fetches, source
// batches merged, filler records, and waits for the memory budget.
var activityMetrics = []string{
	"sidemirror_mirrored_records_total",
	"sidemirror_append_latency_seconds_count",
	"sidemirror_append_latency_seconds_sum",
	"sidemirror_fetch_latency_seconds_count",
	"sidemirror_fetch_latency_seconds_sum",
	"sidemirror_coalesced_source_batches_total",
	"sidemirror_coalesced_batches_total",
	"sidemirror_filler_records_total",
	"sidemirror_transaction_markers_total",
	"sidemirror_buffer_memory_wait_seconds_total",
	"sidemirror_errors_total",
}

// activity is one reading of activityMetrics per sidecar (broker ID),
// summed over labels.
type activity struct {
	at     time.Time
	values map[int32]map[string]float64
}

// readActivity reads the activityMetrics of every sidecar that answers.
func readActivity(ctx context.Context, sidecars []*testbed.Sidecar) activity {
	a := activity{at: time.Now(), values: map[int32]map[string]float64{}}
	for _, s := range sidecars {
		page, err := s.Metrics(ctx)
		if err != nil {
			continue
		}
		v := map[string]float64{}
		for line := range strings.Lines(page) {
			name, _, _ := strings.Cut(line, "{")
			name, _, _ = strings.Cut(name, " ")
			for _, want := range activityMetrics {
				if name == want {
					f := strings.Fields(line)
					x, _ := strconv.ParseFloat(f[len(f)-1], 64)
					v[name] += x
				}
			}
		}
		a.values[s.BrokerID] = v
	}
	return a
}

// since describes each sidecar's activity between prev and a, one line per
// sidecar.
func (a activity) since(prev activity) string {
	secs := a.at.Sub(prev.at).Seconds()
	if secs < 1 {
		return " (no interval yet)"
	}
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(a.values)) {
		v := a.values[id]
		p, ok := prev.values[id]
		if !ok {
			continue
		}
		d := func(name string) float64 { return v[name] - p[name] }
		mean := func(sum, count string) float64 {
			if d(count) == 0 {
				return 0
			}
			return 1000 * d(sum) / d(count)
		}
		fmt.Fprintf(&b, "\n  sidecar %d: %.0f records/s, %.1f produce requests/s (mean %.1f ms), %.1f fetches/s (mean %.1f ms), "+
			"%.0f source batches/s merged into %.1f/s, %.0f filler records/s, %.1f markers/s, budget wait %.2f s, %.0f errors",
			id, d("sidemirror_mirrored_records_total")/secs,
			d("sidemirror_append_latency_seconds_count")/secs, mean("sidemirror_append_latency_seconds_sum", "sidemirror_append_latency_seconds_count"),
			d("sidemirror_fetch_latency_seconds_count")/secs, mean("sidemirror_fetch_latency_seconds_sum", "sidemirror_fetch_latency_seconds_count"),
			d("sidemirror_coalesced_source_batches_total")/secs, d("sidemirror_coalesced_batches_total")/secs,
			d("sidemirror_filler_records_total")/secs, d("sidemirror_transaction_markers_total")/secs,
			d("sidemirror_buffer_memory_wait_seconds_total"), d("sidemirror_errors_total"))
	}
	return b.String()
}
