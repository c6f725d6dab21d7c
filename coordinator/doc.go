// Package coordinator is the controller of a sidemirror deployment: the raft
// group formed by the sidecars of one destination cluster. It holds the
// replicated state of mirrors and topic assignments, validates and applies
// admin operations, drives the per-partition state machine, runs metadata
// sync (configs, partitions, consumer groups, ACLs, topic discovery) and
// keeps mirror topics read-only until failover.
package coordinator
