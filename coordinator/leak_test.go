package coordinator

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: every
// goroutine this package starts must end by the time its owner is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
