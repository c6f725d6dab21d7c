// Package e2e holds sidemirror's end-to-end tests. They run against real
// Apache Kafka clusters started once per test package by the test bed in
// e2e/testbed, and check results with independent clients (kcat, Kafka's
// console tools) as well as franz-go.
//
// Packages:
//
//	e2e            smoke tests of the bed and the fail-on-purpose check of `make e2e-fail-check`
//	e2e/mirror     the features, on the loopback bed: every broker and sidecar on 127.0.0.1
//	e2e/peersec    peer security on the loopback bed: peer TLS between the sidecars, a stranger's attacks
//	e2e/multihost  across hosts, on the multi-host bed: every broker and sidecar in a network
//	               namespace of its own, the source behind proxies (needs root and iproute2)
//	e2e/monitoring a real Prometheus scraping the sidecars: the dashboard's queries, the alert rules
//	e2e/statuspage the status page of the demo's sidecar, rendered in headless Chromium
//	e2e/testbed    the bed itself (clusters, sidecars, hosts, faults, proxies) and its leak tests
//	e2e/cmd        the demo, the benchmark and `testbed`, the bed by hand
package e2e
