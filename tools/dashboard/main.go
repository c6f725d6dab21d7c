// Command dashboard writes sidemirror's Grafana dashboard, built in Go with
// grafana-foundation-sdk, as JSON:
//
//	go run ./dashboard -out ../deploy/grafana/sidemirror.json
//
// `make` (the generate target) runs it; TestCommittedDashboard fails when
// the committed JSON differs from what this program writes. Every panel's
// queries use the metrics of docs/metrics.md, which the test checks too, and
// the Prometheus end-to-end test (e2e/monitoring) runs each of them against
// the test bed.
//
// Files:
//
//	main.go   flags, JSON output
//	panels.go the dashboard: variables, rows, panels and their queries
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "../deploy/grafana/sidemirror.json", "where to write the dashboard")
	flag.Parse()
	data, err := dashboardJSON()
	if err == nil {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dashboard: %v\n", err)
		os.Exit(1)
	}
}

// dashboardJSON returns the dashboard as indented JSON with a final newline.
func dashboardJSON() ([]byte, error) {
	d, err := build().Build()
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
