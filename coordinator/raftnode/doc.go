// Package raftnode runs this sidecar's member of the controller's raft
// group (DESIGN D5): raft with a raft-boltdb store and file snapshots, the
// raft transport, bootstrap from the static peers, membership changes,
// self-registration, and Apply, which appends a command on the leader or
// forwards it to the leader's admin endpoint from a follower (Forwarder,
// Peers), retries only what certainly was not appended, and resolves
// commands whose leader lost leadership while committing (resolveLost).
// It runs coordinator/fsm as raft's state machine.
//
// Peer security (DESIGN D15, coordinator/DESIGN.md): NodeConfig.StreamLayer
// carries the raft transport's connections (internal/peertls's mutual TLS,
// each peer tied to its broker ID), NodeConfig.Probe checks a new member
// before AddMember adds it, NewPeers' options dial the internal APIs
// through the peer listener (protocol.DialFunc), and PeerGuard lets an
// authenticated peer register only itself. Without a StreamLayer the node
// listens with a bounded TCP stream layer of its own.
//
// Files:
//
//	node.go        NodeConfig and its checks, OpenNode (storage, transport, bootstrap), metrics, the observer and registration goroutines, Close
//	apply.go       Apply, ApplyCommand, ApplyLocal, resolveLost, ResultErr
//	ready.go       WaitCaughtUp: the state holds everything committed before the call
//	membership.go  Members, AddMember, RemoveMember: the join rules
//	peers.go       Forwarder, Peers (the client of the other sidecars' internal APIs)
//	peerguard.go   PeerGuard: an authenticated peer registers only itself
//	transport.go   the plaintext raft stream layer with its bounds; the check that a new member answers
//	fsm.go         the raft.FSM adapter of coordinator/fsm, with its logs
//	hclog.go       the zap adapter raft logs through
//	transport.go   the plain TCP transport, advertising the raft address unresolved
//	errors.go      sentinel errors, NotLeaderError
//	doc.go         this overview
//
// raftnodetest runs nodes in one process on raft's in-memory transport.
package raftnode
