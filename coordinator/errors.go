package coordinator

import "errors"

// errNoCoordinator means no sidecar coordinates a mirror's state yet
// (__mirror_state is being created or has no leader).
var errNoCoordinator = errors.New("coordinator: no coordinator for the mirror's state yet")
