// Package coordinator is the controller of a sidemirror deployment: the raft
// group formed by the sidecars of one destination cluster. It holds the
// replicated state of mirrors and topic assignments, validates and applies
// admin operations, drives the per-partition state machine, runs metadata
// sync (configs, partitions, consumer groups, ACLs, topic discovery) and
// keeps mirror topics read-only until failover.
//
// The replicated state is a State (mirrors, topic assignments with their
// mirror.name status, the ACLs the sidecars own, the sidecars' addresses),
// held by the raft FSM. It changes only through Commands: versioned, JSON
// bodied, carrying the proposer's clock, validated and applied
// deterministically with a Result of Kafka error codes (a bad command is an
// error result, never a panic). Every sidecar runs a Node, its member of the
// raft group: Node.Apply proposes a command on the leader or forwards it to
// the leader's admin endpoint (Forwarder, ApplyLocal), and FSM.Read and
// FSM.Watch serve readers. DESIGN.md explains the choices.
package coordinator
