package deploycheck

import (
	"os"
	"os/exec"
	"testing"
)

// The alert rules are valid, pass their unit tests (each alert fires on the
// series that should fire it, after its "for", and not on healthy ones),
// and the example configuration loads them. Needs promtool (Debian's
// prometheus package, which scripts/setup.sh installs).
func TestAlertRules(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		requireInCI(t, "promtool not found (scripts/setup.sh installs the prometheus package)")
	}
	for _, args := range [][]string{
		{"check", "rules", "sidemirror-rules.yml"},
		{"test", "rules", "sidemirror-rules_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = "../../deploy/prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// requireInCI skips the test on a developer machine and fails it in CI,
// where scripts/setup.sh installed everything.
func requireInCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}
