// Package fetcher is the data plane of sidemirror. It fetches raw record
// batches from source brokers, inspects them, rewrites only their producer
// header fields (the sidecar's idempotent producer ID, epoch and sequence,
// with the CRC32C recomputed) and appends them to the local destination
// broker at the same offsets they have on the source, without decompressing
// or recompressing the records (batches with compaction holes inside aside).
//
// The coordinator drives a Manager:
//
//	m, err := fetcher.NewManager(
//		fetcher.LocalClient(destination), // authenticated as a destination super user
//		fetcher.LocalBrokerID(brokerID),  // every append goes to this broker only
//		fetcher.Logger(log), fetcher.Registerer(reg),
//		fetcher.OnStateChange(report), fetcher.OnNotLeader(reassign),
//	)
//	m.SetMirror("dr", sourceOpts)                 // source client per mirror
//	m.Start(fetcher.Partition{Mirror: "dr", Topic: "orders", Partition: 0})
//	m.Status()                                    // per partition: state, HW, LEO, lag (records, time), last error
//	m.CheckSources(ctx)                           // per mirror: does its source answer (for /readyz)
//	m.Stop(ctx, p)                                // returns with no append in flight
//	m.StopPartitions(ctx, ps)                     // many at once: all asked to stop, then waited for
//	m.Close()
//
// A started partition resumes from the destination log end offset, read
// from the local broker, and sends a source batch only when its base offset
// is that log end offset; the broker must append it there. A destination
// behind the source's log start is aligned with filler records (copies of
// the first live record) and DeleteRecords; compaction holes get copies of
// the next live record (filler batches between batches; batches with holes
// inside are rebuilt, the only recompression). Transactions are replayed
// through destination transactional producers, one per source producer ID
// and partition, with their markers at the source offsets (txn.go). Batches
// that cannot be mirrored exactly (old message formats, compaction holes
// next to transactions, corruption) fail the partition with a reason naming
// the offset; nothing is ever written wrongly.
//
// With a mirror's ClientRack (the mirror config's client.rack), a partition
// whose source leader names a preferred read replica in that rack (KIP-392)
// is fetched from that follower; lag stays the leader's (session.go).
//
// Main types: Manager (partitions, mirrors, the appender, the producer ID),
// Partition and PartitionStatus (what the coordinator sees), State (the
// states of DESIGN.md D16). Errors are in errors.go; DESIGN.md in this
// directory explains the goroutines, the lock order and why.
package fetcher
