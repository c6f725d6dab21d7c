// Package fsm is the controller's replicated state machine: the State the
// raft group agrees on (mirrors, topic assignments with their mirror.name
// status, the ACLs the sidecars own, the sidecars' addresses, moved replica
// orders), the Commands that change it, and Apply.
//
// A Command is versioned and JSON bodied (EncodeCommand, DecodeCommand)
// and carries everything Apply needs, the proposer's clock included.
// Apply is deterministic: it reads no clock and no randomness, iterates
// maps in sorted order, and answers a bad command with an error Result of
// Kafka error codes, never a panic. The package imports no network, raft,
// Kafka client or logging package (TestPure checks it), so that every
// sidecar reaches the same state from the same log; coordinator/raftnode
// runs it under raft.
//
// Files:
//
//	state.go     State, Mirror, MirrorTopic, TopicStatus, ACL, Divergence; Clone; Validate (the invariants)
//	commands.go  the command types, their wire format (type byte, version byte, JSON), Result, the config keys Apply knows
//	apply.go     validation and application of every command: the only code that changes a State
//	names.go     mirror and topic name rules (KIP-1279 §1.1), ValidatePattern for proposers
//	acls.go      CreateAdminACLs, DeleteAdminACLs: the admin endpoint's ACLs (DESIGN D15)
//	throttle.go  AlterBrokerConfig, AlterTopicConfig: the destination-side throttle configs (KIP-1279 §4.12) and their parsers
//	fsm.go       FSM: Apply under the lock, Read, Watch, Index, ResultAt, Snapshot and Restore
//	codes.go     the Kafka error codes Results carry
//	errors.go    sentinel errors
//	doc.go       this overview
//
// fsmtest holds the fixtures tests of the controller build states from.
package fsm
