package fsm

import "errors"

// The messages keep the "coordinator:" prefix: the state machine is the
// controller's, and operators meet these errors under that name.
var (
	// ErrMalformedCommand is matched by the errors of DecodeCommand for
	// input that is not a well-formed command: too short, not JSON, unknown
	// or misspelled fields, trailing data.
	ErrMalformedCommand = errors.New("coordinator: malformed command")

	// ErrUnknownCommand is matched by the errors of DecodeCommand for a
	// command type or version this sidecar does not know. A newer sidecar
	// proposed it: upgrade every sidecar of the group to the same version.
	ErrUnknownCommand = errors.New("coordinator: unknown command type or version")

	// ErrInvalidSnapshot is matched by the error of FSM.Restore when the
	// snapshot cannot be decoded, has an unknown version or breaks an
	// invariant of State. The FSM keeps its previous state.
	ErrInvalidSnapshot = errors.New("coordinator: invalid snapshot")

	// ErrInvalidState is matched by the errors of State.Validate.
	ErrInvalidState = errors.New("coordinator: invalid state")

	// ErrInvalidName is matched by the errors of ValidateMirrorName and
	// ValidateTopicName; the message names the rule that was broken.
	ErrInvalidName = errors.New("coordinator: invalid name")

	// ErrInvalidPattern is matched by the errors of ValidatePattern.
	ErrInvalidPattern = errors.New("coordinator: invalid topic pattern")
)
