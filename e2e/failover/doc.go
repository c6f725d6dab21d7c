// Package failover compares the outcome of a failover for a consumer group
// with sidemirror and with Kafka's MirrorMaker 2 (issue 14, `make
// failover-compare`; results in docs/failover-compare.md).
//
// One source cluster, two destinations: the Env's three-node destination
// with a sidecar per broker (sidemirror) and a one-node cluster for MM2
// (org.apache.kafka.connect.mirror.MirrorMaker in dedicated mode, the
// brokers' Kafka version from Maven Central, IdentityReplicationPolicy so
// that topic names stay, checkpoints and group offset sync on). Both tools
// mirror the same source topic at the same time and sync the group's
// offsets every 2 s (sidemirror's mirror.metadata.refresh.interval.ms,
// MM2's emit.checkpoints.interval.seconds and
// sync.group.offsets.interval.seconds).
//
// Each record's value is its sequence number, its id. A consumer group
// reads the topic on the source, committing after every poll. Then one of
// two failovers:
//   - planned: the producer stops, the group reads everything, commits and
//     stops; both tools catch up (sidemirror's destination has the source's
//     end offsets; MM2's has as many records and has checkpointed and synced
//     the group's final offsets); sidemirror's topic is stopped with
//     kafka-cluster-mirrors --stop (docs/runbooks.md, runbook 1), MM2 is
//     stopped;
//   - unplanned: every source node is killed with SIGKILL during a burst
//     of produce requests, while both tools and their offset syncs lag (MM2
//     lags by itself; sidemirror's sidecars, which otherwise keep up, are
//     frozen with SIGSTOP for the last 8000 acknowledged records and thawed
//     after the kill); then the same stop on each tool (runbook 2; MM2 gets
//     10 s, then SIGKILL).
//
// The group then starts on each destination with the offsets the tool
// synced and reads to the end. Count (count.go) compares by record id:
// re-read (handed again what it was handed before), skipped (the
// destination holds it, the group was never handed it), lost (acknowledged
// by the source, never on the destination), and for sidemirror the bound
// on re-reads: what the group was handed on the source at or after the
// offsets the destination held at the failover. A record id is taken from
// the destination with kcat. sidemirror must meet its goal (planned: 0
// lost, 0 re-read, 0 skipped; unplanned: 0 skipped, re-reads within the
// bound); MM2's numbers are reported as measured.
//
// # Files
//
//	doc.go           this overview
//	count.go         Delivery, Outcome, Count, Unsynced and the result tables
//	checkpoint.go    decoding MM2's checkpoint records
//	workload.go      the numbered producer, the committing group member, kcat dumps
//	failover_test.go TestFailoverCompare (FAILOVER_COMPARE=1): both scenarios, both tools
package failover
