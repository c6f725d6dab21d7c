package raftnode

import (
	"errors"
	"fmt"
)

var (
	// ErrNotLeader is matched (errors.Is) by the error of ApplyLocal on a
	// node that is not the raft leader; that error is a *NotLeaderError and
	// names the leader's admin address when it is known. A Forwarder returns
	// an error matching ErrNotLeader when the remote node answered so;
	// Node.Apply then retries, because the command was certainly not
	// appended to the raft log.
	ErrNotLeader = errors.New("coordinator: not the raft leader")

	// ErrNotDelivered is returned (wrapped) by a Forwarder when the command
	// certainly did not reach the leader, for example because the
	// connection could not be opened. Node.Apply retries it. Errors after
	// the command was sent must not match it: the leader may have applied
	// the command, and a retry would apply it twice.
	ErrNotDelivered = errors.New("coordinator: command not delivered to the raft leader")

	// ErrNoLeader is returned (wrapped with the context's error) by
	// Node.Apply when no leader, or no admin address for it, became known
	// before the context ended. The raft group has no quorum, or the
	// sidecars cannot reach each other on their raft addresses.
	ErrNoLeader = errors.New("coordinator: no raft leader known")

	// ErrClosed is returned by the methods of a Node after Close began.
	ErrClosed = errors.New("coordinator: node is closed")

	// ErrInvalidNodeConfig is matched by every error of NodeConfig
	// validation; the message names the field, the offending value and
	// what is expected.
	ErrInvalidNodeConfig = errors.New("coordinator: invalid node configuration")

	// ErrUnknownMember is matched by the error of RemoveMember for an ID
	// that is not in the raft configuration.
	ErrUnknownMember = errors.New("coordinator: not a member of the raft group")

	// ErrLastVoter is matched by the error of RemoveMember for the only
	// voter of the group: without it, no leader could ever be elected.
	ErrLastVoter = errors.New("coordinator: the last voter of the raft group cannot be removed")

	// ErrInvalidMember is matched by the errors of AddMember for an ID or
	// address that cannot be added; the message says why.
	ErrInvalidMember = errors.New("coordinator: invalid raft member")
)

// NotLeaderError is the error of ApplyLocal on a node that is not the raft
// leader. It matches ErrNotLeader, and also ErrClosed when the node is
// shutting down.
type NotLeaderError struct {
	// LeaderID is the broker ID of the leader, -1 if none is known.
	LeaderID int32
	// LeaderAdminAddr is the admin endpoint of the leader, "" if unknown.
	LeaderAdminAddr string
	// Closing is set when this node is shutting down.
	Closing bool
}

func (e *NotLeaderError) Error() string {
	switch {
	case e.Closing:
		return ErrNotLeader.Error() + ": this sidecar is shutting down; send the request to another sidecar"
	case e.LeaderAdminAddr != "":
		return fmt.Sprintf("%s: the leader is broker %d at admin address %s", ErrNotLeader, e.LeaderID, e.LeaderAdminAddr)
	case e.LeaderID >= 0:
		return fmt.Sprintf("%s: the leader is broker %d, whose admin address is not registered yet; retry shortly", ErrNotLeader, e.LeaderID)
	default:
		return ErrNotLeader.Error() + ": no leader is known yet (election in progress or no quorum); retry shortly"
	}
}

// Is reports whether target is ErrNotLeader, or ErrClosed when the node is
// shutting down.
func (e *NotLeaderError) Is(target error) bool {
	return target == ErrNotLeader || (e.Closing && target == ErrClosed)
}
