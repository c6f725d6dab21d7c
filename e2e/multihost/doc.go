// Package multihost holds the end-to-end tests that run sidemirror across
// hosts: every broker, and the sidecar beside each destination broker, in a
// network namespace of its own on the multi-host bed of e2e/testbed
// (EnvOptions.MultiHost), with the source reached through proxies. The tests
// check mirroring, write forwarding, the describe fan-out and dead-sidecar
// detection across those hosts, with kcat dumps from the root namespace as
// the independent check, and that a sidecar configured with an address the
// other hosts cannot dial refuses to start. They need root and iproute2, and skip without root.
//
// File map (all tests):
//
//	main_test.go        TestMain: the clusters and the sidecars, addressed as docs/ say
//	helpers_test.go     CLI, describe, topics, producing, offsets, kcat dumps
//	hosts_test.go       placement, mirroring, forwarding and fan-out across hosts
//	deadsidecar_test.go a sidecar killed with SIGKILL, detected across hosts
//	advertised_test.go  addresses the other hosts cannot dial, or that reach another host, refused at start
//	unreachable_test.go the destination cut off from the source: describe, metrics, /readyz
//	cutoff_test.go      a sidecar cut off from the other two, its broker up: failover and fencing
//	link_test.go        a source link limited to 80 Mbit/s with 50 ms each way: lag, drain rate
package multihost
