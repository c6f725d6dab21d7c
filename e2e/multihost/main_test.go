package multihost

import (
	"fmt"
	"os"
	"testing"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars shared by every test of this package:
// a 2-node source in hosts s1 and s2, a 3-node destination in hosts d1 to
// d3, each destination host with its broker and its sidecar.
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
	opts.SidecarConfigFor = sidecarAddresses
	testbed.Main(m, opts, &env)
}

// sidecarAddresses is the part of a sidecar's configuration that names its
// addresses, the only part a multi-host deployment changes from the example
// config (deploy/examples/sidecar.properties) besides local.broker.id,
// local.bootstrap.servers and raft.peers, which the bed sets from the
// hosts.
//
// A sidecar registers the address it binds as the one its peers use, so
// today it binds its host's own address. Once admin.advertised.listener and
// raft.advertised.listener exist, this becomes what docs/ tell operators
// (the example's listeners on every interface, the host's address
// advertised), and every test of the package runs on that unchanged.
func sidecarAddresses(s *testbed.Sidecar) map[string]string {
	return map[string]string{
		"admin.listener": s.AdminAddr,
		"raft.listener":  s.RaftAddr,
		"http.listener":  s.HTTPAddr,
	}
}
