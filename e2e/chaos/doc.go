// Package chaos is the seeded fault run of issue 14: real traffic through a
// mirror while faults hit the sidecars, the brokers and the network at
// moments drawn from a seed, then an independent check that the destination
// holds the source's records, no more and no fewer.
//
// The run (chaos_test.go, `make chaos`; docs/chaos-testing.md) uses the
// multi-host bed when the test runs as root: a 2-node source in hosts s1
// and s2, reached by the sidecars only through the bed's proxies, and a
// 3-node destination in hosts d1 to d3, each with its broker and its
// sidecar, each broker's log directory on a tmpfs of 512 MiB. Without root
// it falls back to the loopback bed and the process faults alone.
// `E2E_CHAOS=1 make e2e` runs it for 4 minutes (the CI version, off by
// default until the defects docs/chaos-testing.md lists are fixed), `make
// chaos` for 20.
//
// Schedule draws one fault at a time from CHAOS_SEED (printed by every
// run, so that a failure replays), each undone after its hold and
// followed by a quiet gap of 2 to 8 s, until CHAOS_DURATION (20 minutes; 4 in CI) is over. A frozen sidecar
// or broker stays frozen longer than the failover timeout, so that the
// frozen sidecar's partitions really move (repository DESIGN.md D7). The
// kinds: kill -9 of a sidecar, of the raft leader's sidecar, of a
// destination or a source broker, each started again; SIGSTOP of a sidecar
// or a broker; a destination host cut off and the source cut off; every
// sidecar killed at once (SidecarGroup.KillAll), all started again; a
// destination broker's log directory (its tmpfs) filled to the last byte
// and freed, the broker started again if the full disk stopped it (Kafka
// halts a broker whose only log directory fails). A bed offers the kinds
// it can inject (Topology.Kinds): the loopback bed has no hosts, no
// proxies and no tmpfs; the multi-host bed (network namespaces,
// e2e/testbed) has them all. Every fault is logged with its wall-clock time
// (UTC) when it starts and when it is undone, to line it up with the
// brokers' and sidecars' logs, which a failed run keeps in the bed's
// directory (printed at the start).
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
//     per transaction, some transactions spanning a fault, each pausing 150
//     to 250 ms between transactions (a mirror replays a partition's
//     transactions one at a time);
//   - a compacted topic (small segments, eager cleaner) with a few hundred
//     keys overwritten again and again and tombstones among them, so that
//     compaction holes and empty batches reach the mirror;
//   - a consumer group reading the plain topic and committing offsets on
//     the source, whose offsets the mirror syncs to the destination.
//
// The checker uses only Kafka's own tools and kcat, never this repository's
// code: after the last fault it waits until the destination's end offsets
// (kcat -Q / GetOffsetShell) equal the source's and records how long that
// took after the last fault, or after the workload's last record when the
// source took that later (convergence, at most 60 s; it compares high
// watermarks and last stable offsets, waits up to 3 minutes, logs what
// differs meanwhile and then names the partitions whose end offsets still
// differ, and with them each sidecar's rates since the last log: records
// copied, produce requests and their mean latency, fetches, merged and
// filler batches, markers, budget waits and errors); then, per partition, it dumps both sides
// with kcat (-f with partition, offset, key, value, headers and timestamp),
// once read_committed and once read_uncommitted, and aligns them record
// for record (Align): the same records, each at the source's offset plus a
// shift that is 0 unless a destination coordinator wrote a marker twice
// and the fetcher mirrored past it; the shift may grow only across a gap
// both logs have (control batches), by the destination's extra width, and
// each extra offset must be a control batch right behind one of the same
// producer ID, epoch and type, as Kafka's DumpLogSegments reads them from
// a replica's segments (Confirm). Such partitions pass and the summary
// names them with their shifts; the compacted topic is compared by the
// value each key ends with. A transaction is resolved the same way on both
// sides when its records are visible to read_committed on both or on
// neither. It counts
// duplicates (a producer's sequence number seen twice) and gaps (a sequence
// missing) on the destination from the headers, checks that no partition is
// FAILED in describe (kafka-cluster-mirrors --describe) and that every
// synced group offset (kafka-consumer-groups --describe on the destination)
// is at most the destination partition's end offset. It prints the summary:
// faults injected by kind, what the workload wrote (records acknowledged,
// transactions committed and aborted, compacted writes, records the group
// read), records checked, duplicates, gaps, time to converge after the
// last fault, and the seed.
//
// # Files
//
//	doc.go       this overview
//	schedule.go  fault kinds, Schedule, CHAOS_SEED and CHAOS_DURATION, Summary
//	workload.go  Workload: the idempotent, transactional and compacting producers and the group
//	check.go     kcat dumps, Compare, Align and Confirm (shifts), SeqStats (duplicates and gaps), Report
//	activity.go  the sidecars' counters read while a run converges, as rates
//	chaos_test.go TestChaos (CHAOS=1): the bed, the faults injected, the checks
package chaos
