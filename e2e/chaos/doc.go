// Package chaos is the seeded fault run of issue 14: real traffic through a
// mirror while faults hit the sidecars, the brokers and the network at
// moments drawn from a seed, then an independent check that the destination
// holds the source's records, no more and no fewer.
//
// Built so far: the fault schedule (schedule.go), the workload
// (workload.go), the checker's comparisons and report (check.go) and the
// run on the loopback bed (chaos_test.go, `make chaos`), with the faults
// that bed can inject (the multi-host bed will add the others).
//
// Schedule draws one fault at a time from CHAOS_SEED (printed by every
// run, so that a failure replays), each undone after its hold and
// followed by a quiet gap of 2 to 8 s, until CHAOS_DURATION (20 minutes; 4 in CI) is over. A frozen sidecar
// or broker stays frozen longer than the failover timeout, so that the
// frozen sidecar's partitions really move (repository DESIGN.md D7). The
// kinds: kill -9 of a sidecar, of the raft leader's sidecar, of a
// destination or a source broker, each started again; SIGSTOP of a sidecar
// or a broker; a destination host cut off and the source cut off; every
// sidecar killed at once; a destination broker's log directory (a small
// tmpfs) filled and freed. A bed offers the kinds it can inject
// (Topology.Kinds): the loopback bed has no hosts and no tmpfs; the
// multi-host bed (network namespaces, e2e/testbed) has them all.
//
// # The run
//
// Workload (StartWorkload), all on the source, for the whole run and a
// little after the last fault:
//   - an idempotent producer into a plain topic (6 partitions), each record
//     carrying its producer's name and a sequence number in a header, so a
//     duplicate or a gap names the record;
//   - two transactional producers into a second topic, committing about
//     three transactions in four and aborting the rest, several partitions
//     per transaction, some transactions spanning a fault;
//   - a compacted topic (small segments, eager cleaner) with a few hundred
//     keys overwritten again and again and tombstones among them, so that
//     compaction holes and empty batches reach the mirror;
//   - a consumer group reading the plain topic and committing offsets on
//     the source, whose offsets the mirror syncs to the destination.
//
// The checker uses only Kafka's own tools and kcat, never this repository's
// code: after the last fault it waits until the destination's end offsets
// (kcat -Q / GetOffsetShell) equal the source's and records how long that
// took (convergence, at most 60 s); then, per partition, it dumps both sides
// with kcat (-f with partition, offset, key, value, headers and timestamp),
// once read_committed and once read_uncommitted, and compares them line by
// line; a transaction is resolved the same way on both sides when its
// records are visible to read_committed on both or on neither. It counts
// duplicates (a producer's sequence number seen twice) and gaps (a sequence
// missing) on the destination from the headers, checks that no partition is
// FAILED in describe (kafka-cluster-mirrors --describe) and that every
// synced group offset (kafka-consumer-groups --describe on the destination)
// is at most the destination partition's end offset. It prints the summary:
// faults injected by kind, records checked, duplicates, gaps, time to
// converge after the last fault, and the seed.
//
// # Files
//
//	doc.go       this overview
//	schedule.go  fault kinds, Schedule, CHAOS_SEED and CHAOS_DURATION, Summary
//	workload.go  Workload: the idempotent, transactional and compacting producers and the group
//	check.go     kcat dumps, Compare, SeqStats (duplicates and gaps), Report
//	chaos_test.go TestChaos (CHAOS=1): the run on the loopback bed, faults injected, the checks
package chaos
