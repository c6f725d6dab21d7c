// Package statestore owns the __mirror_state topic on the destination
// cluster: the schemas of its keys and versioned values, their encoding,
// loading a coordinator partition into memory, writing and tombstoning
// records, and mapping a mirror to its coordinator partition.
//
// # Records
//
// A record's Key names its record type, mirror, topic and partition
// (DESIGN.md D6), so compaction keeps the latest record of every mirror
// partition; the KIP keys by mirror alone, which compaction would collapse.
// Record types: TypePartitionState (the KIP's MirrorPartitionState, value
// PartitionState), TypeLastMirrorEpochs (reserved for the stop boundary,
// value PartitionState), TypeMirror (one per mirror, empty value) and
// TypeSidecar (the sidecar registry in partition 0: one record per sidecar,
// keyed by its broker ID, holding its advertised admin address; written by
// each sidecar as it starts, read by kafka-cluster-mirrors to find a sidecar
// from a broker address, skipped by Load). A nil
// value is a tombstone; deleting a mirror tombstones all of its keys.
// PartitionState values are versioned and extend through tagged fields, so
// every decoder reads every later version. State codes are DESIGN.md D16's,
// defined once in internal/partstate; StateName and ParseState convert them.
//
// # Coordinator partitioning
//
// PartitionFor maps a mirror to its partition as Kafka maps a consumer group:
// Utils.abs(Java hashCode of the name) % partitions. The sidecar beside the
// leader of that partition coordinates the mirror.
//
// # Store
//
// Store wraps a client of the destination cluster: EnsureTopic creates the
// topic (compacted; its partition count is never changed), Load reads a
// partition into a map of the last value per key, Write appends records to a
// partition through the store's own idempotent, acks=all producer. Dump
// prints the whole topic as JSON lines (`sidemirror state dump`).
//
// Files: key.go (Key and record types), value.go (PartitionState and state
// codes), partition.go (PartitionFor), store.go (Store), read.go (reading a
// partition with raw ListOffsets and Fetch requests), write_via.go
// (WriteVia: a coordinator's writes through its own broker, refused once
// that broker lost the partition), sidecar.go (the sidecar registry:
// RegisterSidecar, ReadSidecars), dump.go (Dump), errors.go (sentinel
// errors), doc.go (this overview). The state codes are those of
// internal/partstate, the one partition state machine.
package statestore
