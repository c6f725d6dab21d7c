package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

const committed = "../../deploy/grafana/sidemirror.json"

// The committed dashboard is what this program writes: change panels.go,
// then run make generate.
func TestCommittedDashboard(t *testing.T) {
	want, err := dashboardJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run make generate (or go run ./dashboard in tools/) and commit it", committed)
	}
}

// Every metric a panel queries is documented in docs/metrics.md (a renamed
// or removed metric leaves an empty panel otherwise).
func TestQueriesUseDocumentedMetrics(t *testing.T) {
	data, err := dashboardJSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`sidemirror_[a-z_]+`)
	queries := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			queries++
			for _, m := range metric.FindAllString(q.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				if !bytes.Contains(doc, []byte("`"+m+"`")) {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not document", p.Title, m)
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("the dashboard has %d queries; expected every panel of panels.go", queries)
	}
}
