package fsm

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPure checks what DESIGN.md promises about Apply through the imports:
// the state machine depends on no Kafka client, no network package, no
// raft (whose package holds its network transport) and no logger (zap
// brings net/http along). Every sidecar must reach the same state from the
// same log, and a package that cannot reach the network or a clock through
// its imports is easy to keep deterministic.
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list -deps is not available here: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/twmb/franz-go", "github.com/hashicorp/", "go.uber.org/zap", "net", "crypto/tls", "os/exec"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") || (strings.HasSuffix(banned, "/") && strings.HasPrefix(dep, banned)) {
				t.Errorf("coordinator/fsm depends on %s", dep)
			}
		}
	}
}
