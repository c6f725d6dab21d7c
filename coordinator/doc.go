// Package coordinator is the controller of a sidemirror deployment: the raft
// group formed by the sidecars of one destination cluster. It validates and
// applies admin operations, drives the per-partition state machine, runs
// metadata sync (configs, partitions, consumer groups, ACLs, topic
// discovery), keeps mirror topics read-only until failover, moves
// leadership away from brokers whose sidecar died, and serves the
// __mirror_state coordinator role, which also keeps the partitions' offset
// maps: translate mode's, and in exact mode the shifts of markers a
// destination transaction coordinator wrote twice, with which the group
// offset sync translates committed offsets.
//
// The replicated state and its commands are coordinator/fsm's; this
// sidecar's raft member is coordinator/raftnode's. Service is the admin
// endpoint's protocol.Handler and runs the loops beside it. DESIGN.md
// explains the choices and maps the files.
package coordinator
