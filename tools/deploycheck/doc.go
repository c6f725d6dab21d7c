// Package deploycheck holds tests, and no other code, of what deploy/ and
// the Dockerfile give operators: every Kubernetes manifest parses into its
// Kubernetes type without unknown fields, and the fields sidemirror depends
// on hold together (broker IDs, config, Secret keys, probes, peers, the
// Strimzi affinity); the Dockerfile builds a static binary on a non-root
// distroless image; the Prometheus alert rules pass promtool's checks and
// their unit tests.
//
// Files:
//
//	doc.go               this comment
//	manifests_test.go    the Kubernetes manifests of deploy/kubernetes
//	dockerfile_test.go   the Dockerfile
//	prometheus_test.go   deploy/prometheus: promtool check and test rules
package deploycheck
