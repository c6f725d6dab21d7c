// Package monitoring holds the end-to-end test of sidemirror's monitoring
// as code: a real Prometheus (Debian's prometheus package) scrapes the test
// bed's sidecars with the committed alert rules (deploy/prometheus), every
// query of the committed Grafana dashboard (deploy/grafana) must return
// data, and the source-unreachable alert must fire once the source cluster
// is stopped.
package monitoring
