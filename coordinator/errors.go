package coordinator

import "errors"

// ErrNoAuthorizer is returned when the destination brokers run without an
// authorizer, so read-only mirror topics cannot be enforced.
var ErrNoAuthorizer = errors.New("coordinator: the destination cluster has no authorizer, so mirror topics cannot be made read-only; " +
	"enable one on the brokers (authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer) " +
	"or set mirror.readonly.enforcement=none on the mirror to mirror without protection")

// errNoCoordinator means no sidecar coordinates a mirror's state yet
// (__mirror_state is being created or has no leader).
var errNoCoordinator = errors.New("coordinator: no coordinator for the mirror's state yet")
