package multihost

import (
	"fmt"
	"os"
	"testing"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars shared by every test of this package:
// a 2-node source in hosts s1 and s2, a 3-node destination in hosts d1 to
// d3, each destination host with its broker and its sidecar. The sidecars
// are configured as docs/installation.md ("Three hosts") tells operators:
// the example config's listeners changed to every interface, the host's
// address advertised (testbed.StartSidecars).
var env *testbed.Env

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "multihost: skipped: the multi-host bed needs root (network namespaces)")
		os.Exit(0)
	}
	opts := testbed.DefaultEnvOptions()
	opts.MultiHost = true
	opts.Source.Nodes = 2
	opts.Sidecars = true
	testbed.Main(m, opts, &env)
}
